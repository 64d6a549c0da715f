// Package iceberg writes Arrow record batches and Go structs into Apache Iceberg tables.
//
// A Writer buffers rows under a size and interval policy, encodes and uploads Parquet files in parallel, and
// hands finished batches to one ordered commit loop per table that coalesces whatever is ready into a single
// catalog commit. Throughput is therefore not bound by catalog commit latency: encoding and uploading never wait
// for commits, and one commit carries every batch that is ready.
//
//	cat, _ := catalog.Open(ctx, "sqlite://./data/catalog.db")
//	w, _ := iceberg.NewWriter(ctx, cat, table.Identifier{"events", "clicks"}, iceberg.WithCreate(schema))
//	_ = w.Write(ctx, batch)
//	_ = w.Close(ctx)
package iceberg

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/icewriter/iceberg/internal/commit/cow"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/icewriter/iceberg/internal/arrowx"
	"github.com/icewriter/iceberg/internal/changes"
	"github.com/icewriter/iceberg/internal/commit"
	"github.com/icewriter/iceberg/internal/conform/structs"
	"github.com/icewriter/iceberg/internal/encode"
	"github.com/icewriter/iceberg/internal/maintain"
	"github.com/icewriter/iceberg/internal/pipeline"
	"github.com/icewriter/iceberg/internal/redact"
)

// Writer writes rows into one Iceberg table. It is safe for concurrent use; concurrent calls are ordered by the
// moment each is accepted.
type Writer struct {
	// env is what every stage shares: the catalog and table, the writer ID and its epoch, masking, logging.
	env *writerEnv
	// keys is the key stage: the key columns, in-batch resolution and the key index. It locks its own state
	// (see keyStage): the pipeline's commitMu before keys.mu.
	keys *keyStage
	// changes is Apply's stage: the change columns and, with a version column, the versions of keys.
	changes *changes.Stage

	// pipe moves batches from the calls to the committer: buffer, budgets, queue, encoders, commit loop.
	pipe  *pipeline.Pipeline[*batch]
	files *encode.Encoder[*batch] // writes batches as data files
	runs  *runStage               // forms each run and hands it to the Committer
	cbs   *callbacks              // WithOnCommit and WithHooks, delivered outside the commit loop

	// view is the table as the writer last saw it and the conformer for its schema.
	view    *tableView
	structs *structs.Stage // WriteStructs and UpsertStructs: Go values to record batches

	// maint is expiry, manifest rewrites, compactions and conversions: scheduled by the commit loop after its
	// commits, compactions and conversions run off the commit path
	maint *maintain.Maintainer
	own   *ownFiles // the files of the writer's ID: their marked names, the removal of earlier epochs' orphans
}

// Stats are the writer's counters.
type Stats struct {
	RowsAccepted       int64 // rows accepted by Write
	BytesAccepted      int64 // Arrow bytes accepted
	RowsCommitted      int64
	FilesWritten       int64
	BytesWritten       int64 // bytes of data files written
	DeleteFiles        int64 // delete files committed (equality deletes and deletion vectors)
	FilesRewritten     int64 // data files rewritten by copy-on-write commits
	Batches            int64 // batches sealed
	Commits            int64
	Retries            int64 // commit attempts beyond the first
	Conflicts          int64 // attempts the catalog rejected because the table moved, however worded (ConflictCause)
	BufferedRows       int64 // rows in the open buffer
	BufferedBytes      int64 // bytes held: the open buffer, batches to encode, metadata of uncommitted files
	UncommittedBatches int   // sealed batches not yet committed
	UncommittedRows    int64
	DiscardedRows      int64 // rows dropped by Abort, or by Close after the last checkpoint
	ChangesSkipped     int64 // Apply's changes older than their key's version (ChangeColumns.Version)
	LastCommittedSeq   int64
	Epoch              int64
	// OldestUncommitted is when the oldest row accepted and not yet committed (or discarded) was accepted,
	// zero when there is none: time.Since(it) is how far the table trails the writer (its freshness). It is the
	// first row of the oldest batch or buffer holding such rows, so an age read from it is never too low.
	OldestUncommitted time.Time
	// LastCommit is when the writer's latest commit returned (zero: none yet).
	LastCommit time.Time
	// KeyIndexBytes is the memory the key index holds (WithKeyIndexBytes); 0 when the index is off (no key,
	// copy-on-write, format version 2, a bulk phase, or it fell back to equality deletes: the log says why).
	KeyIndexBytes int64
	// KeyIndexSpilledBytes is the size of the key index's runs on local disk: the keys it wrote out of memory
	// when it passed its budget (WithKeyIndexBytes), in WithKeyIndexSpillDir (default os.TempDir()). 0 while the
	// index fits in memory or is off.
	KeyIndexSpilledBytes int64
}

