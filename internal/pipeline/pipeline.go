package pipeline

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/icewriter/iceberg/internal/changes"
	"github.com/icewriter/iceberg/internal/encode"
	"golang.org/x/sync/semaphore"
)

// Pipeline moves batches from the calls to the committer. It owns the open buffer and its seal policy (rows,
// bytes, interval since the first row), the memory and uncommitted budgets behind one ctx-aware wait, the queue
// of sealed batches in sequence order, up to MaxInFlight encodings at once, and the ordered commit loop that
// cuts each run from the head of the queue. What encoding a batch and committing a run do is its env's (the
// Writer's): the pipeline decides only when they happen and in what order, so pipeline_test.go drives it with
// a fake env, without a catalog or a clock.
//
// Locks: mu guards the queue state below it and is never held while the env works. commitMu is held for a
// run's commit and its follow-up (callbacks queued, maintenance); Compact and schema evolution take it to run
// inside the commit queue. Order: commitMu, then mu; the other stages' locks (the view's, the key stage's) are
// never held while taking mu.
type Pipeline[B Batch[B]] struct {
	env Env[B]
	cfg Config[B]

	ctx      context.Context // the writer's own: commits run on it, never on a caller's
	cancel   context.CancelFunc
	enc      encoders
	kick     chan struct{}
	done     chan struct{} // closed when the commit loop exits
	commitMu sync.Mutex    // the commit queue (enterQueue)

	mu        sync.Mutex
	changed   chan struct{} // closed and replaced on every state change: a ctx-aware condition variable
	buf       openBuffer[B]
	queue     []B // sealed, not yet committed, in sequence order
	nextSeq   int64
	committed int64 // last committed sequence number
	released  int64 // a Router's commit rounds (Budget.gated): the last sequence number a round released
	memUsed   int64
	life      lifeState
	bulk      bulkState
	pos       positionState
	counts    pipelineCounts // reported by Stats
}

// encoders are the pipeline's encodings in flight.
type encoders struct {
	// ctx is the encoders' context, a child of the pipeline's: Close and Abort cancel it as soon as their
	// caller's context ends, without cutting a commit in flight.
	ctx    context.Context
	cancel context.CancelFunc
	sem    *semaphore.Weighted // MaxInFlight (a Router's shared pool)
	wg     sync.WaitGroup
}

// openBuffer is the buffer rows are accepted into until a seal (guarded by pipeline.mu).
type openBuffer[B Batch[B]] struct {
	open   B
	gather *gather // the open buffer's growing tail of small calls (its rows are counted in open)
	marks  []mark  // the checkpoints in the open buffer, in order
	timer  *time.Timer
	// due: the flush policy tripped while the open buffer held no checkpoint (sealDueLocked), with
	// WithCheckpoints: the next checkpoint seals it.
	due bool
	// The newest token and positions marked, and whether rows came since: a checkpoint that brings neither a
	// new value nor new rows marks nothing (and so commits nothing).
	lastToken    string
	hasLastToken bool
	dirty        bool // rows since the newest token
	lastPos      map[string]string
	dirtySrc     map[string]bool // partitions with rows since their newest position
}

// lifeState is how far the pipeline is from its end (guarded by pipeline.mu).
type lifeState struct {
	failed   error
	closed   bool
	stopping bool // Close/Abort: the loop starts no new run
}

// bulkState is a Router's bulk phase: batches are written into files kept open across batches (the encoder's bulk files); a
// flush then seals a closer batch, which ends file generation fileGen. closerSeq is the newest closer's batch.
type bulkState struct {
	carry     bool
	fileGen   int64
	closerSeq int64
}

// positionState is what the pipeline knows of the partitions' positions (guarded by pipeline.mu).
type positionState struct {
	// committed is the newest position committed per partition (PositionLags).
	committed map[string]string
	// known is each partition's last position known to the writer, what Checkpoint's order check compares
	// with: the newest checkpointed, or the one Resume read, whichever came last (never read per checkpoint).
	known map[string]string
}

// pipelineCounts are the pipeline's counters reported by Stats.
type pipelineCounts struct {
	rowsAccepted, bytesAccepted, batches, discarded int64
	commits                                         int64 // runs committed by this pipeline
}

// Record is one call's owned, validated record on its way into the open buffer.
type Record struct {
	Rec    arrow.RecordBatch
	Size   int64 // Arrow bytes, what the memory limit counts
	Kind   changes.Kind
	Source string // the source partition the rows came from ("": none named)
	// view: rec shares the caller's buffers (a small call, conformView): the pipeline copies its rows into
	// its gather and never keeps rec, which stays the caller's to release.
	View bool
	// undo: the versions Apply calls of a source recorded for these rows, restored if Source.Abort drops them
	// (abortSource returns them); dropped once the rows are sealed in a batch no abort can drop (not solo).
	Undo []*changes.Undo
	// hashes: the resolveHash of each row's key, when the call computed them (Apply); nil: the key stage hashes
	// the rows itself.
	Hashes []uint64
	// sel: the rows of rec the call hands on (ascending), nil: all of them. An Apply call keeps the caller's
	// record as it is (retained, not copied) and names the rows it upserts: the batch's resolve takes them, and
	// only those no later change supersedes, once (the key stage's resolve). Size then counts rec's whole buffers.
	Sel []int32
}

// NumRows is the number of rows the record hands on: those of sel, else all of rec's.
func (r Record) NumRows() int64 {
	if r.Sel != nil {
		return int64(len(r.Sel))
	}
	return r.Rec.NumRows()
}

// mark is a checkpoint in the open buffer, a row boundary after its first at records: a token covers every
// row before it, a position (source set) the rows of its partition before it.
type mark struct {
	at     int
	token  bool
	source string
	value  string
	when   time.Time // a position's: when it was marked (PositionLags)
}

// Config[B] is the pipeline's share of the options.
type Config[B Batch[B]] struct {
	FlushRows      int64
	FlushBytes     int64
	FlushInterval  time.Duration // 0: no interval policy
	RowBudget      int64         // bytes of rows held before Write waits (the memory limit less the encoders' reserve)
	MaxUncommitted int           // sealed batches a commit may take before Write waits
	MaxInFlight    int           // encodings at once
	Checkpoints    bool          // WithCheckpoints: runs end at a token, rows after the newest are never committed
	CommitTimeout  time.Duration // how long a commit in flight outlives a Close that gave up waiting
	Mem            memory.Allocator
	// posOrder is WithPositionOrder's (nil: positions are not compared).
	PosOrder func(partition, a, b string) (int, bool)
	// lastToken is the token committed last by the writer's ID, if any: the same token again with no rows is
	// not a new checkpoint.
	LastToken *string
	// shared is a Router's budget and encode pool, used in place of rowBudget and maxInFlight (nil: the
	// writer's own).
	Shared *Budget
	// split cuts a sealed batch into batches of whole partitions when its files' metadata would exceed the
	// fanout share, nil to keep it whole; runHeldCap bounds the file metadata one run takes
	// (at least one batch; 0: no bound).
	Split      func(b B) []B
	RunHeldCap int64
	// sharedKeys reports whether two partitions of a keyed batch change one key (the key stage's);
	// nil: they may, and such a batch is never split by partition (bySource).
	SharedKeys func(b B) bool
	// What the pipeline reports to the writer's hooks (nil when no hook wants it); each only queues an event.
	Sealed  func(b B)                                            // b was sealed (called with mu held)
	Encoded func(b B, start time.Time)                           // b's files were written
	Waited  func(d time.Duration, memory bool, rows, size int64) // a call waited d for room
}

