package iceberg

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

// pipeline moves batches from the calls to the committer. It owns the open buffer and its seal policy (rows,
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
type pipeline struct {
	env pipelineEnv
	cfg pipelineConfig

	ctx      context.Context // the writer's own: commits run on it, never on a caller's
	cancel   context.CancelFunc
	enc      encoders
	kick     chan struct{}
	done     chan struct{} // closed when the commit loop exits
	commitMu sync.Mutex    // the commit queue (enterQueue)

	mu        sync.Mutex
	changed   chan struct{} // closed and replaced on every state change: a ctx-aware condition variable
	buf       openBuffer
	queue     []*batch // sealed, not yet committed, in sequence order
	nextSeq   int64
	committed int64 // last committed sequence number
	released  int64 // a Router's commit rounds (sharedBudget.gated): the last sequence number a round released
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
type openBuffer struct {
	open   *batch
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

// bulkState is a Router's bulk phase: batches are written into files kept open across batches (bulkfile.go); a
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

// batchRecord is one call's owned, validated record on its way into the open buffer.
type batchRecord struct {
	Rec    arrow.RecordBatch
	Size   int64 // Arrow bytes, what the memory limit counts
	Kind   opKind
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
	// only those no later change supersedes, once (keyStage.resolve). size then counts rec's whole buffers.
	Sel []int32
}

// rows is the number of rows the record hands on: those of sel, else all of rec's.
func (r batchRecord) rows() int64 {
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

// pipelineConfig is the pipeline's share of the options.
type pipelineConfig struct {
	flushRows      int64
	flushBytes     int64
	flushInterval  time.Duration // 0: no interval policy
	rowBudget      int64         // bytes of rows held before Write waits (the memory limit less the encoders' reserve)
	maxUncommitted int           // sealed batches a commit may take before Write waits
	maxInFlight    int           // encodings at once
	checkpoints    bool          // WithCheckpoints: runs end at a token, rows after the newest are never committed
	commitTimeout  time.Duration // how long a commit in flight outlives a Close that gave up waiting
	mem            memory.Allocator
	// posOrder is WithPositionOrder's (nil: positions are not compared).
	posOrder func(partition, a, b string) (int, bool)
	// lastToken is the token committed last by the writer's ID, if any: the same token again with no rows is
	// not a new checkpoint.
	lastToken *string
	// shared is a Router's budget and encode pool, used in place of rowBudget and maxInFlight (nil: the
	// writer's own).
	shared *sharedBudget
	// split cuts a sealed batch into batches of whole partitions when its files' metadata would exceed the
	// fanout share (fanout_split.go), nil to keep it whole; runHeldCap bounds the file metadata one run takes
	// (at least one batch; 0: no bound).
	split      func(b *batch) []*batch
	runHeldCap int64
	// sharedKeys reports whether two partitions of a keyed batch change one key (keyStage.sourcesShareKeys);
	// nil: they may, and such a batch is never split by partition (bySource).
	sharedKeys func(b *batch) bool
	// What the pipeline reports to the writer's hooks (nil when no hook wants it); each only queues an event.
	sealed  func(b *batch)                                       // b was sealed (called with mu held)
	encoded func(b *batch, start time.Time)                      // b's files were written
	waited  func(d time.Duration, memory bool, rows, size int64) // a call waited d for room
}

// pipelineEnv is what the pipeline asks of the writer.
type pipelineEnv interface {
	// encode writes a sealed batch's files on the encoders' context and fills in what the commit needs (files,
	// delete files, key sets), taking at most the extra encoder slots slots grants. The batch is the encoder's
	// until encode returns; an error fails the writer.
	encode(ctx context.Context, b *batch, slots encodeSlots) error
	// commit commits the batches as one run on the writer's context and, when it succeeds, installs the
	// table it left before returning (a Flush that returns sees it). The run is returned for reports.
	commit(ctx context.Context, batches []*batch) (*Run, *CommitResult, error)
	// committed follows a successful commit, still inside the commit queue: callbacks, maintenance. n counts
	// the runs committed so far.
	committed(ctx context.Context, run *Run, batches []*batch, res *CommitResult, n int64)
	// failure is the error the writer keeps after err stopped it (masked, logged).
	failure(err error) error
	// removeFiles deletes files provably never committed, as far as ctx allows.
	removeFiles(ctx context.Context, paths []string)
	// loopDone runs when the commit loop exits: nothing is committed after it.
	loopDone()
}

// enterQueue takes the commit queue: no run of this writer commits until leave is called, and the runs after
// it commit later. Compact, the maintainer's commits, schema evolution and a Router's phase changes commit this
// way, between two runs; the commit loop takes it for each run.
func (p *pipeline) enterQueue() (leave func()) {
	p.commitMu.Lock()
	return p.commitMu.Unlock
}

// newPipeline makes a pipeline whose next batch gets sequence number committed+1; start starts its commit loop.
// ctx's values are kept, its cancellation is not: the pipeline lives until Close or Abort.
func newPipeline(ctx context.Context, env pipelineEnv, cfg pipelineConfig, committed int64) *pipeline {
	p := &pipeline{
		env: env, cfg: cfg, kick: make(chan struct{}, 1), done: make(chan struct{}), changed: make(chan struct{}),
		enc: encoders{sem: semaphore.NewWeighted(int64(cfg.maxInFlight))}, committed: committed, nextSeq: committed + 1,
		buf: openBuffer{lastPos: map[string]string{}, dirtySrc: map[string]bool{}}, pos: positionState{known: map[string]string{}},
	}
	if cfg.lastToken != nil {
		p.buf.lastToken, p.buf.hasLastToken = *cfg.lastToken, true
	}
	if p.cfg.mem == nil {
		p.cfg.mem = memory.DefaultAllocator
	}
	if cfg.shared != nil {
		p.enc.sem = cfg.shared.sem
		cfg.shared.join(p)
	}
	p.ctx, p.cancel = context.WithCancel(context.WithoutCancel(ctx))
	p.enc.ctx, p.enc.cancel = context.WithCancel(p.ctx)
	return p
}

func (p *pipeline) start() { go p.loop() }

// usable reports why the pipeline takes no calls, if it does not.
func (p *pipeline) usable() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.usableLocked()
}

func (p *pipeline) usableLocked() error {
	if p.life.closed {
		return ErrClosed
	}
	if p.life.failed != nil {
		return p.life.failed
	}
	return nil
}

// signalLocked wakes every waiter.
func (p *pipeline) signalLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// waitLocked releases mu until the state changes or ctx ends.
func (p *pipeline) waitLocked(ctx context.Context) error {
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

// accept waits for room and adds owned records to the open buffer, all of them or (on an error) none: one call's
// records (Apply's deletes and upserts) are accepted together, in order.
func (p *pipeline) accept(ctx context.Context, recs ...batchRecord) error {
	var size int64
	for _, r := range recs {
		size += r.Size
	}
	var waitFrom time.Time // the first wait for room, reported after mu is released
	var waitMem bool
	if p.cfg.waited != nil {
		rows := recRows(recs)
		defer func() {
			if !waitFrom.IsZero() {
				p.cfg.waited(time.Since(waitFrom), waitMem, rows, size)
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
			if s := p.cfg.shared; s != nil {
				memFull = s.full(held + size)
			} else {
				memFull = p.memUsed+held+size > p.cfg.rowBudget
			}
		}
		if !memFull && p.committableLocked()-p.pendingLocked() < p.cfg.maxUncommitted {
			break
		}
		if waitFrom.IsZero() && p.cfg.waited != nil {
			waitFrom, waitMem = time.Now(), memFull
		}
		if !rowsFull && p.gatedLocked() {
			// Only a commit makes room now, and a Router's writer commits in rounds: ask for one.
			p.cfg.shared.askRound()
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
func (p *pipeline) sealForMemoryLocked() bool {
	if p.buf.open == nil || p.buf.open.Bytes == 0 {
		return false
	}
	if p.cfg.checkpoints && len(p.buf.marks) == 0 && p.memUsed > p.buf.open.Bytes {
		return false
	}
	p.sealLocked()
	return true
}

// addLocked adds one record to the open buffer (a view's rows are copied into the gather) and seals the buffer
// when the policy trips.
func (p *pipeline) addLocked(rec batchRecord) {
	if p.buf.open != nil && rec.Kind != opDelete && p.buf.open.In.Schema != nil && p.buf.open.In.Schema != rec.Rec.Schema() {
		// The table's schema changed: a batch encodes against one schema, so the buffer ends here.
		p.sealLocked()
	}
	b := p.openLocked()
	if rec.Kind != opDelete {
		b.In.Schema = rec.Rec.Schema()
	}
	if rec.View {
		if p.buf.gather != nil && !p.buf.gather.fits(rec) {
			p.finishGatherLocked()
		}
		if p.buf.gather == nil {
			p.buf.gather = newGather(p.cfg.mem, rec)
		}
		p.buf.gather.add(rec)
	} else {
		p.finishGatherLocked()
		b.push(rec)
	}
	b.In.Keyed = b.In.Keyed || rec.Kind != opInsert
	b.Rows += rec.rows()
	b.Bytes += rec.Size
	p.addMem(rec.Size)
	p.counts.rowsAccepted += rec.rows()
	p.counts.bytesAccepted += rec.Size
	p.buf.dirty = true
	p.buf.dirtySrc[rec.Source] = true
	if b.Rows >= p.cfg.flushRows || b.Bytes >= p.cfg.flushBytes {
		p.sealDueLocked()
	}
}

// sealDueLocked is the flush policy's seal (rows, bytes, interval). With WithCheckpoints and no checkpoint in
// the open buffer it seals nothing: such a batch could not commit before a later checkpoint anyway, and sealed
// its keyed rows could no longer be dropped alone (Source.Abort). The buffer is then due: the next checkpoint
// seals it (sealMarkedLocked). The memory limit still seals it (sealForMemoryLocked).
func (p *pipeline) sealDueLocked() {
	if p.cfg.checkpoints && len(p.buf.marks) == 0 {
		p.buf.due = true
		return
	}
	p.sealLocked()
}

// sealMarkedLocked follows a checkpoint: a buffer the flush policy found due while no checkpoint could cut it
// is sealed at this one.
func (p *pipeline) sealMarkedLocked() {
	if p.buf.due && len(p.buf.marks) > 0 {
		p.sealLocked()
	}
}

// openLocked returns the open buffer, opening one (and its interval timer) if there is none.
func (p *pipeline) openLocked() *batch {
	if p.buf.open == nil {
		p.buf.open = &batch{FirstAt: time.Now()}
		p.startTimerLocked()
	}
	return p.buf.open
}

// startTimerLocked arms the interval seal for the open buffer.
func (p *pipeline) startTimerLocked() {
	if p.cfg.flushInterval <= 0 {
		return
	}
	b := p.buf.open
	p.buf.timer = time.AfterFunc(p.cfg.flushInterval, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.buf.open == b && !p.life.closed {
			p.sealDueLocked()
		}
	})
}

// finishGatherLocked turns the gather into a record of the open buffer.
func (p *pipeline) finishGatherLocked() {
	if p.buf.gather == nil {
		return
	}
	p.buf.open.push(p.buf.gather.finish())
	p.buf.gather = nil
}

// push appends an owned record to the batch's records (its counters are the caller's).
func (b *batch) push(rec batchRecord) {
	b.In.Recs = append(b.In.Recs, rec.Rec)
	b.In.Kinds = append(b.In.Kinds, rec.Kind)
	b.In.Sources = append(b.In.Sources, rec.Source)
	b.In.Sizes = append(b.In.Sizes, rec.Size)
	b.In.Undos = append(b.In.Undos, rec.Undo)
	b.In.Hashes = append(b.In.Hashes, rec.Hashes)
	b.In.Sels = append(b.In.Sels, rec.Sel)
}

// record returns record i of the batch as the batchRecord it was pushed as (its undo only while the batch is
// open or solo: sealLocked drops the others').
func (b *batch) record(i int) batchRecord {
	r := batchRecord{Rec: b.In.Recs[i], Kind: b.In.Kinds[i], Source: b.In.Sources[i], Size: b.In.Sizes[i], Hashes: b.In.Hashes[i],
		Sel: b.In.Sels[i]}
	if i < len(b.In.Undos) {
		r.Undo = b.In.Undos[i]
	}
	return r
}

// recRows is the number of rows record i hands on (batchRecord.rows).
func (b *batch) recRows(i int) int64 {
	if i < len(b.In.Sels) && b.In.Sels[i] != nil {
		return int64(len(b.In.Sels[i]))
	}
	return b.In.Recs[i].NumRows()
}

// sel is record i's selection (batchRecord.sel), nil: all its rows.
func (b *batch) sel(i int) []int32 {
	if i < len(b.In.Sels) {
		return b.In.Sels[i]
	}
	return nil
}

// heldLocked is the memory held by the file metadata of the batches a commit may take (batch.held): what the
// commit loop frees without the caller. Batches that wait for a checkpoint are left out, as in
// committableLocked: the caller's next checkpoint is what lets them go, so waiting on them would never end.
func (p *pipeline) heldLocked() int64 {
	var n int64
	for _, b := range p.queue[:p.committableLocked()] {
		if b.Staged { // an encoding's batch is its own until it returns
			n += b.enc.held
		}
	}
	return n
}

// pendingLocked counts the staged batches whose rows wait in a bulk file still open: only more rows (or a
// flush) let them go, so they never make a call wait for room (they hold no rows, and no file metadata yet).
func (p *pipeline) pendingLocked() int {
	n := 0
	for _, b := range p.queue {
		if b.Staged && b.bulk.Span != nil && !b.bulk.Span.Done {
			n++
		}
	}
	return n
}

// committableLocked counts the sealed batches a commit may take. With WithCheckpoints, batches after the newest
// checkpoint wait for the next one, which this very caller may be about to make: counting them would block
// Write before it (they hold files, not rows; the memory limit bounds the rows).
func (p *pipeline) committableLocked() int {
	if !p.cfg.checkpoints {
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
func coveredEnd(q []*batch, n int) int {
	end := 0
	var pending map[string]struct{} // partitions with rows no checkpoint has covered yet
	for i, b := range q[:n] {
		if b.HasToken {
			clear(pending)
		}
		for s := range b.Positions {
			delete(pending, s)
		}
		for s := range b.Uncovered {
			if pending == nil {
				pending = map[string]struct{}{}
			}
			pending[s] = struct{}{}
		}
		if len(pending) == 0 && (b.HasToken || len(b.Positions) > 0 || (b.bulk.Closer && end == i)) {
			end = i + 1
		}
	}
	return end
}

// checkpoint marks a row boundary with a token: every row accepted so far is covered by it.
func (p *pipeline) checkpoint(token string) error {
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

// checkpointPositions marks a row boundary with source positions: the rows of each partition accepted so far
// are covered by its position. A position before its partition's last known one refuses the whole call
// (ErrPositionBackwards).
func (p *pipeline) checkpointPositions(positions map[string]string) error {
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

// checkOrder returns ErrPositionBackwards for positions that come before their partition's last known one
// (the writer must be usable).
func (p *pipeline) checkOrder(positions map[string]string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.checkOrderLocked(positions)
}

func (p *pipeline) checkOrderLocked(positions map[string]string) error {
	if err := p.usableLocked(); err != nil {
		return err
	}
	if p.cfg.posOrder == nil {
		return nil
	}
	return checkPositionOrder(p.cfg.posOrder, positions, p.pos.known)
}

// resumed makes positions (partition -> position, "" for none) the partitions' last known positions.
func (p *pipeline) resumed(positions map[string]string) {
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
func (p *pipeline) markLocked(m mark) {
	b := p.openLocked()
	p.finishGatherLocked()
	m.at = len(b.In.Recs)
	p.buf.marks = append(p.buf.marks, m)
}

// sealLocked turns the open buffer into a batch with the next sequence number and starts its encoding. Every
// checkpoint in the buffer goes with the batch. With WithCheckpoints the batch takes only the rows the
// checkpoints cover and the rest stay open (a batch with no rows carries checkpoints that cover none); a buffer
// without checkpoints is sealed whole (its inserts as a batch per partition: bySource) and waits in the queue
// until a later checkpoint covers it.
func (p *pipeline) sealLocked() {
	if p.buf.open == nil {
		return
	}
	p.finishGatherLocked()
	if p.buf.timer != nil {
		p.buf.timer.Stop()
		p.buf.timer = nil
	}
	b := p.buf.open
	p.buf.open = nil
	p.buf.due = false
	var keep *batch
	if p.cfg.checkpoints && len(p.buf.marks) > 0 {
		b, keep = cut(b, p.buf.marks)
	}
	p.takeMarks(b)
	p.buf.marks = nil
	if p.cfg.checkpoints && !b.HasToken && len(b.Positions) == 0 {
		b.Uncovered = map[string]struct{}{}
		for _, s := range b.In.Sources {
			b.Uncovered[s] = struct{}{}
		}
	}
	if keep != nil && len(keep.In.Recs) > 0 {
		p.buf.open = keep
		p.startTimerLocked()
	}
	if len(b.In.Recs) == 0 && !b.HasToken && len(b.Positions) == 0 && !b.bulk.Closer {
		return // an open buffer that held nothing
	}
	var parts []*batch
	for _, b := range bySource(b, p.cfg.sharedKeys) {
		if !b.Solo {
			b.In.Undos = nil // its rows are never dropped: no versions to restore
		}
		if p.cfg.split != nil && len(b.In.Recs) > 0 {
			if s := p.cfg.split(b); s != nil {
				parts = append(parts, s...)
				continue
			}
		}
		parts = append(parts, b)
	}
	for _, b := range parts {
		b.Seq = p.nextSeq
		b.bulk.Gen = p.bulk.fileGen
		p.nextSeq++
		p.queue = append(p.queue, b)
		p.counts.batches++
		if p.cfg.sealed != nil {
			p.cfg.sealed(b)
		}
		if len(b.In.Recs) == 0 && !b.bulk.Closer {
			b.Staged = true
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
func bySource(b *batch, sharedKeys func(*batch) bool) []*batch {
	if b.Uncovered == nil || len(b.In.Recs) == 0 {
		return []*batch{b}
	}
	if len(b.Uncovered) == 1 {
		b.Solo = true
		return []*batch{b}
	}
	if b.In.Keyed && (sharedKeys == nil || sharedKeys(b)) {
		return []*batch{b}
	}
	var out []*batch
	of := map[string]*batch{}
	for i := range b.In.Recs {
		r := b.record(i)
		s := of[r.Source]
		if s == nil {
			s = &batch{FirstAt: b.FirstAt, In: batchRows{Schema: b.In.Schema}, Solo: true, Uncovered: map[string]struct{}{r.Source: {}}}
			of[r.Source] = s
			out = append(out, s)
		}
		s.push(r)
		s.Rows += r.rows()
		s.Bytes += r.Size
		s.In.Keyed = s.In.Keyed || r.Kind != opInsert
	}
	return out
}

// takeMarks gives the batch the newest token and the newest position per partition of the open buffer's marks.
func (p *pipeline) takeMarks(b *batch) {
	for _, m := range p.buf.marks {
		if m.token {
			b.Token, b.HasToken = m.value, true
			continue
		}
		if b.Positions == nil {
			b.Positions, b.PosSince = map[string]string{}, map[string]time.Time{}
		}
		b.Positions[m.source] = m.value
		if _, ok := b.PosSince[m.source]; !ok {
			b.PosSince[m.source] = m.when
		}
	}
}

// cut splits an open buffer at its checkpoints: the records they cover (in order) and the rest.
func cut(o *batch, marks []mark) (take, keep *batch) {
	tokenAt := 0
	srcAt := map[string]int{}
	for _, m := range marks {
		if m.token {
			tokenAt = max(tokenAt, m.at)
		} else {
			srcAt[m.source] = max(srcAt[m.source], m.at)
		}
	}
	take = &batch{FirstAt: o.FirstAt, In: batchRows{Schema: o.In.Schema}}
	keep = &batch{FirstAt: o.FirstAt, In: batchRows{Schema: o.In.Schema}}
	for i := range o.In.Recs {
		dst := keep
		if at, ok := srcAt[o.In.Sources[i]]; i < tokenAt || (ok && i < at) {
			dst = take
		}
		r := o.record(i)
		if dst == take {
			r.Undo = nil
		}
		dst.push(r)
		dst.Rows += r.rows()
		dst.Bytes += o.In.Sizes[i]
		dst.In.Keyed = dst.In.Keyed || o.In.Kinds[i] != opInsert
	}
	return take, keep
}

// encode runs one batch's encoding, at most MaxInFlight at once, and stages it for the commit loop. The rows
// are released once written, whatever the outcome.
func (p *pipeline) encode(b *batch) {
	defer p.enc.wg.Done()
	// Encoders run on their own context: Close and Abort cancel it at once when their caller's context ends (a
	// batch still encoding is not committed, so stopping it is never ambiguous), while a commit in flight keeps
	// the writer's.
	ctx := p.enc.ctx
	if b.bulk.Closer && !p.waitEarlierStaged(ctx, b) {
		return // shutting down, or failed
	}
	if err := p.enc.sem.Acquire(ctx, 1); err != nil {
		// Shutting down: release frees the rows of the queue's batches, this one's if Source.Abort dropped it.
		p.mu.Lock()
		if b.Dropped {
			for _, r := range b.In.Recs {
				r.Release()
			}
			b.In.Recs = nil
		}
		p.mu.Unlock()
		return
	}
	// No retry here: the rows were handed to the encoder. Object stores retry requests themselves; a batch that
	// still fails stops the writer, and the caller replays from its last checkpoint.
	var start time.Time
	if p.cfg.encoded != nil {
		start = time.Now()
	}
	p.mu.Lock()
	skip := b.Dropped // Source.Abort dropped it before its turn
	slots := encodeSlots{sem: p.enc.sem, flushRows: p.cfg.flushRows, flushBytes: p.cfg.flushBytes}
	p.mu.Unlock()
	var err error
	if !skip {
		err = p.env.encode(ctx, b, slots)
	}
	p.enc.sem.Release(1)
	if err == nil && !skip && p.cfg.encoded != nil {
		p.cfg.encoded(b, start)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range b.In.Recs {
		if r != nil {
			r.Release()
		}
	}
	b.In.Recs = nil
	p.addMem(-b.Bytes)
	if b.Dropped {
		// Dropped while it encoded: its files were never handed to a commit.
		p.signalLocked()
		if paths := b.filePaths(); len(paths) > 0 {
			p.mu.Unlock()
			p.env.removeFiles(p.ctx, paths)
			p.mu.Lock()
		}
		return
	}
	if err != nil {
		if ctx.Err() == nil {
			p.failLocked(fmt.Errorf("iceberg: encode batch %d: %w", b.Seq, err))
		}
		p.signalLocked()
		return
	}
	for _, c := range b.bulk.Closes {
		c.Span.Done, c.Span.Until = true, c.Until
		held := fileMetaBytes(c.Schema)
		c.Holder.enc.files = append(c.Holder.enc.files, c.DF)
		c.Holder.enc.held += held
		c.Holder.enc.runHeld += held
	}
	b.bulk.Closes = nil
	b.Staged = true
	p.signalLocked()
	p.kickLoop()
}

// sealCloserLocked seals a closer batch when a bulk file may hold rows of a batch sealed since the last closer:
// its encoding closes every file of the current generation, so that a flush can commit everything before it.
func (p *pipeline) sealCloserLocked() {
	if !p.bulk.carry {
		return
	}
	open := false
	for _, b := range p.queue {
		if b.Seq > p.bulk.closerSeq && !b.bulk.Closer && (!b.Staged || (b.bulk.Span != nil && !b.bulk.Span.Done)) {
			open = true
			break
		}
	}
	if !open {
		return
	}
	// With WithCheckpoints the flush's seal may have left rows open (and their timer): they stay open.
	keep, timer := p.buf.open, p.buf.timer
	p.buf.open, p.buf.timer = &batch{FirstAt: time.Now(), bulk: encode.Bulk[*batch]{Closer: true}}, nil
	p.sealLocked()
	p.buf.open, p.buf.timer = keep, timer
	p.bulk.closerSeq = p.nextSeq - 1
	p.bulk.fileGen++
}

// waitEarlierStaged waits until every batch before the closer b is staged (their files are then idle) and
// reports false when the pipeline stops or fails first.
func (p *pipeline) waitEarlierStaged(ctx context.Context, b *batch) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		if p.life.failed != nil || p.life.stopping || ctx.Err() != nil {
			return false
		}
		ready := true
		for _, q := range p.queue {
			if q.Seq < b.Seq && !q.Staged {
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

func (p *pipeline) kickLoop() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// fail stops the pipeline from outside it (a writer's own transaction found it fenced, say).
func (p *pipeline) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failLocked(err)
}

// failLocked stops the pipeline: nothing after the failed run is committed.
func (p *pipeline) failLocked(err error) {
	if p.life.failed != nil {
		return
	}
	p.life.failed = p.env.failure(err)
	p.signalLocked()
}

// loop is the one ordered committer of the pipeline: it repeatedly takes the longest run of consecutive staged
// batches from the head of the queue and has the env commit them as one snapshot.
func (p *pipeline) loop() {
	defer close(p.done)
	defer p.env.loopDone()
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
func (p *pipeline) commitNext() bool {
	batches := p.nextRun()
	if batches == nil {
		return false
	}
	defer p.enterQueue()()
	run, res, err := p.env.commit(p.runCtx(), batches)
	p.mu.Lock()
	if err != nil {
		first, last := batches[0].Seq, batches[len(batches)-1].Seq
		p.failLocked(fmt.Errorf("iceberg: commit run %d..%d: %w", first, last, err))
		p.mu.Unlock()
		return false
	}
	p.queue = p.queue[len(batches):]
	p.positionsCommittedLocked(batches)
	p.committed = batches[len(batches)-1].Seq
	p.counts.commits++
	n := p.counts.commits
	p.signalLocked()
	p.mu.Unlock()
	p.env.committed(p.ctx, run, batches, res, n)
	return true
}

// nextRun cuts the batches of the next run from the head of the queue (nil when none is ready): the longest
// staged prefix, with WithCheckpoints cut back to its newest token. They are marked handed: from here on their
// files may be referenced by a commit, so they are never deleted.
func (p *pipeline) nextRun() []*batch {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.life.failed != nil || p.life.stopping {
		return nil
	}
	n := 0
	for n < len(p.queue) && p.queue[n].Staged {
		n++
	}
	if p.gatedLocked() {
		for n > 0 && p.queue[n-1].Seq > p.released {
			n--
		}
	}
	whole := n
	if c := p.cfg.runHeldCap; c > 0 {
		var held int64
		for i, b := range p.queue[:n] {
			if held += b.enc.runHeld; held > c && i > 0 {
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
	batches := append([]*batch(nil), p.queue[:n]...)
	for _, b := range batches {
		b.Handed = true
	}
	return batches
}

// runEndLocked cuts a prefix of n staged batches back to where a run may end: no bulk file split (spanEnd)
// and, with WithCheckpoints, every row covered (coveredEnd). Each cut only shortens it, so the two are applied
// until both hold.
func (p *pipeline) runEndLocked(n int) int {
	for {
		m := spanEnd(p.queue, n)
		if p.cfg.checkpoints {
			m = coveredEnd(p.queue, m)
		}
		if m == n {
			return n
		}
		n = m
	}
}

// flush seals the open buffer and waits until everything accepted before it is committed (with
// WithCheckpoints: up to the last checkpoint).
func (p *pipeline) flush(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.usableLocked(); err != nil {
		return err
	}
	return p.waitCommittedLocked(ctx, p.flushTargetLocked())
}

// flushTargetLocked seals the open buffer and returns the sequence number a flush waits for.
func (p *pipeline) flushTargetLocked() int64 {
	p.sealLocked()
	p.sealCloserLocked()
	return p.sealedTargetLocked()
}

// sealedTargetLocked returns the sequence number a flush of the sealed batches waits for.
func (p *pipeline) sealedTargetLocked() int64 {
	n := len(p.queue)
	if p.cfg.checkpoints {
		n = coveredEnd(p.queue, n)
	}
	if n == 0 {
		return p.committed
	}
	return p.queue[n-1].Seq
}

func (p *pipeline) waitCommittedLocked(ctx context.Context, target int64) error {
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

// shutdown is what Close (flush true) and Abort (flush false) have in common: refuse new calls, flush if
// asked, then stop every goroutine and release what was never committed, all by the time ctx ends.
type shutdown struct {
	FlushErr error       // why the flush did not complete
	Failed   error       // the failure that had stopped the pipeline, if any
	Lost     uncommitted // what was not committed
	StopErr  error       // ctx ended before the goroutines did (they finish in the background)
}

func (p *pipeline) shutdown(ctx context.Context, flush bool) (shutdown, error) {
	var s shutdown
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
	s.Lost, s.StopErr = p.stop(ctx)
	return s, nil
}

// uncommitted describes what a writer that stopped early did not commit.
type uncommitted struct {
	Rows, Batches          int64
	InFlightRows, InFlight int64 // of which in a commit still in flight (outcome unknown until it resolves)
}

func (u uncommitted) String() string {
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
func (p *pipeline) uncommittedLocked() uncommitted {
	var u uncommitted
	if p.buf.open != nil {
		u.Rows += p.buf.open.Rows
		u.Batches++
	}
	for _, b := range p.queue {
		u.Rows += b.Rows
		u.Batches++
		if b.Handed {
			u.InFlightRows += b.Rows
			u.InFlight++
		}
	}
	return u
}

// stop waits for the commit in flight, stops every goroutine and releases what was never committed. It returns
// by the time ctx ends: then encoders are cancelled at once, the commit in flight gets the commit timeout more
// on the writer's context, and the rest of the shutdown happens in the background.
func (p *pipeline) stop(ctx context.Context) (uncommitted, error) {
	// The commit loop sees stopping after its current run and exits; then encoders are cancelled.
	p.kickLoop()
	if !waitOr(ctx, p.done) {
		return p.stopLater(ctx)
	}
	p.cancel()
	encoded := make(chan struct{})
	go func() {
		p.enc.wg.Wait()
		close(encoded)
	}()
	if !waitOr(ctx, encoded) {
		return p.stopLater(ctx)
	}
	p.mu.Lock()
	lost := p.uncommittedLocked()
	p.mu.Unlock()
	p.release(ctx)
	return lost, nil
}

// waitOr waits for ch to close and reports true, or for ctx to end first and reports false (a channel already
// closed wins over a context already done).
func waitOr(ctx context.Context, ch <-chan struct{}) bool {
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

// stopLater gives up waiting: encoders stop now, a commit in flight has the commit timeout to resolve, and the
// goroutines' end and the release of what was never committed happen in the background.
func (p *pipeline) stopLater(ctx context.Context) (uncommitted, error) {
	p.enc.cancel()
	hard := time.AfterFunc(p.cfg.commitTimeout, p.cancel)
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
		p.release(rctx)
	}()
	return lost, ctx.Err()
}

// release frees what was never committed and has the env delete the files of batches never handed to the
// committer (provably not committed), as far as ctx allows.
func (p *pipeline) release(ctx context.Context) {
	p.mu.Lock()
	var dropped int64
	if p.buf.gather != nil {
		p.buf.gather.release()
		p.buf.gather = nil
	}
	if p.buf.open != nil {
		dropped += p.buf.open.Rows
		for _, r := range p.buf.open.In.Recs {
			r.Release()
		}
		p.buf.open = nil
	}
	p.buf.marks = nil
	var orphans []string
	for _, b := range p.queue {
		dropped += b.Rows
		for _, r := range b.In.Recs {
			r.Release()
		}
		b.In.Recs = nil
		if b.Handed {
			continue // a run whose outcome may be unknown: its files are kept
		}
		orphans = append(orphans, b.filePaths()...)
	}
	p.queue = nil
	p.addMem(-p.memUsed)
	p.counts.discarded += dropped
	p.signalLocked()
	p.mu.Unlock()
	if len(orphans) > 0 && ctx.Err() == nil {
		p.env.removeFiles(ctx, orphans)
	}
}

// stopped returns a channel closed once the commit loop and every encoder have returned.
func (p *pipeline) stopped() <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		<-p.done
		p.enc.wg.Wait()
		close(ch)
	}()
	return ch
}

// pipelineState is a consistent reading of the pipeline's counters.
type pipelineState struct {
	BufferedRows, BufferedBytes, UncommittedRows int64
	UncommittedBatches                           int
	Committed                                    int64
	RowsAccepted, BytesAccepted, Batches         int64
	Discarded                                    int64
	Oldest                                       time.Time // the first row of the oldest buffer with rows
}

func (p *pipeline) state() pipelineState {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := pipelineState{BufferedBytes: p.memUsed, UncommittedBatches: len(p.queue), Committed: p.committed,
		RowsAccepted: p.counts.rowsAccepted, BytesAccepted: p.counts.bytesAccepted, Batches: p.counts.batches, Discarded: p.counts.discarded}
	if p.buf.open != nil {
		s.BufferedRows = p.buf.open.Rows
		s.Oldest = older(s.Oldest, p.buf.open)
	}
	for _, b := range p.queue {
		s.UncommittedRows += b.Rows
		if b.Staged {
			s.BufferedBytes += b.enc.held
		}
		s.Oldest = older(s.Oldest, b)
	}
	return s
}

// abortSource drops a partition's rows that no checkpoint covers yet (open, or sealed as solo batches no commit
// took), seals the covered ones still open and waits until every batch holding rows of the partition is
// committed. Uncovered rows sealed in a batch shared with other partitions (changes to a key two partitions
// changed: bySource) are ErrPartitionUncovered. It returns the rows dropped and the versions to restore for them (batchRecord.undo),
// oldest first, which the caller restores even after an error.
func (p *pipeline) abortSource(ctx context.Context, src string) (int64, []*changes.Undo, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.usableLocked(); err != nil {
		return 0, nil, err
	}
	// A checkpoint of the partition still in the open buffer covers the sealed batches before it: the policy
	// may seal a poll's rows before the poll's checkpoint is placed. Sealing the open buffer below takes it along.
	openCovers := slices.ContainsFunc(p.buf.marks, func(m mark) bool { return m.token || m.source == src })
	var drop []*batch // solo batches of the partition that no checkpoint covers: dropped whole
	if p.cfg.checkpoints && !openCovers {
		for i, b := range p.queue {
			if !slices.Contains(b.In.Sources, src) || coversLater(p.queue[i:], src) {
				continue
			}
			if !b.Solo || b.Handed {
				return 0, nil, fmt.Errorf("%w: partition %q, batch %d", ErrPartitionUncovered, src, b.Seq)
			}
			drop = append(drop, b)
		}
	}
	dropped, orphans := p.dropSealedLocked(drop)
	var undos, newest []*changes.Undo
	for _, b := range drop {
		for _, u := range b.In.Undos {
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
	if o := p.buf.open; o != nil {
		covered := 0 // records of src before this index are covered by a mark
		for _, m := range p.buf.marks {
			if m.token || m.source == src {
				covered = max(covered, m.at)
			}
		}
		keep := &batch{FirstAt: o.FirstAt, In: batchRows{Schema: o.In.Schema}, Rows: o.Rows, Bytes: o.Bytes}
		kept := make([]int, len(o.In.Recs)+1) // kept[i]: records kept before record i
		for i := range o.In.Recs {
			kept[i+1] = kept[i]
			r := o.record(i)
			if r.Source == src && i >= covered {
				dropped += r.rows()
				keep.Rows -= r.rows()
				keep.Bytes -= r.Size
				p.dropLocked(r.rows(), r.Size)
				r.Rec.Release()
				undos = append(undos, r.Undo...)
				continue
			}
			kept[i+1]++
			keep.push(r)
			keep.In.Keyed = keep.In.Keyed || r.Kind != opInsert
		}
		for i := range p.buf.marks {
			p.buf.marks[i].at = kept[p.buf.marks[i].at]
		}
		o.In.Recs, o.In.Kinds, o.In.Sources, o.In.Sizes, o.In.Undos, o.In.Hashes, o.In.Sels = keep.In.Recs, keep.In.Kinds, keep.In.Sources, keep.In.Sizes, keep.In.Undos, keep.In.Hashes, keep.In.Sels
		o.Rows, o.Bytes, o.In.Keyed = keep.Rows, keep.Bytes, keep.In.Keyed
		if slices.Contains(o.In.Sources, src) || openCovers {
			p.sealLocked() // the covered rows go now, with the position that covers them
		}
	}
	delete(p.buf.dirtySrc, src)
	p.counts.discarded += dropped
	p.signalLocked()
	target := p.committed
	for _, b := range p.queue {
		if slices.Contains(b.In.Sources, src) {
			target = b.Seq
		}
	}
	if len(orphans) > 0 {
		// Files of staged batches no commit took: deleted as a provably uncommitted run's are, outside mu.
		p.mu.Unlock()
		p.env.removeFiles(ctx, orphans)
		p.mu.Lock()
	}
	return dropped, append(undos, newest...), p.waitCommittedLocked(ctx, target)
}

// dropSealedLocked takes sealed batches out of the queue before any commit took them and returns their rows
// and the files of those already staged, for the caller to delete. An encoder still at work on one sees it
// dropped: it skips the batch or deletes what it wrote (encode). Their memory is freed as always: by the
// encoder for the rows, by leaving the queue for a staged batch's file metadata.
func (p *pipeline) dropSealedLocked(drop []*batch) (rows int64, orphans []string) {
	if len(drop) == 0 {
		return 0, nil
	}
	for _, b := range drop {
		b.Dropped = true
		rows += b.Rows
		if b.Staged {
			orphans = append(orphans, b.filePaths()...)
		}
	}
	p.queue = slices.DeleteFunc(p.queue, func(b *batch) bool { return b.Dropped })
	p.kickLoop() // a batch that held the head of the queue may have gone
	return rows, orphans
}

// dropLocked takes dropped rows out of the open buffer's counters.
func (p *pipeline) dropLocked(rows, bytes int64) {
	p.buf.open.Rows -= rows
	p.buf.open.Bytes -= bytes
	p.addMem(-bytes)
}

// coversLater reports whether src's rows in q[0] are covered: by q[0]'s own checkpoints or a later batch's.
func coversLater(q []*batch, src string) bool {
	if _, open := q[0].Uncovered[src]; !open {
		return true
	}
	for _, b := range q[1:] {
		if _, ok := b.Positions[src]; ok || b.HasToken {
			return true
		}
	}
	return false
}
