package iceberg

import (
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/icewriter/iceberg/internal/commit"
	"github.com/icewriter/iceberg/internal/maintain"
)

// Hook is a value that wants to hear about what a Writer does: it implements one or more of the Hook*
// interfaces below (HookBatchSealed, HookCommitted, ...), each of one method, and WithHooks hands it to the
// writer. The base type is empty on purpose: wherever an event happens the writer calls the hooks that
// implement its interface, so a hook takes only the events it cares about, and later versions can add events
// without breaking it. Exporters live in modules of their own (github.com/icewriter/iceberg/otel), so the
// writer links none.
//
// Delivery. Every hook is called on one goroutine of the writer (WithOnCommit's callback is a HookCommitted
// hook there, called before those of WithHooks), in the order the events happened, outside every lock of the
// writer and never on the commit loop: a hook may call any Writer method (Stats, Flush, Compact, even Close),
// and a slow hook delays the hooks after it, never the writer. Events are therefore delivered a little after they happened; each carries its own timestamps
// and durations. A writer makes one commit at a time (runs, compactions, schema changes and maintenance all
// commit inside its commit queue), so a transaction's CommitAttempt, Conflict and Retry events come before the
// event that ends it (HookCommitted for a run, HookCompaction, HookExpiry), and none of another transaction in
// between. Events of NewWriter's own fence (WithWriterID) are not delivered. HookNewWriter is the exception to
// the rule: NewWriter calls it on its own goroutine before it returns, so that a hook knows the writer before
// any of its events (and can read its Stats at once). HookWriterClosed comes last, once Close or Abort stopped
// the commit loop (events of encoders cancelled after that are dropped). A writer without hooks pays nothing for
// them: no event is even built.
//
// Every event names its writer (Table, WriterID). Errors in events are masked as the writer's errors are: they
// carry no secret.
type Hook any

// WithHooks adds hooks (see Hook). Each must implement at least one Hook* interface; NewWriter refuses one that
// implements none. Hooks must be safe for concurrent use when one value serves several writers. Default: none.
func WithHooks(hooks ...Hook) Option {
	return func(o *options) { o.commit.hooks = append(o.commit.hooks, hooks...) }
}

// HookNewWriter is called by NewWriter, on its goroutine, once the writer is ready and before NewWriter returns:
// before any other event of the writer.
type HookNewWriter interface{ OnNewWriter(w *Writer) }

// HookWriterClosed is called once Close or Abort stopped the writer's commit loop: the writer's last event.
type HookWriterClosed interface{ OnWriterClosed(w *Writer) }

// HookBatchSealed is called for each batch sealed: the open buffer became a batch for the encoders.
type HookBatchSealed interface{ OnBatchSealed(BatchSealed) }

// HookFileWritten is called for each data or equality delete file an encoder wrote.
type HookFileWritten interface{ OnFileWritten(FileWritten) }

// HookCommitAttempt is called after each attempt of every catalog transaction of the writer (its runs,
// compactions, schema changes, maintenance), whether it applied or failed, and why.
type HookCommitAttempt interface{ OnCommitAttempt(CommitAttempt) }

// HookCommitted is called after each run committed. WithOnCommit registers its callback as one of these.
type HookCommitted interface{ OnCommitted(CommitInfo) }

// onCommitHook is WithOnCommit's callback as a HookCommitted hook.
type onCommitHook func(CommitInfo)

func (f onCommitHook) OnCommitted(ci CommitInfo) { f(ci) }

// writerHooks is the writer's hooks: WithOnCommit's callback first (it ran before the hooks when it had a
// delivery of its own, and still does), then those of WithHooks in their order.
func (o *options) writerHooks() []Hook {
	if o.commit.onCommit == nil {
		return o.commit.hooks
	}
	return append([]Hook{onCommitHook(o.commit.onCommit)}, o.commit.hooks...)
}

// HookConflict is called for each attempt the catalog rejected because the table moved.
type HookConflict interface{ OnConflict(Conflict) }

