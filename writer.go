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
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/dv"
	"github.com/google/uuid"
	"golang.org/x/sync/semaphore"

	"github.com/icewriter/iceberg/internal/redact"
)

// Writer writes rows into one Iceberg table. It is safe for concurrent use; concurrent calls are ordered by the
// moment each is accepted.
type Writer struct {
	cat       catalog.Catalog // masks its errors (redact.WrapCatalog)
	red       *redact.Redactor
	ident     table.Identifier
	opts      options
	log       *slog.Logger // masks every record with red
	committer Committer
	defaultC  *catalogCommitter // nil when WithCommitter replaced it
	id        string
	epoch     int64
	mem       memory.Allocator

	ctx    context.Context // the writer's own: commits run on it, never on a caller's
	cancel context.CancelFunc
	// encCtx is the encoders' context, a child of ctx: Close and Abort cancel it as soon as their caller's
	// context ends, without cutting a commit in flight.
	encCtx    context.Context
	encCancel context.CancelFunc
	encSem    *semaphore.Weighted
	// partShare is the largest partition's share of the rows of the last batch written to a partitioned table
	// (float64 bits): it sizes the next batch's key bloom filters.
	partShare atomic.Uint64
	kick      chan struct{}
	done      chan struct{} // closed when the commit loop exits
	encWG     sync.WaitGroup
	// commitMu is held while a run commits; Compact holds it to run inside the commit queue.
	commitMu sync.Mutex
	cbs      *callbacks // WithOnCommit, delivered outside the commit loop

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every state change: a ctx-aware condition variable
	tbl     *table.Table
	conf    *conformer
	keys    *keySpec // nil: no key columns
	cow     bool     // copy-on-write mode
	// idx is the key index of a merge-on-read v3 table (nil: equality deletes). Read under mu by encoders,
	// used by the commit loop under commitMu.
	idx        *keyIndex
	pendingDVs map[string]*dv.RoaringPositionBitmap // merged vectors of the run in flight, by data file
	keyErr     error                                // why Upsert/Delete cannot run on this table's layout
	open       *batch
	queue      []*batch // sealed, not yet committed, in sequence order
	nextSeq    int64
	committed  int64 // last committed sequence number
	memUsed    int64
	failed     error
	closed     bool
	stopping   bool // Close/Abort: the loop starts no new run
	timer      *time.Timer
	maint      *maintainer // expiry, manifest rewrites, compactions: run by the commit loop after its commits

	structConv sync.Map // reflect.Type -> *structConverter
	tables     *tables
	st         stats
}

type batch struct {
	seq      int64
	recs     []arrow.RecordBatch
	kinds    []opKind      // per record: insert, upsert or delete
	schema   *arrow.Schema // the table schema the inserted and upserted records were conformed to
	keyed    bool          // holds an upsert or a delete
	rows     int64
	bytes    int64
	token    string
	hasToken bool
	files    []ice.DataFile
	deletes  []ice.DataFile      // equality delete files
	cowKeys  []arrow.RecordBatch // copy-on-write: key-only records of the keys upserted or deleted
	keyRecs  []arrow.RecordBatch // key index on: the keys upserted or deleted, resolved at run formation
	fileKeys []fileKeys          // key index on: the keys of each new data file, in row order
	segIdx   int                 // the segment of the run the batch went into
	written  map[uint64]struct{} // key hashes of the rows written (writers with keys only)
	keyedSet map[uint64]struct{} // key hashes upserted or deleted
	staged   bool
	handed   bool // given to the committer: its files may be referenced, so they are never deleted
	firstAt  time.Time
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
	Conflicts          int64 // attempts the catalog rejected as conflicts
	BufferedRows       int64 // rows in the open buffer
	BufferedBytes      int64 // bytes held: the open buffer and batches waiting for or in encoding
	UncommittedBatches int   // sealed batches not yet committed
	UncommittedRows    int64
	DiscardedRows      int64 // rows dropped by Abort, or by Close after the last checkpoint
	LastCommittedSeq   int64
	Epoch              int64
}