// NewWriter opens a writer on an existing table (or creates it, with WithCreate).
//
// With WithWriterID, NewWriter takes over the ID: it bumps the ID's epoch in a table property (with an empty
// snapshot, so that an older process's pending commit fails its requirement and then finds itself fenced) and
// continues the ID's sequence numbers. Without it the writer uses a random ID.
//
// No error the writer returns or logs carries a secret. A catalog opened by this project's catalog.Open masks
// the secrets of its URI and properties; any other catalog is wrapped here so that at least secret shapes
// (bearer tokens, client secrets, presigned URL signatures, passwords in URLs) a server or an object store may
// echo are masked. Errors from storage surface masked the same way (see package catalog for errors.Is and
// errors.As through the masking).
func NewWriter(ctx context.Context, cat catalog.Catalog, ident table.Identifier, opts ...Option) (*Writer, error) {
	o := defaultOptions()
	for _, f := range opts {
		f(&o)
	}
	cat = redact.WrapCatalog(cat, nil)
	red := redact.RedactorOf(cat)
	o.logger = redact.Logger(o.logger, red)
	o.keyed.changes = o.keyed.changes.withDefaults(o.flush.memoryLimit)
	if err := validateOptions(&o); err != nil {
		return nil, err
	}
	if o.schema.createErr != nil {
		return nil, structs.ShredErr(o.schema.createErr)
	}
	tbl, created, err := loadOrCreate(ctx, cat, ident, &o)
	if err != nil {
		return nil, err
	}
	if v := tbl.Metadata().Version(); v < 3 && len(o.schema.defaults) > 0 {
		col := slices.Sorted(maps.Keys(o.schema.defaults))[0]
		return nil, columnErr(col, ErrNotSupported, "WithColumnDefaults: table %v is format version %d: a default needs version 3", ident, v)
	}
	shred, err := shredLayout(&o, tbl)
	if err != nil {
		return nil, err
	}
	tabs := commit.NewTables()
	tabs.Loaded(tbl)
	if o.maint.smallFiles < 0 {
		o.maint.smallFiles = 0
		if created {
			o.maint.smallFiles = DefaultSmallFileCompactionEvery
		}
	}
	if o.maint.keepSnapshots < 0 {
		o.maint.keepSnapshots = 0
		if created {
			o.maint.keepSnapshots = DefaultKeepSnapshots
		}
	}
	if !o.stableID {
		o.writerID = uuid.NewString()
	}
	mem := o.mem
	if mem == nil {
		mem = memory.NewGoAllocator()
	}
	env := &writerEnv{cat: cat, red: red, log: o.logger, ident: ident, branch: o.branch, id: o.writerID,
		stableID: o.stableID, timeout: o.commit.timeout, tables: tabs, mem: mem, retryWaits: o.commit.retryWaits}
	w := &Writer{env: env}
	var committed int64
	var lastToken *string
	if o.stableID {
		tbl, err = env.fence(ctx, tbl)
		if err != nil {
			return nil, red.Error(err) // staging the fence snapshot writes a manifest: storage errors too
		}
		committed = lastSeq(tbl.Metadata(), o.branch, env.id)
		if token, _, ok := lastCheckpoint(tbl.Metadata(), o.branch, env.id); ok {
			lastToken = &token
		}
	} else {
		env.epoch = 1
		// Through derive, as a fenced writer's table is: its file system is bound to each operation's context,
		// not to whichever one a catalog's cached file system was first opened with (this call's, which the
		// caller may cancel as soon as NewWriter returns).
		tbl = tabs.Derive(tbl, tbl.Metadata(), tbl.MetadataLocation(), cat)
	}
	w.own = newOwnFiles(env, tbl, o.maint.orphanAge)
	hooks := &conformHooks{deadLetter: o.schema.deadLetter}
	if o.schema.evolve {
		hooks.relax = w.relax
	}
	w.view = newTableView(env.mem, hooks)
	w.view.defaults = o.schema.defaults
	if err := w.view.set(tbl); err != nil {
		return nil, err
	}
	w.structs = newStructStage(env.mem, w.view, hooks, o.schema.evolve, w.evolveFor)
	// NoDeleteFiles: every keyed change is a rewrite, as in copy-on-write mode.
	copyOnWrite := updateMode(&o, tbl) == CopyOnWrite || o.keyed.deleteFiles == NoDeleteFiles
	if w.keys, err = newKeyStage(tbl, w.view.conformer().target, &o, copyOnWrite); err != nil {
		return nil, err
	}
	if w.changes, err = newChangeStage(&o, w.view.conformer().target, w.keys.spec); err != nil {
		return nil, err
	}
	w.files = &encode.Encoder[*batch]{Mem: env.mem, TargetFileSize: o.files.targetFileSize, RowGroupRows: o.files.rowGroupRows,
		KeyNames: w.keys.names(), Names: w.own.names.next,
		Log: env.log, Limits: o.files.fanout.WithDefaults(), CoalesceRows: arrowx.RecordRows, Shred: shred}
	w.keys.files = w.own.names
	if err := w.keys.load(ctx, tbl); err != nil {
		return nil, red.Error(err) // a read of data files, cut short
	}
	w.cbs = newCallbacks(newHookSet(o.writerHooks()), red, env.id)
	env.events = w.cbs
	w.runs = newRunStage(env, o.commit.committer, tbl,
		cow.Config{Parallel: o.flush.maxInFlight, TargetFileSize: o.files.targetFileSize, RowGroupRows: o.files.rowGroupRows,
			Shred: shred})
	if o.commit.wrapCommitter != nil {
		w.runs.committer = o.commit.wrapCommitter(w.runs.committer)
	}
	w.maint = w.newMaintainer(&o)
	w.pipe = pipeline.New[*batch](ctx, pipeEnv{w}, pipeline.Config[*batch]{
		FlushRows: int64(o.flush.rows), FlushBytes: o.flush.bytes, FlushInterval: o.flush.interval,
		RowBudget: rowBudget(&o), MaxUncommitted: o.flush.maxUncommitted, MaxInFlight: o.flush.maxInFlight,
		Checkpoints: o.flush.checkpoints, PosOrder: o.flush.posOrder, CommitTimeout: o.commit.timeout, Mem: env.mem, LastToken: lastToken,
		Shared: sharedRows(o.shared), RunHeldCap: fanoutShare(rowBudget(&o)),
		Split:      func(b *batch) []*batch { return w.splitFanout(b, fanoutShare(rowBudget(&o))) },
		SharedKeys: w.keys.sourcesShareKeys,
		Sealed:     w.sealedHook(), Encoded: w.encodedHook(), Waited: w.waitedHook(),
	}, committed)
	w.pipe.Start()
	if o.commit.committer == nil {
		// A committer of the caller's own may not refuse a fenced epoch's runs (see sweepOrphans).
		w.own.startSweep(w.pipe.Context(), tbl)
	}
	if w.cbs.wants(hookNewWriter) {
		w.cbs.hooks.dispatch(writerOpened{w}) // before NewWriter returns: before any other event of the writer
	}
	return w, nil
}