// HookRetry is called before each retry of a transaction, with the wait before it and why the attempt before
// it failed.
type HookRetry interface{ OnRetry(Retry) }

// HookFenced is called when the writer finds its ID taken over by a newer writer (ErrFenced) and stops.
type HookFenced interface{ OnFenced(Fenced) }

// HookCompaction is called after each compaction, Compact's and the automatic ones, done or failed.
type HookCompaction interface{ OnCompaction(Compaction) }

// HookDeleteConversion is called after each conversion of equality deletes (ConvertEqualityDeletes and the
// maintainer's, WithDeleteConversionEvery), done or failed; not when a due pass found none.
type HookDeleteConversion interface{ OnDeleteConversion(DeleteConversion) }

// HookExpiry is called after each snapshot expiry the writer ran, done or failed (not when nothing was due).
type HookExpiry interface{ OnExpiry(Expiry) }

// HookRoundCommitted is called after each commit round of a Router (WithRouterHooks) sent its tables' runs to
// the catalog: one event per send, naming every table in it. Round commits are a router's, so a hook given to a
// Writer alone never hears of one.
type HookRoundCommitted interface{ OnRoundCommitted(RoundCommit) }

// RoundCommit describes one send of a Router's commit round: the runs of several tables, committed as one
// multi-table commit (Atomic) or, on a catalog that refused those, one after the other. A retry after a
// conflict is a send of its own.
type RoundCommit struct {
	Tables []table.Identifier // the tables whose runs were sent, sorted
	// Atomic is true when the runs went in one multi-table commit (all applied or none did), false when they
	// were committed table by table (one table alone, or a catalog without multi-table commits).
	Atomic   bool
	Err      error         // nil when every run applied; else the first table's error (each writer's retry proves or redoes its own)
	Duration time.Duration // the catalog's answer, every table's
	At       time.Time     // when the send ended
}

// HookBackpressure is called after each call that had to wait for room (the memory limit or the limit on
// uncommitted batches) before the writer accepted its rows.
type HookBackpressure interface{ OnBackpressureWait(BackpressureWait) }

// CommitKind names what a catalog transaction of the writer does.
type CommitKind = commit.Kind

const (
	KindRun                   = commit.KindRun          // a run of batches: the rows
	KindFence      CommitKind = "fence"                 // taking a writer ID over (NewWriter with WithWriterID)
	KindCompaction CommitKind = maintain.KindCompaction // Compact, automatic and small-file compaction
	KindSchema     CommitKind = "schema"                // schema evolution
	KindExpiry     CommitKind = maintain.KindExpiry     // snapshot expiry
	KindManifests  CommitKind = maintain.KindManifests  // manifest rewriting
	// KindDeleteConversion: equality deletes converted to position deletes or deletion vectors
	KindDeleteConversion CommitKind = maintain.KindDeleteConversion
)

// BatchSealed describes a batch sealed: the open buffer cut by a flush policy (rows, bytes, interval), a Flush,
// the memory limit, or a checkpoint with WithCheckpoints.
type BatchSealed struct {
	Table    table.Identifier
	WriterID string
	Seq      int64 // the batch's sequence number
	Rows     int64
	Bytes    int64         // Arrow bytes, what the memory limit counts
	Open     time.Duration // from the batch's first row to its seal
	At       time.Time     // when it was sealed
}

// FileWritten describes a file an encoder wrote for a batch.
type FileWritten struct {
	Table    table.Identifier
	WriterID string
	Seq      int64 // the batch whose rows it holds
	Path     string
	Index    int   // the file's place among the batch's files, data files first (0: the first)
	Deletes  bool  // an equality delete file (false: a data file)
	Rows     int64 // records in the file
	Bytes    int64 // the file's size
	// Encode is the encoding of the whole batch, every file of it: iceberg-go writes a batch's files in one
	// call, so a file's own share is not known.
	Encode time.Duration
	At     time.Time // when the batch's encoding ended
}

