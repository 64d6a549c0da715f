package iceberg

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/icewriter/iceberg/internal/commit"
	"github.com/icewriter/iceberg/internal/pipeline"
)

// Router writes into many tables of one catalog through one entry point, as a CDC pipeline that writes every
// table of a database, or a Kafka sink that routes topics or a field to tables, needs: Write, Upsert, Delete and
// Apply name the table; a table is opened on first sight, or created from the first record's schema (with the
// partition spec, identifier fields and properties WithTableConfig gives it); each table has a Writer of its
// own (its buffer, keys, schema evolution, commit loop and stats), while the memory limit and the encoders are
// the router's, shared by all tables. On a catalog that commits several tables atomically, the tables with
// something to commit commit together, in rounds (see Flush and WithPerTableCommits); each table can be in a
// bulk or a live phase (see Phase).
//
// A Router is safe for concurrent use. Calls on one table are ordered as a Writer orders them.
type Router struct {
	cat     catalog.Catalog
	opts    routerOptions
	events  *callbacks // the router's own events (WithRouterHooks)
	shared  *sharedBudget
	budget  Option        // puts a table's writer on shared, with the router's memory limit and encoders
	changes ChangeColumns // Apply's columns (with their defaults): left out of a table created by Apply

	mu     sync.Mutex
	tables map[string]*routedTable // by identKey (identifier parts may hold dots)
	closed bool

	srcMu   sync.Mutex
	sources map[string]*routedSource // by partition

	// Commit rounds (router_rounds.go, internal/commit/rounds.go); rounds is nil when tables commit one by one.
	rounds     *commit.Rounds
	wcat       catalog.Catalog // the catalog the writers commit through (the round catalog with rounds)
	cutMu      sync.Mutex      // a round's cut, and checkpoints that mark several tables
	roundReqs  chan roundRequest
	roundsStop chan struct{}
	roundsDone chan struct{}
}

// routedTable is a table the router opened or is opening: ready is closed once w or err is set.
type routedTable struct {
	ident table.Identifier
	ready chan struct{}
	// creates: the open may create the table (its call had a first record). A call that may create it and
	// waited on an open that may not (Open, Delete) opens again itself when that one found no table.
	creates bool
	w       *Writer
	err     error
	// callMu is held shared by every call on the table and exclusively by SetPhase, so that a phase change
	// sees no call in flight.
	callMu sync.RWMutex
	phase  atomic.Int32        // Phase
	live   pipeline.SealPolicy // the live phase's seal policy, kept while the table is in its bulk phase
}

// TableConfig is what the router needs to know about a table it opens, besides the options every table gets.
type TableConfig struct {
	// Create configures the table when the router creates it from the first record's schema: PartitionBy,
	// IdentifierFields, FormatVersion, TableProperties, Location, ColumnDefault. Unused for a table that exists.
	Create []CreateOption
	// Options are this table's writer options, applied after WithWriterOptions' (WithKeys, WithMode, ...).
	// WithMemoryLimit and WithMaxInFlight here are ignored: the budget and the encoders are the router's.
	Options []Option
	// NoCreate makes a missing table an error (wrapping catalog.ErrNoSuchTable) instead of creating it.
	NoCreate bool
	// Phase is the phase the table starts in (SetPhase switches it). Default: PhaseLive.
	Phase Phase
}

// RouterOption configures a Router.
type RouterOption func(*routerOptions)

type routerOptions struct {
	writer   []Option
	config   func(ctx context.Context, ident table.Identifier, first *arrow.Schema) (TableConfig, error)
	order    func(partition, a, b string) int // total: WithPositionOrder's, else ComparePositions
	perTable bool
	bulkSize int64
	hooks    []Hook
}

// WithRouterHooks adds hooks (see Hook) that hear every table's events and the router's own: each table's writer
// gets them as WithHooks gives them (every event names its table; a table's events arrive in order, events of
// different tables may interleave), and HookRoundCommitted hears each commit round with the tables in it. The
// router's own events are delivered on a goroutine of the router, outside its locks. Hooks must be safe for
// concurrent use. Default: none.
func WithRouterHooks(hooks ...Hook) RouterOption {
	return func(o *routerOptions) { o.hooks = append(o.hooks, hooks...) }
}

// WithBulkTargetFileSize sets the file size the bulk phase rolls at. Default: DefaultBulkTargetFileSize (512 MiB).
func WithBulkTargetFileSize(n int64) RouterOption { return func(o *routerOptions) { o.bulkSize = n } }