type stats struct {
	rowsAccepted, bytesAccepted, rowsCommitted, files, fileBytes, batches atomic.Int64
	commits, retries, conflicts, discarded                                atomic.Int64
	deleteFiles, rewritten                                                atomic.Int64
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
	if err := validateOptions(&o); err != nil {
		return nil, err
	}
	if o.createErr != nil {
		return nil, shredErr(o.createErr)
	}
	tbl, created, err := loadOrCreate(ctx, cat, ident, &o)
	if err != nil {
		return nil, err
	}
	tabs := newTables()
	tabs.loaded(tbl)
	if o.smallFiles < 0 {
		o.smallFiles = 0
		if created {
			o.smallFiles = DefaultSmallFileCompactionEvery
		}
	}
	if o.keepSnapshots < 0 {
		o.keepSnapshots = 0
		if created {
			o.keepSnapshots = DefaultKeepSnapshots
		}
	}
	if !o.stableID {
		o.writerID = uuid.NewString()
	}
	w := &Writer{
		cat: cat, red: red, ident: ident, opts: o, log: o.logger, id: o.writerID, tables: tabs,
		mem: memory.NewGoAllocator(), kick: make(chan struct{}, 1), done: make(chan struct{}),
		changed: make(chan struct{}), encSem: semaphore.NewWeighted(int64(o.maxInFlight)),
	}
	if o.stableID {
		tbl, err = w.fence(ctx, tbl)
		if err != nil {
			return nil, red.Error(err) // staging the fence snapshot writes a manifest: storage errors too
		}
		w.committed = lastSeq(tbl.Metadata(), o.branch, w.id)
	} else {
		w.epoch = 1
		// Through derive, as a fenced writer's table is: its file system is bound to each operation's context,
		// not to whichever one a catalog's cached file system was first opened with (this call's, which the
		// caller may cancel as soon as NewWriter returns).
		tbl = tabs.derive(tbl, tbl.Metadata(), tbl.MetadataLocation(), cat)
	}
	w.nextSeq = w.committed + 1
	if err := w.setTable(tbl); err != nil {
		return nil, err
	}
	w.keys, err, w.keyErr = resolveKeys(tbl, w.conf.target, &o)
	if err != nil {
		return nil, err
	}
	w.cow = w.mode() == CopyOnWrite
	if w.keys != nil && !w.cow && w.keyErr == nil && tbl.Metadata().Version() >= 3 && o.keyIndexBytes > 0 {
		if tableIsEmpty(tbl) {
			w.idx = newKeyIndex(o.keyIndexBytes, headID(tbl.Metadata(), o.branch))
		} else {
			// A table that holds rows (typically this writer's, reopened): index the keys it holds, so upserts
			// stay deletion vectors across restarts.
			idx, reason, err := loadKeyIndex(ctx, tbl, o.branch, w.keys, o.keyIndexBytes, o.maxInFlight)
			if err != nil {
				if ctx.Err() != nil {
					return nil, red.Error(err) // a read of data files, cut short
				}
				// Equality deletes are always right: a read failure here costs read speed, not the writer.
				idx, reason = nil, err.Error()
			}
			if idx == nil {
				w.log.Info("iceberg: key index off; upserts and deletes use equality deletes", "table", ident, "reason", reason)
			}
			w.idx = idx
		}
	}
	w.committer = o.committer
	if w.committer == nil {
		w.defaultC = newCatalogCommitter(cat, tbl, w.log, o.commitTimeout, tabs)
		w.defaultC.cow = cowConfig{parallel: o.maxInFlight, targetFileSize: o.targetFileSize, rowGroupRows: o.rowGroupRows}
		w.committer = w.defaultC
	}
	w.ctx, w.cancel = context.WithCancel(context.WithoutCancel(ctx))
	w.encCtx, w.encCancel = context.WithCancel(w.ctx)
	w.cbs = newCallbacks(w.opts.onCommit)
	w.maint = w.newMaintainer()
	go w.commitLoop()
	return w, nil
}

func validateOptions(o *options) error {
	switch {
	case o.flushRows <= 0:
		return optionErr("WithFlushRows", "must be positive, got %d", o.flushRows)
	case o.flushBytes <= 0:
		return optionErr("WithFlushBytes", "must be positive, got %d", o.flushBytes)
	case o.flushInterval < 0:
		return optionErr("WithFlushInterval", "must not be negative, got %s", o.flushInterval)
	case o.maxInFlight <= 0:
		return optionErr("WithMaxInFlight", "must be positive, got %d", o.maxInFlight)
	case o.memoryLimit <= 0:
		return optionErr("WithMemoryLimit", "must be positive, got %d", o.memoryLimit)
	case o.targetFileSize <= 0:
		return optionErr("WithTargetFileSize", "must be positive, got %d", o.targetFileSize)
	case o.maxUncommitted <= 0:
		return optionErr("WithMaxUncommitted", "must be positive, got %d", o.maxUncommitted)
	case o.commitTimeout <= 0:
		return optionErr("WithCommitTimeout", "must be positive, got %s", o.commitTimeout)
	case o.stableID && len(o.writerID) > 200:
		return optionErr("WithWriterID", "longer than 200 bytes")
	case o.mode != nil && *o.mode != MergeOnRead && *o.mode != CopyOnWrite:
		return optionErr("WithMode", "unknown mode %d", int(*o.mode))
	}
	return nil
}