func validateOptions(o *options) error {
	switch {
	case o.flush.rows <= 0:
		return optionErr("WithFlushRows", "must be positive, got %d", o.flush.rows)
	case o.flush.bytes <= 0:
		return optionErr("WithFlushBytes", "must be positive, got %d", o.flush.bytes)
	case o.flush.interval < 0:
		return optionErr("WithFlushInterval", "must not be negative, got %s", o.flush.interval)
	case o.flush.maxInFlight <= 0:
		return optionErr("WithMaxInFlight", "must be positive, got %d", o.flush.maxInFlight)
	case o.flush.memoryLimit <= 0:
		return optionErr("WithMemoryLimit", "must be positive, got %d", o.flush.memoryLimit)
	case o.files.targetFileSize <= 0:
		return optionErr("WithTargetFileSize", "must be positive, got %d", o.files.targetFileSize)
	case o.flush.maxUncommitted <= 0:
		return optionErr("WithMaxUncommitted", "must be positive, got %d", o.flush.maxUncommitted)
	case o.flush.posOrder == nil:
		return optionErr("WithPositionOrder", "nil order")
	case o.commit.timeout <= 0:
		return optionErr("WithCommitTimeout", "must be positive, got %s", o.commit.timeout)
	case o.stableID && len(o.writerID) > 200:
		return optionErr("WithWriterID", "longer than 200 bytes")
	case o.maint.orphanAge < 0:
		return optionErr("WithOrphanOlderThan", "must not be negative, got %s", o.maint.orphanAge)
	case o.keyed.mode != nil && *o.keyed.mode != MergeOnRead && *o.keyed.mode != CopyOnWrite:
		return optionErr("WithMode", "unknown mode %d", int(*o.keyed.mode))
	case !(o.maint.deleteRatio >= 0 && o.maint.deleteRatio <= 1): // NaN too
		return optionErr("WithDeleteRewriteRatio", "must be in [0, 1], got %g", o.maint.deleteRatio)
	case o.keyed.deleteFiles < AnyDeleteFiles || o.keyed.deleteFiles > NoDeleteFiles:
		return optionErr("WithDeleteFiles", "unknown value %d", int(o.keyed.deleteFiles))
	}
	if err := validateHooks(o.commit.hooks); err != nil {
		return err
	}
	if err := checkSpillDir(o.keyed.spillDir); err != nil {
		return err
	}
	return o.keyed.changes.validate(o.flush.memoryLimit)
}