// WithPerTableCommits makes every table commit on its own, as separate Writers do, even on a catalog that
// commits several tables atomically. Default: off: on such a catalog (iceberg-go's REST catalog when the server
// offers POST /transactions/commit, and this module's SQL catalogs, SQLite included) the tables with something
// to commit commit together, in rounds (see Router.Flush).
func WithPerTableCommits() RouterOption { return func(o *routerOptions) { o.perTable = true } }

// WithWriterOptions sets the options of every table's writer: flush policy, mode, checkpoints, writer ID,
// schema evolution, callbacks. WithMemoryLimit and WithMaxInFlight among them bound the router as a whole: one
// memory budget for the rows of all tables (default DefaultMemoryLimit, 256 MiB) and one pool of encoders
// (default DefaultMaxInFlight, 2 batches encoding at once across all tables). WithWriterID gives every table's
// writer the same ID; an ID is scoped to its table (fencing, checkpoints), so that is what a restarted router
// needs. WithKeyIndexBytes and ChangeColumns.VersionBytes (of WithChangeColumns here) are budgets of the router
// too, shared by the tables' key indexes and by their versions of Apply's keys: a table whose index would take
// the shared budget past its limit spills its keys to local disk as a lone writer past its own budget does (see
// WithKeyIndexBytes); one still past it (the other tables hold the budget) turns its index off (logged,
// Stats.KeyIndexBytes 0) and falls back to equality deletes. Default: none.
func WithWriterOptions(opts ...Option) RouterOption {
	return func(o *routerOptions) { o.writer = append(o.writer, opts...) }
}

// WithTableConfig sets the callback the router asks, once per table it opens, for the table's creation
// settings and writer options. first is the schema of the record that made the router open the table (what a
// missing table is created with), nil when the table was opened by Open or Delete. An error fails the call that
// opened the table, and the next call on the table asks again. Default: no callback (tables are created
// unpartitioned, without identifier fields, format version 2).
func WithTableConfig(fn func(ctx context.Context, ident table.Identifier, first *arrow.Schema) (TableConfig, error)) RouterOption {
	return func(o *routerOptions) { o.config = fn }
}

// NewRouter makes a router over cat. It opens no table: each is opened on first sight (or by Open). The writer
// options are validated here. With commit rounds it starts the goroutine that runs them, which Close or Abort
// stops.
func NewRouter(cat catalog.Catalog, opts ...RouterOption) (*Router, error) {
	ro := routerOptions{bulkSize: DefaultBulkTargetFileSize}
	for _, f := range opts {
		f(&ro)
	}
	if err := validateHooks(ro.hooks); err != nil {
		return nil, err
	}
	var writerHooks []Hook // the hooks that want a writer's events, not only the router's
	for _, h := range ro.hooks {
		if hookKinds(h)&^(1<<hookRound) != 0 {
			writerHooks = append(writerHooks, h)
		}
	}
	if len(writerHooks) > 0 {
		ro.writer = append(slices.Clip(ro.writer), WithHooks(writerHooks...))
	}
	o := defaultOptions()
	for _, f := range ro.writer {
		f(&o)
	}
	o.keyed.changes = o.keyed.changes.withDefaults(o.flush.memoryLimit)
	if err := validateOptions(&o); err != nil {
		return nil, err
	}
	// ResumePoint needs a total order: the pairs WithPositionOrder (a writer option) does not compare go by
	// ComparePositions.
	ro.order = func(partition, a, b string) int {
		if c, ok := o.flush.posOrder(partition, a, b); ok {
			return c
		}
		return ComparePositions(a, b)
	}
	if ro.bulkSize <= 0 {
		return nil, optionErr("WithBulkTargetFileSize", "must be positive, got %d", ro.bulkSize)
	}
	// Each table's options end with the router's budget: a table's own WithMemoryLimit or WithMaxInFlight
	// cannot take it apart.
	shared := newSharedBudget(&o)
	limit, inFlight := o.flush.memoryLimit, o.flush.maxInFlight
	r := &Router{
		cat: cat, wcat: cat, opts: ro, shared: shared, changes: o.keyed.changes,
		budget:  func(o *options) { o.shared, o.flush.memoryLimit, o.flush.maxInFlight = shared, limit, inFlight },
		tables:  map[string]*routedTable{},
		sources: map[string]*routedSource{},
	}
	if !ro.perTable {
		r.rounds, r.wcat = commit.NewRounds(cat, o.logger, o.commit.timeout)
	}
	r.events = newCallbacks(newHookSet(ro.hooks), nil, "")
	if r.rounds != nil && r.events.wants(hookRound) {
		r.rounds.OnSent = func(tables []table.Identifier, atomic bool, d time.Duration, err error) {
			r.events.emit(RoundCommit{Tables: tables, Atomic: atomic, Duration: d, At: time.Now(), Err: err})
		}
	}
	if r.rounds != nil {
		wantRound := shared.rows.Gate()
		interval := o.flush.interval
		if interval <= 0 {
			interval = time.Second
		}
		r.roundReqs, r.roundsStop, r.roundsDone = make(chan roundRequest), make(chan struct{}), make(chan struct{})
		go r.roundLoop(interval, wantRound, r.roundsStop, r.roundsDone)
	}
	return r, nil
}