// Env is what the pipeline asks of the writer.
type Env[B any] interface {
	// NewBatch returns an empty batch.
	NewBatch() B
	// Encode writes a sealed batch's files on the encoders' context and fills in what the commit needs (files,
	// delete files, key sets), taking at most the extra encoder slots slots grants. The batch is the encoder's
	// until Encode returns; an error fails the writer.
	Encode(ctx context.Context, b B, slots Slots) error
	// BulkClosed hands a bulk file the encoding of a later batch closed to the batch whose rows it holds
	// (c.Holder, staged before), for its commit. Called with the pipeline's lock held.
	BulkClosed(c encode.ClosedSpan[B])
	// Commit commits the batches as one run on the writer's context and, when it succeeds, installs the table
	// it left before returning (a Flush that returns sees it). The follow-up it returns runs after the
	// pipeline recorded the commit, still inside the commit queue (callbacks, maintenance); n counts the runs
	// committed so far.
	Commit(ctx context.Context, batches []B) (followUp func(ctx context.Context, n int64), err error)
	// Failure is the error the writer keeps after err stopped it (masked, logged).
	Failure(err error) error
	// RemoveFiles deletes files provably never committed, as far as ctx allows.
	RemoveFiles(ctx context.Context, paths []string)
	// LoopDone runs when the commit loop exits: nothing is committed after it.
	LoopDone()
}

// EnterQueue takes the commit queue: no run of this writer commits until leave is called, and the runs after
// it commit later. Compact, the maintainer's commits, schema evolution and a Router's phase changes commit this
// way, between two runs; the commit loop takes it for each run.
func (p *Pipeline[B]) EnterQueue() (leave func()) {
	p.commitMu.Lock()
	return p.commitMu.Unlock
}

// newPipeline makes a pipeline whose next batch gets sequence number committed+1; start starts its commit loop.
// ctx's values are kept, its cancellation is not: the pipeline lives until Close or Abort.
func New[B Batch[B]](ctx context.Context, env Env[B], cfg Config[B], committed int64) *Pipeline[B] {
	p := &Pipeline[B]{
		env: env, cfg: cfg, kick: make(chan struct{}, 1), done: make(chan struct{}), changed: make(chan struct{}),
		enc: encoders{sem: semaphore.NewWeighted(int64(cfg.MaxInFlight))}, committed: committed, nextSeq: committed + 1,
		buf: openBuffer[B]{lastPos: map[string]string{}, dirtySrc: map[string]bool{}}, pos: positionState{known: map[string]string{}},
	}
	if cfg.LastToken != nil {
		p.buf.lastToken, p.buf.hasLastToken = *cfg.LastToken, true
	}
	if p.cfg.Mem == nil {
		p.cfg.Mem = memory.DefaultAllocator
	}
	if cfg.Shared != nil {
		p.enc.sem = cfg.Shared.sem
		cfg.Shared.join(p)
	}
	p.ctx, p.cancel = context.WithCancel(context.WithoutCancel(ctx))
	p.enc.ctx, p.enc.cancel = context.WithCancel(p.ctx)
	return p
}

// Start starts the commit loop.
func (p *Pipeline[B]) Start() { go p.loop() }

// Context is the pipeline's own context: it ends when the pipeline stops.
func (p *Pipeline[B]) Context() context.Context { return p.ctx }

// Usable reports why the pipeline takes no calls, if it does not.
func (p *Pipeline[B]) Usable() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.usableLocked()
}

func (p *Pipeline[B]) usableLocked() error {
	if p.life.closed {
		return ErrClosed
	}
	if p.life.failed != nil {
		return p.life.failed
	}
	return nil
}

// signalLocked wakes every waiter.
func (p *Pipeline[B]) signalLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// waitLocked releases mu until the state changes or ctx ends.
func (p *Pipeline[B]) waitLocked(ctx context.Context) error {
	ch, shared := p.changed, p.sharedChanged()
	p.mu.Unlock()
	defer p.mu.Lock()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-ch:
		return nil
	case <-shared:
		return nil
	}
}

// Accept waits for room and adds owned records to the open buffer, all of them or (on an error) none: one call's
// records (Apply's deletes and upserts) are accepted together, in order.
func (p *Pipeline[B]) Accept(ctx context.Context, recs ...Record) error {
	var size int64
	for _, r := range recs {
		size += r.Size
	}
	var waitFrom time.Time // the first wait for room, reported after mu is released
	var waitMem bool
	if p.cfg.Waited != nil {
		rows := RecordRows(recs)
		defer func() {
			if !waitFrom.IsZero() {
				p.cfg.Waited(time.Since(waitFrom), waitMem, rows, size)
			}
		}()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		if err := p.usableLocked(); err != nil {
			return err
		}
		rowsFull := p.memFullLocked(size)
		if rowsFull && (p.sealForMemoryLocked() || p.relieveLocked()) {
			continue
		}
		// The file metadata of staged batches counts too, but only commits free it: no seal for it, a wait.
		memFull := rowsFull
		if held := p.heldLocked(); !memFull && held > 0 {
			if s := p.cfg.Shared; s != nil {
				memFull = s.full(held + size)
			} else {
				memFull = p.memUsed+held+size > p.cfg.RowBudget
			}
		}
		if !memFull && p.committableLocked()-p.pendingLocked() < p.cfg.MaxUncommitted {
			break
		}
		if waitFrom.IsZero() && p.cfg.Waited != nil {
			waitFrom, waitMem = time.Now(), memFull
		}
		if !rowsFull && p.gatedLocked() {
			// Only a commit makes room now, and a Router's writer commits in rounds: ask for one.
			p.cfg.Shared.AskRound()
		}
		if err := p.waitLocked(ctx); err != nil {
			return err
		}
	}
	for _, rec := range recs {
		p.addLocked(rec)
	}
	return nil
}