// ID returns the writer ID (random unless WithWriterID was given).
func (w *Writer) ID() string { return w.env.id }

// Schema returns the table's schema as Arrow, the shape Write accepts without conversion.
func (w *Writer) Schema() *arrow.Schema { return w.view.conformer().target }

// Table returns the table as the writer last saw it (after its latest commit).
func (w *Writer) Table() *table.Table { return w.view.table() }

// encoderReserve is the working memory set aside for each batch encoding at once (Parquet pages, dictionaries
// and the conversions of iceberg-go's writer): what the seed events take, with a margin for wider rows.
const encoderReserve = 48 << 20

// rowBudget is the part of the memory limit left for row buffers once the encoders' reserve and the versions
// of Apply's keys (ChangeColumns.VersionBytes) are set aside.
func rowBudget(o *options) int64 {
	return max(o.flush.memoryLimit-int64(o.flush.maxInFlight)*encoderReserve-o.keyed.changes.versionBudget(), o.flush.memoryLimit/4)
}

// failure is the error the writer keeps once err stopped it (see writerEnv.failure).
func (w *Writer) failure(err error) error { return w.env.failure(err) }

// Stats reports counters: rows, bytes, files, commits, retries, conflicts, buffered and uncommitted amounts.
func (w *Writer) Stats() Stats {
	p := w.pipe.State()
	files, bytes := w.files.Stats()
	return Stats{
		RowsAccepted: p.RowsAccepted, BytesAccepted: p.BytesAccepted, Batches: p.Batches, DiscardedRows: p.Discarded,
		BufferedRows: p.BufferedRows, BufferedBytes: p.BufferedBytes,
		UncommittedBatches: p.UncommittedBatches, UncommittedRows: p.UncommittedRows, LastCommittedSeq: p.Committed,
		RowsCommitted: w.runs.rows.Load(), FilesWritten: files, BytesWritten: bytes,
		Commits: w.runs.commits.Load(), Retries: w.runs.retries.Load(), Conflicts: w.runs.conflicts.Load(),
		DeleteFiles: w.runs.deleteFiles.Load(), FilesRewritten: w.runs.rewritten.Load(), Epoch: w.env.epoch,
		ChangesSkipped: w.changes.Skipped(), OldestUncommitted: p.Oldest, LastCommit: w.runs.lastCommit(),
		KeyIndexBytes:        w.keys.indexBytes(),
		KeyIndexSpilledBytes: w.keys.spilledBytes(),
	}
}