// writer returns the table's writer, opening the table on first sight: created from first (a record's schema)
// when it is missing, unless first is nil or the table's config says NoCreate. Calls that arrive while the
// table opens wait for it; a failed open is forgotten, so the next call tries again.
func (r *Router) writer(ctx context.Context, ident table.Identifier, first *arrow.Schema) (*Writer, error) {
	t, err := r.table(ctx, ident, first)
	if err != nil {
		return nil, err
	}
	return t.w, nil
}

// table is writer's table: the writer and its phase.
func (r *Router) table(ctx context.Context, ident table.Identifier, first *arrow.Schema) (*routedTable, error) {
	if len(ident) == 0 {
		return nil, fmt.Errorf("iceberg: router: empty table identifier")
	}
	key := commit.IdentKey(ident)
	for {
		t, retry, err := r.tableOnce(ctx, key, ident, first)
		if !retry {
			return t, err
		}
	}
}

// tableOnce is one try of table: retry says that an open this call waited for found no table and could not
// create it, while this call can.
func (r *Router) tableOnce(ctx context.Context, key string, ident table.Identifier, first *arrow.Schema) (_ *routedTable, retry bool, _ error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, false, ErrClosed
	}
	t, ok := r.tables[key]
	if !ok {
		t = &routedTable{ident: slices.Clone(ident), ready: make(chan struct{}), creates: first != nil}
		r.tables[key] = t
		r.mu.Unlock()
		var phase Phase
		t.w, phase, t.err = r.open(ctx, t.ident, first)
		if t.err != nil {
			r.mu.Lock()
			delete(r.tables, key)
			r.mu.Unlock()
		} else if phase == PhaseBulk {
			t.live = t.w.enterBulk(r.opts.bulkSize, r.shared.rows.Limit()/2)
			t.phase.Store(int32(PhaseBulk))
		}
		close(t.ready)
		if t.err != nil {
			return nil, false, t.err
		}
		return t, false, nil
	}
	r.mu.Unlock()
	if testHookOpenWait != nil {
		testHookOpenWait()
	}
	select {
	case <-t.ready:
		if t.err != nil {
			// A failed open is gone from r.tables by now: the next try opens the table itself.
			return nil, first != nil && !t.creates && errors.Is(t.err, catalog.ErrNoSuchTable), t.err
		}
		return t, false, nil
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
}

// testHookOpenWait, when set by a test, runs when a call starts waiting for another call's open of its table.
var testHookOpenWait func()

// open makes a table's writer (the router's writer options, the table's config, then the router's budget) and
// returns the phase it starts in.
func (r *Router) open(ctx context.Context, ident table.Identifier, first *arrow.Schema) (*Writer, Phase, error) {
	var cfg TableConfig
	if r.opts.config != nil {
		var err error
		if cfg, err = r.opts.config(ctx, ident, first); err != nil {
			return nil, 0, fmt.Errorf("iceberg: router: table config of %v: %w", ident, err)
		}
	}
	opts := slices.Clone(r.opts.writer)
	if first != nil && !cfg.NoCreate {
		opts = append(opts, WithCreate(first, cfg.Create...))
	}
	opts = append(opts, cfg.Options...)
	opts = append(opts, r.budget)
	w, err := NewWriter(ctx, r.wcat, ident, opts...)
	if err != nil {
		return nil, 0, err
	}
	return w, cfg.Phase, nil
}