// sealForMemoryLocked seals what it can when the memory budget is full, and reports whether it did: encoding
// is what frees memory, so never wait on a buffer that no policy would seal. With WithCheckpoints it first cuts
// at the newest checkpoint; rows no checkpoint covers are sealed only when no encoding is under way whose end
// would make room (they then wait in the queue for a checkpoint, holding files, not memory; inserts as a batch
// per partition, which Source.Abort can still drop: bySource).
func (p *Pipeline[B]) sealForMemoryLocked() bool {
	if none(p.buf.open) || p.buf.open.Head().Bytes == 0 {
		return false
	}
	if p.cfg.Checkpoints && len(p.buf.marks) == 0 && p.memUsed > p.buf.open.Head().Bytes {
		return false
	}
	p.sealLocked()
	return true
}

// addLocked adds one record to the open buffer (a view's rows are copied into the gather) and seals the buffer
// when the policy trips.
func (p *Pipeline[B]) addLocked(rec Record) {
	if !none(p.buf.open) && rec.Kind != changes.Delete && p.buf.open.Head().In.Schema != nil && p.buf.open.Head().In.Schema != rec.Rec.Schema() {
		// The table's schema changed: a batch encodes against one schema, so the buffer ends here.
		p.sealLocked()
	}
	b := p.openLocked()
	if rec.Kind != changes.Delete {
		b.Head().In.Schema = rec.Rec.Schema()
	}
	if rec.View {
		if p.buf.gather != nil && !p.buf.gather.fits(rec) {
			p.finishGatherLocked()
		}
		if p.buf.gather == nil {
			p.buf.gather = newGather(p.cfg.Mem, rec)
		}
		p.buf.gather.add(rec)
	} else {
		p.finishGatherLocked()
		b.Head().Push(rec)
	}
	b.Head().In.Keyed = b.Head().In.Keyed || rec.Kind != changes.Insert
	b.Head().Rows += rec.NumRows()
	b.Head().Bytes += rec.Size
	p.addMem(rec.Size)
	p.counts.rowsAccepted += rec.NumRows()
	p.counts.bytesAccepted += rec.Size
	p.buf.dirty = true
	p.buf.dirtySrc[rec.Source] = true
	if b.Head().Rows >= p.cfg.FlushRows || b.Head().Bytes >= p.cfg.FlushBytes {
		p.sealDueLocked()
	}
}

// sealDueLocked is the flush policy's seal (rows, bytes, interval). With WithCheckpoints and no checkpoint in
// the open buffer it seals nothing: such a batch could not commit before a later checkpoint anyway, and sealed
// its keyed rows could no longer be dropped alone (Source.Abort). The buffer is then due: the next checkpoint
// seals it (sealMarkedLocked). The memory limit still seals it (sealForMemoryLocked).
func (p *Pipeline[B]) sealDueLocked() {
	if p.cfg.Checkpoints && len(p.buf.marks) == 0 {
		p.buf.due = true
		return
	}
	p.sealLocked()
}

// sealMarkedLocked follows a checkpoint: a buffer the flush policy found due while no checkpoint could cut it
// is sealed at this one.
func (p *Pipeline[B]) sealMarkedLocked() {
	if p.buf.due && len(p.buf.marks) > 0 {
		p.sealLocked()
	}
}

// openLocked returns the open buffer, opening one (and its interval timer) if there is none.
func (p *Pipeline[B]) openLocked() B {
	if none(p.buf.open) {
		p.buf.open = p.env.NewBatch()
		p.buf.open.Head().FirstAt = time.Now()
		p.startTimerLocked()
	}
	return p.buf.open
}

// startTimerLocked arms the interval seal for the open buffer.
func (p *Pipeline[B]) startTimerLocked() {
	if p.cfg.FlushInterval <= 0 {
		return
	}
	b := p.buf.open
	p.buf.timer = time.AfterFunc(p.cfg.FlushInterval, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.buf.open == b && !p.life.closed {
			p.sealDueLocked()
		}
	})
}

// finishGatherLocked turns the gather into a record of the open buffer.
func (p *Pipeline[B]) finishGatherLocked() {
	if p.buf.gather == nil {
		return
	}
	p.buf.open.Head().Push(p.buf.gather.finish())
	p.buf.gather = nil
}

// Push appends an owned record to the batch's records (its counters are the caller's).
func (h *Header[B]) Push(rec Record) {
	h.In.Recs = append(h.In.Recs, rec.Rec)
	h.In.Kinds = append(h.In.Kinds, rec.Kind)
	h.In.Sources = append(h.In.Sources, rec.Source)
	h.In.Sizes = append(h.In.Sizes, rec.Size)
	h.In.Undos = append(h.In.Undos, rec.Undo)
	h.In.Hashes = append(h.In.Hashes, rec.Hashes)
	h.In.Sels = append(h.In.Sels, rec.Sel)
}

// record returns record i of the batch as the Record it was pushed as (its undo only while the batch is
// open or solo: sealLocked drops the others').
func (h *Header[B]) record(i int) Record {
	r := Record{Rec: h.In.Recs[i], Kind: h.In.Kinds[i], Source: h.In.Sources[i], Size: h.In.Sizes[i], Hashes: h.In.Hashes[i],
		Sel: h.In.Sels[i]}
	if i < len(h.In.Undos) {
		r.Undo = h.In.Undos[i]
	}
	return r
}

// RecRows is the number of rows record i hands on (Record.rows).
func (h *Header[B]) RecRows(i int) int64 {
	if i < len(h.In.Sels) && h.In.Sels[i] != nil {
		return int64(len(h.In.Sels[i]))
	}
	return h.In.Recs[i].NumRows()
}

// Sel is record i's selection (Record.sel), nil: all its rows.
func (h *Header[B]) Sel(i int) []int32 {
	if i < len(h.In.Sels) {
		return h.In.Sels[i]
	}
	return nil
}

// heldLocked is the memory held by the file metadata of the batches a commit may take (Batch.Held): what the
// commit loop frees without the caller. Batches that wait for a checkpoint are left out, as in
// committableLocked: the caller's next checkpoint is what lets them go, so waiting on them would never end.
func (p *Pipeline[B]) heldLocked() int64 {
	var n int64
	for _, b := range p.queue[:p.committableLocked()] {
		if b.Head().Staged { // an encoding's batch is its own until it returns
			held, _ := b.Held()
			n += held
		}
	}
	return n
}

// pendingLocked counts the staged batches whose rows wait in a bulk file still open: only more rows (or a
// flush) let them go, so they never make a call wait for room (they hold no rows, and no file metadata yet).
func (p *Pipeline[B]) pendingLocked() int {
	n := 0
	for _, b := range p.queue {
		if b.Head().Staged && b.Head().Bulk.Span != nil && !b.Head().Bulk.Span.Done {
			n++
		}
	}
	return n
}