// setTable records the table the next batches encode against.
func (w *Writer) setTable(tbl *table.Table) error {
	as, err := table.SchemaToArrowSchema(tbl.Schema(), nil, true, false)
	if err != nil {
		return fmt.Errorf("iceberg: table schema to arrow: %w", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.tbl = tbl
	if w.conf == nil || !w.conf.target.Equal(as) {
		w.conf = &conformer{target: as, mem: w.mem, w: w}
	}
	return nil
}

// ID returns the writer ID (random unless WithWriterID was given).
func (w *Writer) ID() string { return w.id }

// Schema returns the table's schema as Arrow, the shape Write accepts without conversion.
func (w *Writer) Schema() *arrow.Schema {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.conf.target
}

// Table returns the table as the writer last saw it (after its latest commit).
func (w *Writer) Table() *table.Table {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.tbl
}

// usableLocked reports why the writer cannot take calls, if it cannot.
func (w *Writer) usableLocked() error {
	if w.closed {
		return ErrClosed
	}
	if w.failed != nil {
		return w.failed
	}
	return nil
}

// signalLocked wakes every waiter.
func (w *Writer) signalLocked() {
	close(w.changed)
	w.changed = make(chan struct{})
}

// Write appends the rows (insert: no key lookup). Columns are matched to the table by name; an unknown column
// is an error unless schema evolution is on (WithSchemaEvolution); missing optional columns are null. All validation happens here: an error returned by Write means
// nothing of this call was accepted, and the writer stays usable. Write copies what it keeps: the caller may
// reuse or Release the batch as soon as the call returns. Write blocks while the memory limit or the limit on
// uncommitted batches is reached, until ctx is done. A batch without rows is validated all the same (with
// schema evolution on, its new columns are added), then nothing is kept.
func (w *Writer) Write(ctx context.Context, rec arrow.RecordBatch) error {
	w.mu.Lock()
	if err := w.usableLocked(); err != nil {
		w.mu.Unlock()
		return err
	}
	conf := w.conf
	w.mu.Unlock()
	if w.opts.evolve && rec != nil {
		var err error
		if conf, err = w.evolveFor(ctx, rec.Schema()); err != nil {
			return err
		}
	}
	owned, size, err := conf.conform(ctx, rec)
	if err != nil {
		return err
	}
	if owned.NumRows() == 0 {
		// Validated like any batch (an empty batch with an unknown column is an error), but nothing to keep.
		owned.Release()
		return nil
	}
	if err := w.accept(ctx, owned, size, opInsert); err != nil {
		owned.Release()
		return err
	}
	return nil
}

// accept waits for room and adds an owned record to the open buffer.
func (w *Writer) accept(ctx context.Context, rec arrow.RecordBatch, size int64, kind opKind) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
		if err := w.usableLocked(); err != nil {
			return err
		}
		memFull := w.memUsed > 0 && w.memUsed+size > w.rowBudget()
		if memFull && w.open != nil && w.open.bytes > 0 {
			// Encoding is what frees memory: never wait on a buffer that no policy would seal.
			w.sealLocked(nil)
			continue
		}
		if !memFull && w.committableLocked() < w.opts.maxUncommitted {
			break
		}
		ch := w.changed
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			w.mu.Lock()
			return ctx.Err()
		case <-ch:
		}
		w.mu.Lock()
	}
	if w.open != nil && kind != opDelete && w.open.schema != nil && w.open.schema != rec.Schema() {
		// The table's schema changed: a batch encodes against one schema, so the buffer ends here.
		w.sealLocked(nil)
	}
	if w.open == nil {
		w.open = &batch{firstAt: time.Now()}
		if w.opts.flushInterval > 0 {
			b := w.open
			w.timer = time.AfterFunc(w.opts.flushInterval, func() {
				w.mu.Lock()
				defer w.mu.Unlock()
				if w.open == b && !w.closed {
					w.sealLocked(nil)
				}
			})
		}
	}
	if kind != opDelete {
		w.open.schema = rec.Schema()
	}
	w.open.recs = append(w.open.recs, rec)
	w.open.kinds = append(w.open.kinds, kind)
	w.open.keyed = w.open.keyed || kind != opInsert
	w.open.rows += rec.NumRows()
	w.open.bytes += size
	w.memUsed += size
	w.st.rowsAccepted.Add(rec.NumRows())
	w.st.bytesAccepted.Add(size)
	if w.open.rows >= int64(w.opts.flushRows) || w.open.bytes >= w.opts.flushBytes {
		w.sealLocked(nil)
	}
	return nil
}