// Open opens tables that exist (it creates none), so that their writers are ready and ResumePoint consults
// them: a restarted sink opens every table its sources may route to before resuming them.
func (r *Router) Open(ctx context.Context, idents ...table.Identifier) error {
	for _, ident := range idents {
		if _, err := r.writer(ctx, ident, nil); err != nil {
			return err
		}
	}
	return nil
}

// Writer returns the writer of a table the router has open (LastCheckpoint, Compact, Positions, its Stats),
// and whether it has one. Close and Abort belong to the router: a writer closed alone stays in the router and
// returns ErrClosed.
func (r *Router) Writer(ident table.Identifier) (*Writer, bool) {
	r.mu.Lock()
	t, ok := r.tables[commit.IdentKey(ident)]
	r.mu.Unlock()
	if !ok {
		return nil, false
	}
	<-t.ready
	return t.w, t.err == nil
}

// Tables returns the identifiers of the tables the router has open, sorted.
func (r *Router) Tables() []table.Identifier {
	var out []table.Identifier
	for _, t := range r.opened() {
		out = append(out, t.ident)
	}
	return out
}

// open_ returns the tables opened so far (waiting for those being opened), sorted by identifier.
func (r *Router) opened() []*routedTable {
	r.mu.Lock()
	ts := make([]*routedTable, 0, len(r.tables))
	for _, t := range r.tables {
		ts = append(ts, t)
	}
	r.mu.Unlock()
	out := ts[:0]
	for _, t := range ts {
		<-t.ready
		if t.err == nil {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b *routedTable) int { return slices.Compare(a.ident, b.ident) })
	return out
}

// Write is Writer.Write into the named table, opened (or created from rec's schema) on first sight.
func (r *Router) Write(ctx context.Context, ident table.Identifier, rec arrow.RecordBatch) error {
	return r.call(ctx, "", ident, rec, opInsert)
}

// Upsert is Writer.Upsert into the named table. A table created by it has the keys WithTableConfig names
// (IdentifierFields, or WithKeys in its options).
func (r *Router) Upsert(ctx context.Context, ident table.Identifier, rec arrow.RecordBatch) error {
	return r.call(ctx, "", ident, rec, opUpsert)
}

// Delete is Writer.Delete on the named table. It never creates a table: on a missing one it returns an error
// wrapping catalog.ErrNoSuchTable.
func (r *Router) Delete(ctx context.Context, ident table.Identifier, keys arrow.RecordBatch) error {
	return r.call(ctx, "", ident, keys, opDelete)
}

// Apply is Writer.Apply on the named table. A table created by it takes the record's columns less the op
// column and the before-image key columns (WithChangeColumns among the writer options names them).
func (r *Router) Apply(ctx context.Context, ident table.Identifier, rec arrow.RecordBatch) error {
	return r.call(ctx, "", ident, rec, opApply)
}

// opApply names Apply among the router's calls (the pipeline knows only inserts, upserts and deletes).
const opApply opKind = 255

// call opens the table and hands the record to its writer as the partition source's.
func (r *Router) call(ctx context.Context, source string, ident table.Identifier, rec arrow.RecordBatch, kind opKind) error {
	t, err := r.table(ctx, ident, r.createSchema(rec, kind))
	if err != nil {
		return err
	}
	t.callMu.RLock()
	defer t.callMu.RUnlock()
	if kind != opInsert && Phase(t.phase.Load()) == PhaseBulk {
		return fmt.Errorf("%w: table %v", ErrBulkPhase, ident)
	}
	w := t.w
	if source != "" {
		if err := r.source(source).route(ctx, r, ident, w, source); err != nil {
			return err
		}
	}
	switch kind {
	case opInsert:
		return w.write(ctx, source, rec)
	case opUpsert:
		return w.upsert(ctx, source, rec)
	case opDelete:
		return w.delete(ctx, source, rec)
	default:
		return w.apply(ctx, source, rec)
	}
}

// createSchema is the schema a table first seen in a call of kind is created with: the record's, less Apply's
// op and before-image columns; nil for Delete (its keys are no table's shape).
func (r *Router) createSchema(rec arrow.RecordBatch, kind opKind) *arrow.Schema {
	if rec == nil || kind == opDelete {
		return nil
	}
	sc := rec.Schema()
	if kind != opApply {
		return sc
	}
	fields := make([]arrow.Field, 0, sc.NumFields())
	for _, f := range sc.Fields() {
		if f.Name == r.changes.Op {
			continue
		}
		if rest, ok := strings.CutPrefix(f.Name, r.changes.BeforePrefix); ok && sc.HasField(rest) {
			continue
		}
		fields = append(fields, f)
	}
	return arrow.NewSchema(fields, nil)
}