// committableLocked counts the sealed batches a commit may take. With WithCheckpoints, batches after the newest
// checkpoint wait for the next one, which this very caller may be about to make: counting them would block
// Write before it (they hold files, not rows; the memory limit bounds the rows).
func (p *Pipeline[B]) committableLocked() int {
	if !p.cfg.Checkpoints {
		return len(p.queue)
	}
	return coveredEnd(p.queue, len(p.queue))
}

// coveredEnd returns the length of the longest prefix of q[:n] that a run may take with WithCheckpoints: it
// ends at a batch that carries a checkpoint, and every row in it is covered by a checkpoint in it (a token
// covers every row before it, a position the rows of its partition before it). A closer (sealCloserLocked: no
// rows, it only closes the bulk files of the batches before it) right after such a prefix extends it: it holds
// nothing a checkpoint must cover, and left queued it would keep a flush's queue non-empty, which leaveBulk reads
// as rows encoded without the key index (a bulk load with checkpoints then left the index off, and every later
// upsert became an equality delete).
func coveredEnd[B Batch[B]](q []B, n int) int {
	end := 0
	var pending map[string]struct{} // partitions with rows no checkpoint has covered yet
	for i, b := range q[:n] {
		if b.Head().HasToken {
			clear(pending)
		}
		for s := range b.Head().Positions {
			delete(pending, s)
		}
		for s := range b.Head().Uncovered {
			if pending == nil {
				pending = map[string]struct{}{}
			}
			pending[s] = struct{}{}
		}
		if len(pending) == 0 && (b.Head().HasToken || len(b.Head().Positions) > 0 || (b.Head().Bulk.Closer && end == i)) {
			end = i + 1
		}
	}
	return end
}

// Checkpoint marks a row boundary with a token: every row accepted so far is covered by it.
func (p *Pipeline[B]) Checkpoint(token string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.usableLocked(); err != nil {
		return err
	}
	if p.buf.hasLastToken && token == p.buf.lastToken && !p.buf.dirty {
		return nil // nothing new: no commit
	}
	p.markLocked(mark{token: true, value: token})
	p.buf.lastToken, p.buf.hasLastToken, p.buf.dirty = token, true, false
	p.sealMarkedLocked()
	return nil
}

// CheckpointPositions marks a row boundary with source positions: the rows of each partition accepted so far
// are covered by its position. A position before its partition's last known one refuses the whole call
// (ErrPositionBackwards).
func (p *Pipeline[B]) CheckpointPositions(positions map[string]string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.checkOrderLocked(positions); err != nil {
		return err
	}
	for src, pos := range positions {
		p.pos.known[src] = pos
		if last, ok := p.buf.lastPos[src]; ok && last == pos && !p.buf.dirtySrc[src] {
			continue // nothing new for this partition
		}
		p.markLocked(mark{source: src, value: pos, when: time.Now()})
		p.buf.lastPos[src] = pos
		delete(p.buf.dirtySrc, src)
	}
	p.sealMarkedLocked()
	return nil
}

// CheckOrder returns ErrPositionBackwards for positions that come before their partition's last known one
// (the writer must be usable).
func (p *Pipeline[B]) CheckOrder(positions map[string]string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.checkOrderLocked(positions)
}

func (p *Pipeline[B]) checkOrderLocked(positions map[string]string) error {
	if err := p.usableLocked(); err != nil {
		return err
	}
	if p.cfg.PosOrder == nil {
		return nil
	}
	return checkPositionOrder(p.cfg.PosOrder, positions, p.pos.known)
}

// Resumed makes positions (partition -> position, "" for none) the partitions' last known positions.
func (p *Pipeline[B]) Resumed(positions map[string]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for src, pos := range positions {
		if pos == "" {
			delete(p.pos.known, src)
		} else {
			p.pos.known[src] = pos
		}
	}
}

// markLocked places a checkpoint at the end of the open buffer. It seals nothing: files follow the flush
// policy, and a seal cuts the buffer at its newest checkpoint (sealLocked); a due buffer is sealed by the
// caller once its checkpoints are placed (sealMarkedLocked).
func (p *Pipeline[B]) markLocked(m mark) {
	b := p.openLocked()
	p.finishGatherLocked()
	m.at = len(b.Head().In.Recs)
	p.buf.marks = append(p.buf.marks, m)
}

// sealLocked turns the open buffer into a batch with the next sequence number and starts its encoding. Every
// checkpoint in the buffer goes with the batch. With WithCheckpoints the batch takes only the rows the
// checkpoints cover and the rest stay open (a batch with no rows carries checkpoints that cover none); a buffer
// without checkpoints is sealed whole (its inserts as a batch per partition: bySource) and waits in the queue
// until a later checkpoint covers it.
func (p *Pipeline[B]) sealLocked() {
	if none(p.buf.open) {
		return
	}
	p.finishGatherLocked()
	if p.buf.timer != nil {
		p.buf.timer.Stop()
		p.buf.timer = nil
	}
	b := p.buf.open
	p.buf.open = *new(B)
	p.buf.due = false
	var keep B
	if p.cfg.Checkpoints && len(p.buf.marks) > 0 {
		b, keep = cut(p.env.NewBatch, b, p.buf.marks)
	}
	p.takeMarks(b)
	p.buf.marks = nil
	if p.cfg.Checkpoints && !b.Head().HasToken && len(b.Head().Positions) == 0 {
		b.Head().Uncovered = map[string]struct{}{}
		for _, s := range b.Head().In.Sources {
			b.Head().Uncovered[s] = struct{}{}
		}
	}
	if !none(keep) && len(keep.Head().In.Recs) > 0 {
		p.buf.open = keep
		p.startTimerLocked()
	}
	if len(b.Head().In.Recs) == 0 && !b.Head().HasToken && len(b.Head().Positions) == 0 && !b.Head().Bulk.Closer {
		return // an open buffer that held nothing
	}
	var parts []B
	for _, b := range bySource(p.env.NewBatch, b, p.cfg.SharedKeys) {
		if !b.Head().Solo {
			b.Head().In.Undos = nil // its rows are never dropped: no versions to restore
		}
		if p.cfg.Split != nil && len(b.Head().In.Recs) > 0 {
			if s := p.cfg.Split(b); s != nil {
				parts = append(parts, s...)
				continue
			}
		}
		parts = append(parts, b)
	}
	for _, b := range parts {
		b.Head().Seq = p.nextSeq
		b.Head().Bulk.Gen = p.bulk.fileGen
		p.nextSeq++
		p.queue = append(p.queue, b)
		p.counts.batches++
		if p.cfg.Sealed != nil {
			p.cfg.Sealed(b)
		}
		if len(b.Head().In.Recs) == 0 && !b.Head().Bulk.Closer {
			b.Head().Staged = true
			p.kickLoop()
		} else {
			p.enc.wg.Add(1)
			go p.encode(b)
		}
	}
	p.signalLocked()
}