// encoderReserve is the working memory set aside for each batch encoding at once (Parquet pages, dictionaries
// and the conversions of iceberg-go's writer), measured at about 28 MiB for the seed events, with a margin for
// wider rows.
const encoderReserve = 48 << 20

// rowBudget is the part of the memory limit left for row buffers once the encoders' reserve is set aside.
func (w *Writer) rowBudget() int64 {
	return max(w.opts.memoryLimit-int64(w.opts.maxInFlight)*encoderReserve, w.opts.memoryLimit/4)
}

// committableLocked counts the sealed batches a commit may take. With WithCheckpoints, batches after the newest
// token wait for the next Checkpoint, which this very caller may be about to make: counting them would block
// Write before it (they hold files, not rows; the memory limit bounds the rows).
func (w *Writer) committableLocked() int {
	if !w.opts.checkpoints {
		return len(w.queue)
	}
	n := 0
	for i, b := range w.queue {
		if b.hasToken {
			n = i + 1
		}
	}
	return n
}

// sealLocked turns the open buffer into a batch with the next sequence number and starts its encoding. A token
// is attached to the batch; with a token and no rows an empty batch carries it.
func (w *Writer) sealLocked(token *string) *batch {
	if w.open == nil && token == nil {
		return nil
	}
	b := w.open
	if b == nil {
		b = &batch{}
	}
	w.open = nil
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	b.seq = w.nextSeq
	w.nextSeq++
	if token != nil {
		b.token, b.hasToken = *token, true
	}
	w.queue = append(w.queue, b)
	w.st.batches.Add(1)
	if len(b.recs) == 0 {
		b.staged = true
		w.kickLoop()
	} else {
		w.encWG.Add(1)
		go w.encode(b)
	}
	w.signalLocked()
	return b
}

func (w *Writer) kickLoop() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// failLocked stops the writer: nothing after the failed run is committed.
func (w *Writer) failLocked(err error) {
	if w.failed != nil {
		return
	}
	// The failure is returned by every later call and logged: a commit or upload error may quote a server's
	// reply or a presigned URL.
	err = w.red.Error(err)
	if !errors.Is(err, ErrWriterFailed) {
		err = fmt.Errorf("%w: %w", ErrWriterFailed, err)
	}
	w.failed = err
	w.log.Error("iceberg: writer stopped", "table", w.ident, "writer", w.id, "err", err)
	w.signalLocked()
}

// Stats reports counters: rows, bytes, files, commits, retries, conflicts, buffered and uncommitted amounts.
func (w *Writer) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := Stats{
		RowsAccepted: w.st.rowsAccepted.Load(), BytesAccepted: w.st.bytesAccepted.Load(),
		RowsCommitted: w.st.rowsCommitted.Load(), FilesWritten: w.st.files.Load(), BytesWritten: w.st.fileBytes.Load(),
		Batches: w.st.batches.Load(), Commits: w.st.commits.Load(), Retries: w.st.retries.Load(),
		Conflicts: w.st.conflicts.Load(), DiscardedRows: w.st.discarded.Load(), BufferedBytes: w.memUsed,
		DeleteFiles: w.st.deleteFiles.Load(), FilesRewritten: w.st.rewritten.Load(),
		UncommittedBatches: len(w.queue), LastCommittedSeq: w.committed, Epoch: w.epoch,
	}
	if w.open != nil {
		s.BufferedRows = w.open.rows
	}
	for _, b := range w.queue {
		s.UncommittedRows += b.rows
	}
	return s
}