// CommitAttempt describes one attempt of a catalog transaction: reload, build and the catalog's commit.
type CommitAttempt struct {
	Table    table.Identifier
	WriterID string
	Kind     CommitKind
	What     string // names the transaction as logs and errors do ("commit run 3..5", "compact")
	Attempt  int    // 1 for the first
	Start    time.Time
	Duration time.Duration
	// Sent reports that the attempt reached the catalog's commit; one that failed before (the reload or the
	// build failed) changed nothing.
	Sent bool
	Err  error // nil: the attempt applied
	// Cause is what moved when the catalog rejected the attempt because the table moved ("": Err is no
	// conflict).
	Cause ConflictCause
}

// Conflict describes an attempt the catalog rejected because the table moved (another commit landed first).
type Conflict struct {
	Table    table.Identifier
	WriterID string
	Kind     CommitKind
	What     string
	Attempt  int
	Cause    ConflictCause
	Err      error
}

// Retry describes the retry of a transaction after a failed attempt.
type Retry struct {
	Table    table.Identifier
	WriterID string
	Kind     CommitKind
	What     string
	Attempt  int // the attempt about to start (2 for the first retry)
	// Wait is the backoff before it: 0 when the failed attempt was built on the table the writer's last
	// commit left and the table had moved since (another writer committed), which is no race to back off from.
	Wait  time.Duration
	Cause ConflictCause // the failed attempt's conflict ("": it failed otherwise, see Err)
	Err   error         // why the attempt before failed
}

// Fenced describes the writer finding its ID taken over: it stops (ErrFenced).
type Fenced struct {
	Table      table.Identifier
	WriterID   string
	Kind       CommitKind // the transaction that found it
	What       string
	Epoch      int64 // the epoch this writer held
	TableEpoch int64 // the newer epoch the table holds for the ID
}

// Compaction describes a compaction: Compact's, or the writer's automatic or small-file one.
type Compaction struct {
	Table     table.Identifier
	WriterID  string
	Automatic bool // run by the writer's maintenance (WithAutoCompactEvery, WithSmallFileCompactionEvery), not Compact
	SmallOnly bool // the small-file policy
	Result    CompactResult
	Duration  time.Duration
	Err       error
}

// DeleteConversion describes a conversion of equality deletes: ConvertEqualityDeletes', or the maintainer's.
type DeleteConversion struct {
	Table     table.Identifier
	WriterID  string
	Automatic bool // run by the writer's maintenance (WithDeleteConversionEvery), not ConvertEqualityDeletes
	Result    ConvertResult
	Duration  time.Duration
	Err       error
}

// Expiry describes a snapshot expiry of the writer's maintenance (WithKeepSnapshots, WithExpireOlderThan).
type Expiry struct {
	Table    table.Identifier
	WriterID string
	Expired  int  // snapshots expired (0 when it failed)
	Full     bool // iceberg-go's full cleanup ran (some expired snapshot removed files), not the manifest-only one
	Attempts int
	Duration time.Duration
	Err      error
}

// BackpressureReason says which limit a call waited on.
type BackpressureReason string

const (
	BackpressureMemory      BackpressureReason = "memory"      // WithMemoryLimit: rows held, waiting for encodings
	BackpressureUncommitted BackpressureReason = "uncommitted" // WithMaxUncommitted: batches waiting for commits
)

// BackpressureWait describes a call that waited for room before its rows were accepted (or it gave up).
type BackpressureWait struct {
	Table    table.Identifier
	WriterID string
	Reason   BackpressureReason // the limit that made it wait first
	Duration time.Duration
	Rows     int64 // the call's rows
	Bytes    int64 // the call's Arrow bytes
}

// hookKind indexes the events a writer's hooks want (hookSet.wants).
type hookKind uint

const (
	hookNewWriter hookKind = iota
	hookWriterClosed
	hookSealed
	hookFileWritten
	hookAttempt
	hookCommitted
	hookConflict
	hookRetry
	hookFenced
	hookCompaction
	hookExpiry
	hookBackpressure
	hookRound
	hookConversion
)