// bySource splits a batch of uncovered rows (WithCheckpoints, sealed with no checkpoint: only the memory limit
// or a schema change does that) into one solo batch per partition, in the order of their first rows, so that
// Source.Abort can drop one partition's rows without touching another's. A partition's rows keep their order;
// across partitions the order of inserts does not matter, while the changes of one key must stay in the order
// they were accepted: a batch with upserts or deletes is split only when no key has rows of two partitions in
// it (sharedKeys false), and otherwise stays whole. Any other batch is returned as is.
func bySource[B Batch[B]](mk func() B, b B, sharedKeys func(B) bool) []B {
	if b.Head().Uncovered == nil || len(b.Head().In.Recs) == 0 {
		return []B{b}
	}
	if len(b.Head().Uncovered) == 1 {
		b.Head().Solo = true
		return []B{b}
	}
	if b.Head().In.Keyed && (sharedKeys == nil || sharedKeys(b)) {
		return []B{b}
	}
	var out []B
	of := map[string]B{}
	for i := range b.Head().In.Recs {
		r := b.Head().record(i)
		s, ok := of[r.Source]
		if !ok {
			s = derived(mk, b)
			s.Head().Solo, s.Head().Uncovered = true, map[string]struct{}{r.Source: {}}
			of[r.Source] = s
			out = append(out, s)
		}
		h := s.Head()
		h.Push(r)
		h.Rows += r.NumRows()
		h.Bytes += r.Size
		h.In.Keyed = h.In.Keyed || r.Kind != changes.Insert
	}
	return out
}

// takeMarks gives the batch the newest token and the newest position per partition of the open buffer's marks.
func (p *Pipeline[B]) takeMarks(b B) {
	for _, m := range p.buf.marks {
		if m.token {
			b.Head().Token, b.Head().HasToken = m.value, true
			continue
		}
		if b.Head().Positions == nil {
			b.Head().Positions, b.Head().PosSince = map[string]string{}, map[string]time.Time{}
		}
		b.Head().Positions[m.source] = m.value
		if _, ok := b.Head().PosSince[m.source]; !ok {
			b.Head().PosSince[m.source] = m.when
		}
	}
}

// RecordRows counts the rows of one call's records.
func RecordRows(recs []Record) int64 {
	var n int64
	for _, r := range recs {
		n += r.NumRows()
	}
	return n
}

// derived returns a new batch (mk) with o's first-row time and table schema: a part of o.
func derived[B Batch[B]](mk func() B, o B) B {
	b := mk()
	h := b.Head()
	h.FirstAt, h.In.Schema = o.Head().FirstAt, o.Head().In.Schema
	return b
}

// cut splits an open buffer at its checkpoints: the records they cover (in order) and the rest.
func cut[B Batch[B]](mk func() B, o B, marks []mark) (take, keep B) {
	tokenAt := 0
	srcAt := map[string]int{}
	for _, m := range marks {
		if m.token {
			tokenAt = max(tokenAt, m.at)
		} else {
			srcAt[m.source] = max(srcAt[m.source], m.at)
		}
	}
	take, keep = derived(mk, o), derived(mk, o)
	for i := range o.Head().In.Recs {
		dst := keep
		if at, ok := srcAt[o.Head().In.Sources[i]]; i < tokenAt || (ok && i < at) {
			dst = take
		}
		r := o.Head().record(i)
		if dst == take {
			r.Undo = nil
		}
		dst.Head().Push(r)
		dst.Head().Rows += r.NumRows()
		dst.Head().Bytes += o.Head().In.Sizes[i]
		dst.Head().In.Keyed = dst.Head().In.Keyed || o.Head().In.Kinds[i] != changes.Insert
	}
	return take, keep
}

// encode runs one batch's encoding, at most MaxInFlight at once, and stages it for the commit loop. The rows
// are released once written, whatever the outcome.
func (p *Pipeline[B]) encode(b B) {
	defer p.enc.wg.Done()
	// Encoders run on their own context: Close and Abort cancel it at once when their caller's context ends (a
	// batch still encoding is not committed, so stopping it is never ambiguous), while a commit in flight keeps
	// the writer's.
	ctx := p.enc.ctx
	if b.Head().Bulk.Closer && !p.waitEarlierStaged(ctx, b) {
		return // shutting down, or failed
	}
	if err := p.enc.sem.Acquire(ctx, 1); err != nil {
		// Shutting down: release frees the rows of the queue's batches, this one's if Source.Abort dropped it.
		p.mu.Lock()
		if b.Head().Dropped {
			for _, r := range b.Head().In.Recs {
				r.Release()
			}
			b.Head().In.Recs = nil
		}
		p.mu.Unlock()
		return
	}
	// No retry here: the rows were handed to the encoder. Object stores retry requests themselves; a batch that
	// still fails stops the writer, and the caller replays from its last checkpoint.
	var start time.Time
	if p.cfg.Encoded != nil {
		start = time.Now()
	}
	p.mu.Lock()
	skip := b.Head().Dropped // Source.Abort dropped it before its turn
	slots := Slots{Sem: p.enc.sem, FlushRows: p.cfg.FlushRows, FlushBytes: p.cfg.FlushBytes}
	p.mu.Unlock()
	var err error
	if !skip {
		err = p.env.Encode(ctx, b, slots)
	}
	p.enc.sem.Release(1)
	if err == nil && !skip && p.cfg.Encoded != nil {
		p.cfg.Encoded(b, start)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range b.Head().In.Recs {
		if r != nil {
			r.Release()
		}
	}
	b.Head().In.Recs = nil
	p.addMem(-b.Head().Bytes)
	if b.Head().Dropped {
		// Dropped while it encoded: its files were never handed to a commit.
		p.signalLocked()
		if paths := b.FilePaths(); len(paths) > 0 {
			p.mu.Unlock()
			p.env.RemoveFiles(p.ctx, paths)
			p.mu.Lock()
		}
		return
	}
	if err != nil {
		if ctx.Err() == nil {
			p.failLocked(fmt.Errorf("iceberg: encode batch %d: %w", b.Head().Seq, err))
		}
		p.signalLocked()
		return
	}
	for _, c := range b.Head().Bulk.Closes {
		c.Span.Done, c.Span.Until = true, c.Until
		p.env.BulkClosed(c)
	}
	b.Head().Bulk.Closes = nil
	b.Head().Staged = true
	p.signalLocked()
	p.kickLoop()
}

// sealCloserLocked seals a closer batch when a bulk file may hold rows of a batch sealed since the last closer:
// its encoding closes every file of the current generation, so that a flush can commit everything before it.
func (p *Pipeline[B]) sealCloserLocked() {
	if !p.bulk.carry {
		return
	}
	open := false
	for _, b := range p.queue {
		if b.Head().Seq > p.bulk.closerSeq && !b.Head().Bulk.Closer && (!b.Head().Staged || (b.Head().Bulk.Span != nil && !b.Head().Bulk.Span.Done)) {
			open = true
			break
		}
	}
	if !open {
		return
	}
	// With WithCheckpoints the flush's seal may have left rows open (and their timer): they stay open.
	keep, timer := p.buf.open, p.buf.timer
	closer := p.env.NewBatch()
	closer.Head().FirstAt, closer.Head().Bulk.Closer = time.Now(), true
	p.buf.open, p.buf.timer = closer, nil
	p.sealLocked()
	p.buf.open, p.buf.timer = keep, timer
	p.bulk.closerSeq = p.nextSeq - 1
	p.bulk.fileGen++
}

// waitEarlierStaged waits until every batch before the closer b is staged (their files are then idle) and
// reports false when the pipeline stops or fails first.
func (p *Pipeline[B]) waitEarlierStaged(ctx context.Context, b B) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		if p.life.failed != nil || p.life.stopping || ctx.Err() != nil {
			return false
		}
		ready := true
		for _, q := range p.queue {
			if q.Head().Seq < b.Head().Seq && !q.Head().Staged {
				ready = false
				break
			}
		}
		if ready {
			return true
		}
		if p.waitLocked(ctx) != nil {
			return false
		}
	}
}