// Checkpoint is Writer.Checkpoint on every table the router has open: the token covers every row accepted so
// far into any of them.
func (r *Router) Checkpoint(ctx context.Context, token string) error {
	r.cutMu.Lock()
	defer r.cutMu.Unlock()
	var errs []error
	for _, t := range r.opened() {
		if err := t.w.Checkpoint(ctx, token); err != nil {
			errs = append(errs, fmt.Errorf("table %v: %w", t.ident, err))
		}
	}
	return errors.Join(errs...)
}

// Flush returns when everything accepted before the call is committed on every table (with WithCheckpoints:
// up to each table's last checkpoint), or with the errors that prevented it, each naming its table. With commit
// rounds it runs one: the tables' rows accepted before the call are committed in one multi-table commit.
func (r *Router) Flush(ctx context.Context) error {
	if r.rounds != nil {
		if err := r.round(ctx); err != nil {
			return err
		}
	}
	return r.each(func(w *Writer) error { return w.Flush(ctx) })
}

// flushWriter is Flush for one table's writer (with rounds, a round commits it).
func (r *Router) flushWriter(ctx context.Context, w *Writer) error {
	if r.rounds != nil {
		if err := r.round(ctx); err != nil {
			return err
		}
	}
	return w.Flush(ctx)
}

// Close flushes and closes every table's writer, as Writer.Close does; later calls return ErrClosed.
func (r *Router) Close(ctx context.Context) error {
	return r.stop(ctx, true, func(w *Writer) error { return w.Close(ctx) })
}

// Abort discards everything not yet committed on every table and closes the router, as Writer.Abort does.
func (r *Router) Abort(ctx context.Context) error {
	return r.stop(ctx, false, func(w *Writer) error { return w.Abort(ctx) })
}

func (r *Router) stop(ctx context.Context, flush bool, f func(*Writer) error) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	r.closed = true
	r.mu.Unlock()
	var roundErr error
	if flush && r.rounds != nil {
		// The last round; rounds go on until the writers are closed, for a call still in flight.
		roundErr = r.round(ctx)
	}
	err := r.each(f)
	for _, t := range r.opened() {
		r.shared.rows.Leave(t.w.pipe)
	}
	if r.rounds != nil {
		close(r.roundsStop)
		<-r.roundsDone
	}
	r.events.close(nil)
	if werr := r.events.wait(ctx); err == nil && roundErr == nil {
		err = werr
	}
	if err == nil && roundErr != nil {
		err = roundErr
	}
	return err
}