// hookSet is the writer's hooks and the events they want.
type hookSet struct {
	hooks []Hook
	wants uint // bit k: a hook wants events of hookKind k
}

func newHookSet(hooks []Hook) hookSet {
	s := hookSet{hooks: hooks}
	for _, h := range hooks {
		s.wants |= hookKinds(h)
	}
	return s
}

// hookKinds returns the bits of the events h wants.
func hookKinds(h Hook) uint {
	var k uint
	for kind, ok := range [...]bool{
		hookNewWriter: is[HookNewWriter](h), hookWriterClosed: is[HookWriterClosed](h),
		hookSealed: is[HookBatchSealed](h), hookFileWritten: is[HookFileWritten](h),
		hookAttempt: is[HookCommitAttempt](h), hookCommitted: is[HookCommitted](h),
		hookConflict: is[HookConflict](h), hookRetry: is[HookRetry](h), hookFenced: is[HookFenced](h),
		hookCompaction: is[HookCompaction](h), hookExpiry: is[HookExpiry](h),
		hookBackpressure: is[HookBackpressure](h), hookRound: is[HookRoundCommitted](h),
		hookConversion: is[HookDeleteConversion](h),
	} {
		if ok {
			k |= 1 << kind
		}
	}
	return k
}

func is[H any](h Hook) bool {
	_, ok := h.(H)
	return ok
}

// validateHooks refuses a hook that implements no Hook interface (a typo in a method name, a pointer receiver
// given a value).
func validateHooks(hooks []Hook) error {
	for i, h := range hooks {
		if h == nil || hookKinds(h) == 0 {
			return optionErr("WithHooks", "hook %d (%T) implements no Hook interface", i, h)
		}
	}
	return nil
}

// Events of the writer's own life, queued like the others.
type (
	writerOpened struct{ w *Writer }
	writerClosed struct{ w *Writer }
)

// dispatch calls the hooks that want ev (on the delivering goroutine).
func (s *hookSet) dispatch(ev any) {
	switch ev := ev.(type) {
	case writerOpened:
		each(s.hooks, func(h HookNewWriter) { h.OnNewWriter(ev.w) })
	case writerClosed:
		each(s.hooks, func(h HookWriterClosed) { h.OnWriterClosed(ev.w) })
	case BatchSealed:
		each(s.hooks, func(h HookBatchSealed) { h.OnBatchSealed(ev) })
	case FileWritten:
		each(s.hooks, func(h HookFileWritten) { h.OnFileWritten(ev) })
	case CommitAttempt:
		each(s.hooks, func(h HookCommitAttempt) { h.OnCommitAttempt(ev) })
	case CommitInfo:
		each(s.hooks, func(h HookCommitted) { h.OnCommitted(ev) })
	case Conflict:
		each(s.hooks, func(h HookConflict) { h.OnConflict(ev) })
	case Retry:
		each(s.hooks, func(h HookRetry) { h.OnRetry(ev) })
	case Fenced:
		each(s.hooks, func(h HookFenced) { h.OnFenced(ev) })
	case Compaction:
		each(s.hooks, func(h HookCompaction) { h.OnCompaction(ev) })
	case Expiry:
		each(s.hooks, func(h HookExpiry) { h.OnExpiry(ev) })
	case DeleteConversion:
		each(s.hooks, func(h HookDeleteConversion) { h.OnDeleteConversion(ev) })
	case BackpressureWait:
		each(s.hooks, func(h HookBackpressure) { h.OnBackpressureWait(ev) })
	case RoundCommit:
		each(s.hooks, func(h HookRoundCommitted) { h.OnRoundCommitted(ev) })
	}
}

// each calls f with every hook that implements H, in the order WithHooks gave them.
func each[H any](hooks []Hook, f func(H)) {
	for _, h := range hooks {
		if x, ok := h.(H); ok {
			f(x)
		}
	}
}