func (p *Pipeline[B]) kickLoop() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Fail stops the pipeline from outside it (a writer's own transaction found it fenced, say).
func (p *Pipeline[B]) Fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failLocked(err)
}

// failLocked stops the pipeline: nothing after the failed run is committed.
func (p *Pipeline[B]) failLocked(err error) {
	if p.life.failed != nil {
		return
	}
	p.life.failed = p.env.Failure(err)
	p.signalLocked()
}

// loop is the one ordered committer of the pipeline: it repeatedly takes the longest run of consecutive staged
// batches from the head of the queue and has the env commit them as one snapshot.
func (p *Pipeline[B]) loop() {
	defer close(p.done)
	defer p.env.LoopDone()
	for {
		select {
		case <-p.kick:
		case <-p.ctx.Done():
			return
		}
		for p.commitNext() {
		}
		p.mu.Lock()
		stop := p.life.stopping
		p.mu.Unlock()
		if stop {
			return
		}
	}
}

// commitNext commits the next run, if one is ready, and reports whether another may follow.
func (p *Pipeline[B]) commitNext() bool {
	batches := p.nextRun()
	if batches == nil {
		return false
	}
	defer p.EnterQueue()()
	followUp, err := p.env.Commit(p.runCtx(), batches)
	p.mu.Lock()
	if err != nil {
		first, last := batches[0].Head().Seq, batches[len(batches)-1].Head().Seq
		p.failLocked(fmt.Errorf("iceberg: commit run %d..%d: %w", first, last, err))
		p.mu.Unlock()
		return false
	}
	p.queue = p.queue[len(batches):]
	p.positionsCommittedLocked(batches)
	p.committed = batches[len(batches)-1].Head().Seq
	p.counts.commits++
	n := p.counts.commits
	p.signalLocked()
	p.mu.Unlock()
	followUp(p.ctx, n)
	return true
}

// nextRun cuts the batches of the next run from the head of the queue (nil when none is ready): the longest
// staged prefix, with WithCheckpoints cut back to its newest token. They are marked handed: from here on their
// files may be referenced by a commit, so they are never deleted.
func (p *Pipeline[B]) nextRun() []B {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.life.failed != nil || p.life.stopping {
		return nil
	}
	n := 0
	for n < len(p.queue) && p.queue[n].Head().Staged {
		n++
	}
	if p.gatedLocked() {
		for n > 0 && p.queue[n-1].Head().Seq > p.released {
			n--
		}
	}
	whole := n
	if c := p.cfg.RunHeldCap; c > 0 {
		var held int64
		for i, b := range p.queue[:n] {
			_, runHeld := b.Held()
			if held += runHeld; held > c && i > 0 {
				n = i
				break
			}
		}
	}
	// The cap gives way when no run could end within it (WithCheckpoints: a run ends at a checkpoint).
	if n = p.runEndLocked(n); n == 0 {
		n = p.runEndLocked(whole)
	}
	if n == 0 {
		return nil
	}
	batches := append([]B(nil), p.queue[:n]...)
	for _, b := range batches {
		b.Head().Handed = true
	}
	return batches
}

// runEndLocked cuts a prefix of n staged batches back to where a run may end: no bulk file split (spanEnd)
// and, with WithCheckpoints, every row covered (coveredEnd). Each cut only shortens it, so the two are applied
// until both hold.
func (p *Pipeline[B]) runEndLocked(n int) int {
	for {
		m := spanEnd(p.queue, n)
		if p.cfg.Checkpoints {
			m = coveredEnd(p.queue, m)
		}
		if m == n {
			return n
		}
		n = m
	}
}

// Flush seals the open buffer and waits until everything accepted before it is committed (with
// WithCheckpoints: up to the last checkpoint).
func (p *Pipeline[B]) Flush(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.usableLocked(); err != nil {
		return err
	}
	return p.waitCommittedLocked(ctx, p.flushTargetLocked())
}

// flushTargetLocked seals the open buffer and returns the sequence number a flush waits for.
func (p *Pipeline[B]) flushTargetLocked() int64 {
	p.sealLocked()
	p.sealCloserLocked()
	return p.sealedTargetLocked()
}

// sealedTargetLocked returns the sequence number a flush of the sealed batches waits for.
func (p *Pipeline[B]) sealedTargetLocked() int64 {
	n := len(p.queue)
	if p.cfg.Checkpoints {
		n = coveredEnd(p.queue, n)
	}
	if n == 0 {
		return p.committed
	}
	return p.queue[n-1].Head().Seq
}

func (p *Pipeline[B]) waitCommittedLocked(ctx context.Context, target int64) error {
	for p.committed < target {
		if p.life.failed != nil {
			return p.life.failed
		}
		if p.life.closed {
			select {
			case <-p.done: // no commit can come any more (Abort, or a Close that gave up)
				return ErrClosed
			default:
			}
		}
		if err := p.waitLocked(ctx); err != nil {
			return err
		}
	}
	return nil
}

// ShutdownResult is what Shutdown found: Shutdown is what Close (flush true) and Abort (flush false) have in
// common: refuse new calls, flush if asked, then stop every goroutine and release what was never committed,
// all by the time ctx ends.
type ShutdownResult struct {
	FlushErr error       // why the flush did not complete
	Failed   error       // the failure that had stopped the pipeline, if any
	Lost     Uncommitted // what was not committed
	StopErr  error       // ctx ended before the goroutines did (they finish in the background)
}