// each runs f on every open table's writer at once and joins the errors, each naming its table.
func (r *Router) each(f func(*Writer) error) error {
	ts := r.opened()
	errs := make([]error, len(ts))
	var wg sync.WaitGroup
	for i, t := range ts {
		wg.Go(func() {
			if err := f(t.w); err != nil {
				errs[i] = fmt.Errorf("table %v: %w", t.ident, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// RouterStats are a router's counters: each table's, their sum, and the shared memory budget.
type RouterStats struct {
	Tables []TableStats // sorted by identifier
	Total  Stats        // the sum of the tables' counters (Epoch and LastCommittedSeq: the largest)
	// MultiTableCommits counts the commit rounds sent as one multi-table commit; AtomicCommits reports whether
	// the router commits in rounds (false: table by table, WithPerTableCommits or a catalog without them).
	MultiTableCommits int64
	AtomicCommits     bool
	// MemoryUsed is the bytes of rows all tables hold now (open buffers, batches waiting for or in encoding);
	// MemoryBudget is what they may hold before calls wait: the memory limit less the encoders' reserve.
	MemoryUsed, MemoryBudget int64
	// KeyIndexUsed is the bytes the tables' key indexes hold together; KeyIndexBudget their shared budget
	// (WithKeyIndexBytes among the writer options).
	KeyIndexUsed, KeyIndexBudget int64
}

// TableStats are one table's counters.
type TableStats struct {
	Table table.Identifier
	Stats Stats
}

// Stats reports every open table's counters and their sum.
func (r *Router) Stats() RouterStats {
	s := RouterStats{MemoryUsed: r.shared.rows.InUse(), MemoryBudget: r.shared.rows.Limit(),
		KeyIndexUsed: r.shared.index.used.Load(), KeyIndexBudget: r.shared.index.limit}
	if r.rounds != nil {
		s.MultiTableCommits, s.AtomicCommits = r.rounds.Multi(), !r.rounds.Unsupported()
	}
	for _, t := range r.opened() {
		ts := t.w.Stats()
		s.Tables = append(s.Tables, TableStats{Table: t.ident, Stats: ts})
		s.Total.add(ts)
	}
	return s
}

// add sums o's counters into s.
func (s *Stats) add(o Stats) {
	s.RowsAccepted += o.RowsAccepted
	s.BytesAccepted += o.BytesAccepted
	s.RowsCommitted += o.RowsCommitted
	s.FilesWritten += o.FilesWritten
	s.BytesWritten += o.BytesWritten
	s.DeleteFiles += o.DeleteFiles
	s.FilesRewritten += o.FilesRewritten
	s.Batches += o.Batches
	s.Commits += o.Commits
	s.Retries += o.Retries
	s.Conflicts += o.Conflicts
	s.BufferedRows += o.BufferedRows
	s.BufferedBytes += o.BufferedBytes
	s.UncommittedBatches += o.UncommittedBatches
	s.UncommittedRows += o.UncommittedRows
	s.DiscardedRows += o.DiscardedRows
	s.ChangesSkipped += o.ChangesSkipped
	s.KeyIndexBytes += o.KeyIndexBytes
	s.KeyIndexSpilledBytes += o.KeyIndexSpilledBytes
	s.LastCommittedSeq = max(s.LastCommittedSeq, o.LastCommittedSeq)
	s.Epoch = max(s.Epoch, o.Epoch)
}

// ComparePositions is the default order of source positions: two decimal integers (digits only, as Kafka
// offsets) by value, anything else byte-wise as strings. The empty position, which marks the start of a
// partition, comes before every other.
func ComparePositions(a, b string) int {
	if isDigits(a) && isDigits(b) {
		a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
		if c := cmp.Compare(len(a), len(b)); c != 0 {
			return c
		}
	}
	return strings.Compare(a, b)
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// SetPhase switches an open table to phase (see Phase). Calls on the table wait meanwhile. Going live commits
// what the bulk phase sealed (a round, with atomic commits) and loads the key index from the table's files, the
// bulk ones included, so that upserts after a bulk load become deletion vectors (format v3, merge-on-read,
// within WithKeyIndexBytes); going to bulk turns the index off.
func (r *Router) SetPhase(ctx context.Context, ident table.Identifier, phase Phase) error {
	if phase != PhaseLive && phase != PhaseBulk {
		return fmt.Errorf("iceberg: router: unknown phase %d", int(phase))
	}
	r.mu.Lock()
	t, ok := r.tables[commit.IdentKey(ident)]
	r.mu.Unlock()
	if !ok {
		return fmt.Errorf("iceberg: router: table %v is not open", ident)
	}
	<-t.ready
	if t.err != nil {
		return t.err
	}
	t.callMu.Lock()
	defer t.callMu.Unlock()
	if Phase(t.phase.Load()) == phase {
		return nil
	}
	if phase == PhaseBulk {
		t.live = t.w.enterBulk(r.opts.bulkSize, r.shared.rows.Limit()/2)
		t.phase.Store(int32(PhaseBulk))
		return nil
	}
	if err := r.flushWriter(ctx, t.w); err != nil {
		return fmt.Errorf("iceberg: router: table %v leaving its bulk phase: %w", ident, err)
	}
	// No round cuts the table while its index loads: a batch it sealed now would be encoded without the index.
	r.cutMu.Lock()
	defer r.cutMu.Unlock()
	err := t.w.leaveBulk(ctx, t.live)
	t.phase.Store(int32(PhaseLive))
	return err
}

// Phase returns the phase of an open table, and whether the table is open.
func (r *Router) Phase(ident table.Identifier) (Phase, bool) {
	r.mu.Lock()
	t, ok := r.tables[commit.IdentKey(ident)]
	r.mu.Unlock()
	if !ok {
		return 0, false
	}
	<-t.ready
	return Phase(t.phase.Load()), t.err == nil
}