// Shutdown refuses new calls, flushes if flush, then stops the encoders and the commit loop (see ShutdownResult).
func (p *Pipeline[B]) Shutdown(ctx context.Context, flush bool) (ShutdownResult, error) {
	var s ShutdownResult
	p.mu.Lock()
	if p.life.closed {
		p.mu.Unlock()
		return s, ErrClosed
	}
	if flush && p.life.failed == nil {
		s.FlushErr = p.waitCommittedLocked(ctx, p.flushTargetLocked())
	}
	s.Failed = p.life.failed
	p.life.closed, p.life.stopping = true, true
	if p.buf.timer != nil {
		p.buf.timer.Stop()
		p.buf.timer = nil
	}
	p.signalLocked()
	p.mu.Unlock()
	s.Lost, s.StopErr = p.Stop(ctx)
	return s, nil
}

// Uncommitted describes what a writer that stopped early did not commit.
type Uncommitted struct {
	Rows, Batches          int64
	InFlightRows, InFlight int64 // of which in a commit still in flight (outcome unknown until it resolves)
}

// String describes the rows and batches lost.
func (u Uncommitted) String() string {
	s := fmt.Sprintf("%d rows in %s not committed", u.Rows, batches(u.Batches))
	if u.InFlight > 0 {
		s += fmt.Sprintf(" (%d rows in %s in a commit still in flight, whose outcome is unknown until it "+
			"resolves; LastCheckpoint tells)", u.InFlightRows, batches(u.InFlight))
	}
	return s
}

func batches(n int64) string {
	if n == 1 {
		return "1 batch"
	}
	return fmt.Sprintf("%d batches", n)
}

// uncommittedLocked counts the rows and batches not committed.
func (p *Pipeline[B]) uncommittedLocked() Uncommitted {
	var u Uncommitted
	if !none(p.buf.open) {
		u.Rows += p.buf.open.Head().Rows
		u.Batches++
	}
	for _, b := range p.queue {
		u.Rows += b.Head().Rows
		u.Batches++
		if b.Head().Handed {
			u.InFlightRows += b.Head().Rows
			u.InFlight++
		}
	}
	return u
}

// Stop waits for the commit in flight, stops every goroutine and releases what was never committed. It returns
// by the time ctx ends: then encoders are cancelled at once, the commit in flight gets the commit timeout more
// on the writer's context, and the rest of the shutdown happens in the background.
func (p *Pipeline[B]) Stop(ctx context.Context) (Uncommitted, error) {
	// The commit loop sees stopping after its current run and exits; then encoders are cancelled.
	p.kickLoop()
	if !WaitOr(ctx, p.done) {
		return p.StopLater(ctx)
	}
	p.cancel()
	encoded := make(chan struct{})
	go func() {
		p.enc.wg.Wait()
		close(encoded)
	}()
	if !WaitOr(ctx, encoded) {
		return p.StopLater(ctx)
	}
	p.mu.Lock()
	lost := p.uncommittedLocked()
	p.mu.Unlock()
	p.Release(ctx)
	return lost, nil
}

// WaitOr waits for ch to close and reports true, or for ctx to end first and reports false (a channel already
// closed wins over a context already done).
func WaitOr(ctx context.Context, ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
	}
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}

// StopLater gives up waiting: encoders stop now, a commit in flight has the commit timeout to resolve, and the
// goroutines' end and the release of what was never committed happen in the background.
func (p *Pipeline[B]) StopLater(ctx context.Context) (Uncommitted, error) {
	p.enc.cancel()
	hard := time.AfterFunc(p.cfg.CommitTimeout, p.cancel)
	p.mu.Lock()
	lost := p.uncommittedLocked()
	p.mu.Unlock()
	go func() {
		<-p.done
		hard.Stop()
		p.cancel()
		p.enc.wg.Wait()
		// Removing the files of batches never handed over is best effort and nobody waits for it any more: a
		// minute bounds it on a store that does not answer.
		rctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		p.Release(rctx)
	}()
	return lost, ctx.Err()
}

// Release frees what was never committed and has the env delete the files of batches never handed to the
// committer (provably not committed), as far as ctx allows.
func (p *Pipeline[B]) Release(ctx context.Context) {
	p.mu.Lock()
	var dropped int64
	if p.buf.gather != nil {
		p.buf.gather.release()
		p.buf.gather = nil
	}
	if !none(p.buf.open) {
		dropped += p.buf.open.Head().Rows
		for _, r := range p.buf.open.Head().In.Recs {
			r.Release()
		}
		p.buf.open = *new(B)
	}
	p.buf.marks = nil
	var orphans []string
	for _, b := range p.queue {
		dropped += b.Head().Rows
		for _, r := range b.Head().In.Recs {
			r.Release()
		}
		b.Head().In.Recs = nil
		if b.Head().Handed {
			continue // a run whose outcome may be unknown: its files are kept
		}
		orphans = append(orphans, b.FilePaths()...)
	}
	p.queue = nil
	p.addMem(-p.memUsed)
	p.counts.discarded += dropped
	p.signalLocked()
	p.mu.Unlock()
	if len(orphans) > 0 && ctx.Err() == nil {
		p.env.RemoveFiles(ctx, orphans)
	}
}

// Stopped returns a channel closed once the commit loop and every encoder have returned.
func (p *Pipeline[B]) Stopped() <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		<-p.done
		p.enc.wg.Wait()
		close(ch)
	}()
	return ch
}

// State is a consistent reading of the pipeline's counters.
type State struct {
	BufferedRows, BufferedBytes, UncommittedRows int64
	UncommittedBatches                           int
	Committed                                    int64
	RowsAccepted, BytesAccepted, Batches         int64
	Discarded                                    int64
	Oldest                                       time.Time // the first row of the oldest buffer with rows
}

// State returns a consistent reading of the pipeline's counters.
func (p *Pipeline[B]) State() State {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := State{BufferedBytes: p.memUsed, UncommittedBatches: len(p.queue), Committed: p.committed,
		RowsAccepted: p.counts.rowsAccepted, BytesAccepted: p.counts.bytesAccepted, Batches: p.counts.batches, Discarded: p.counts.discarded}
	if !none(p.buf.open) {
		s.BufferedRows = p.buf.open.Head().Rows
		s.Oldest = older(s.Oldest, p.buf.open)
	}
	for _, b := range p.queue {
		s.UncommittedRows += b.Head().Rows
		if b.Head().Staged {
			held, _ := b.Held()
			s.BufferedBytes += held
		}
		s.Oldest = older(s.Oldest, b)
	}
	return s
}

// AbortSource drops a partition's rows that no checkpoint covers yet (open, or sealed as solo batches no commit
// took), seals the covered ones still open and waits until every batch holding rows of the partition is
// committed. Uncovered rows sealed in a batch shared with other partitions (changes to a key two partitions
// changed: bySource) are ErrPartitionUncovered. It returns the rows dropped and the versions to restore for them (Record.undo),
// oldest first, which the caller restores even after an error.
func (p *Pipeline[B]) AbortSource(ctx context.Context, src string) (int64, []*changes.Undo, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.usableLocked(); err != nil {
		return 0, nil, err
	}
	// A checkpoint of the partition still in the open buffer covers the sealed batches before it: the policy
	// may seal a poll's rows before the poll's checkpoint is placed. Sealing the open buffer below takes it along.
	openCovers := slices.ContainsFunc(p.buf.marks, func(m mark) bool { return m.token || m.source == src })
	var drop []B // solo batches of the partition that no checkpoint covers: dropped whole
	if p.cfg.Checkpoints && !openCovers {
		for i, b := range p.queue {
			if !slices.Contains(b.Head().In.Sources, src) || coversLater(p.queue[i:], src) {
				continue
			}
			if !b.Head().Solo || b.Head().Handed {
				return 0, nil, fmt.Errorf("%w: partition %q, batch %d", ErrPartitionUncovered, src, b.Head().Seq)
			}
			drop = append(drop, b)
		}
	}
	dropped, orphans := p.dropSealedLocked(drop)
	var undos, newest []*changes.Undo
	for _, b := range drop {
		for _, u := range b.Head().In.Undos {
			undos = append(undos, u...) // the sealed rows come before the open buffer's
		}
	}
	if g := p.buf.gather; g != nil && g.source == src {
		// Marks finish the gather: a gather is after every mark, so none covers it.
		dropped += g.rows
		p.dropLocked(g.rows, g.bytes)
		g.release()
		p.buf.gather = nil
		newest = g.undo // the gather's rows come after the open buffer's
	}
	if o := p.buf.open; !none(o) {
		covered := 0 // records of src before this index are covered by a mark
		for _, m := range p.buf.marks {
			if m.token || m.source == src {
				covered = max(covered, m.at)
			}
		}
		keep := derived(p.env.NewBatch, o)
		keep.Head().Rows, keep.Head().Bytes = o.Head().Rows, o.Head().Bytes
		kept := make([]int, len(o.Head().In.Recs)+1) // kept[i]: records kept before record i
		for i := range o.Head().In.Recs {
			kept[i+1] = kept[i]
			r := o.Head().record(i)
			if r.Source == src && i >= covered {
				dropped += r.NumRows()
				keep.Head().Rows -= r.NumRows()
				keep.Head().Bytes -= r.Size
				p.dropLocked(r.NumRows(), r.Size)
				r.Rec.Release()
				undos = append(undos, r.Undo...)
				continue
			}
			kept[i+1]++
			keep.Head().Push(r)
			keep.Head().In.Keyed = keep.Head().In.Keyed || r.Kind != changes.Insert
		}
		for i := range p.buf.marks {
			p.buf.marks[i].at = kept[p.buf.marks[i].at]
		}
		o.Head().In.Recs, o.Head().In.Kinds, o.Head().In.Sources, o.Head().In.Sizes, o.Head().In.Undos, o.Head().In.Hashes, o.Head().In.Sels = keep.Head().In.Recs, keep.Head().In.Kinds, keep.Head().In.Sources, keep.Head().In.Sizes, keep.Head().In.Undos, keep.Head().In.Hashes, keep.Head().In.Sels
		o.Head().Rows, o.Head().Bytes, o.Head().In.Keyed = keep.Head().Rows, keep.Head().Bytes, keep.Head().In.Keyed
		if slices.Contains(o.Head().In.Sources, src) || openCovers {
			p.sealLocked() // the covered rows go now, with the position that covers them
		}
	}
	delete(p.buf.dirtySrc, src)
	p.counts.discarded += dropped
	p.signalLocked()
	target := p.committed
	for _, b := range p.queue {
		if slices.Contains(b.Head().In.Sources, src) {
			target = b.Head().Seq
		}
	}
	if len(orphans) > 0 {
		// Files of staged batches no commit took: deleted as a provably uncommitted run's are, outside mu.
		p.mu.Unlock()
		p.env.RemoveFiles(ctx, orphans)
		p.mu.Lock()
	}
	return dropped, append(undos, newest...), p.waitCommittedLocked(ctx, target)
}

// dropSealedLocked takes sealed batches out of the queue before any commit took them and returns their rows
// and the files of those already staged, for the caller to delete. An encoder still at work on one sees it
// dropped: it skips the batch or deletes what it wrote (encode). Their memory is freed as always: by the
// encoder for the rows, by leaving the queue for a staged batch's file metadata.
func (p *Pipeline[B]) dropSealedLocked(drop []B) (rows int64, orphans []string) {
	if len(drop) == 0 {
		return 0, nil
	}
	for _, b := range drop {
		b.Head().Dropped = true
		rows += b.Head().Rows
		if b.Head().Staged {
			orphans = append(orphans, b.FilePaths()...)
		}
	}
	p.queue = slices.DeleteFunc(p.queue, func(b B) bool { return b.Head().Dropped })
	p.kickLoop() // a batch that held the head of the queue may have gone
	return rows, orphans
}

// dropLocked takes dropped rows out of the open buffer's counters.
func (p *Pipeline[B]) dropLocked(rows, bytes int64) {
	p.buf.open.Head().Rows -= rows
	p.buf.open.Head().Bytes -= bytes
	p.addMem(-bytes)
}

// coversLater reports whether src's rows in q[0] are covered: by q[0]'s own checkpoints or a later batch's.
func coversLater[B Batch[B]](q []B, src string) bool {
	if _, open := q[0].Head().Uncovered[src]; !open {
		return true
	}
	for _, b := range q[1:] {
		if _, ok := b.Head().Positions[src]; ok || b.Head().HasToken {
			return true
		}
	}
	return false
}

// none reports whether b is the zero batch (nil).
func none[B comparable](b B) bool {
	var zero B
	return b == zero
}

// InspectOpen calls fn with the open buffer (nil when there is none) under the pipeline's lock: for tests and
// reports that look at what a call left there. fn must not call the pipeline.
func (p *Pipeline[B]) InspectOpen(fn func(open B)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fn(p.buf.open)
}

// Changed returns the channel the pipeline's next state change closes (a batch sealed, staged or committed, a
// failure, Close): a wait on events.
func (p *Pipeline[B]) Changed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changed
}

// AllStaged reports whether every batch sealed so far is encoded and staged for a commit.
func (p *Pipeline[B]) AllStaged() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, b := range p.queue {
		if !b.Head().Staged {
			return false
		}
	}
	return true
}

// Closing reports whether Close or Abort has begun (the pipeline takes no more calls).
func (p *Pipeline[B]) Closing() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.life.closed
}
