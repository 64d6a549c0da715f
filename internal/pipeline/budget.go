package pipeline

import (
	"cmp"
	"slices"
	"sync"

	"golang.org/x/sync/semaphore"
)

// Budget is the memory budget and the encode pool that the writers of a Router share, in place of each
// writer's own: the rows every writer holds (open buffers and batches waiting for or in encoding) count against
// one limit, and at most maxInFlight batches encode at once across all of them.
//
// A writer whose call finds the budget full seals its own open buffer first, as a lone writer does; when that
// is not enough, it seals the largest open buffer of another writer (relieve), since an idle table's buffer would
// otherwise hold the budget until its interval timer fires, or forever without one. Encoding is what frees
// memory, and every writer waiting for room wakes when any writer's encoding ends.
//
// Locks: mu is a leaf taken under a pipeline's mu (addMem, full, changedCh); relieve takes other pipelines' mu
// with neither its caller's pipeline mu nor mu held.
type Budget struct {
	limit int64               // bytes of rows held by all writers before their calls wait
	sem   *semaphore.Weighted // encodings at once across all writers
	// gated: the router commits in rounds (rounds.go): a writer's commit loop commits only what a round
	// released, and its run commits join the round's multi-table commit.
	gated bool
	// wantRound (gated budgets only, capacity 1) brings the router's next timed round forward: a writer
	// whose call waits for a commit (its uncommitted batches or their held file metadata are at their cap)
	// would otherwise wait up to a flush interval for the timed round.
	wantRound chan struct{}

	mu      sync.Mutex
	used    int64
	changed chan struct{} // closed and replaced whenever memory is freed
	pipes   map[member]struct{}
}

// member is a pipeline of the budget, as relieve sees it.
type member interface {
	openBytes() int64
	sealForMemory() bool
}

// NewBudget makes a Router's budget: limit bytes of rows held by all its writers, maxInFlight encodings at once
// across them.
func NewBudget(limit int64, maxInFlight int) *Budget {
	return &Budget{limit: limit, sem: semaphore.NewWeighted(int64(maxInFlight)), changed: make(chan struct{}),
		pipes: map[member]struct{}{}}
}

// Gate makes the budget's writers commit in the router's rounds (CutForRound and the methods beside it) and
// returns the channel on which their calls ask for the next round. Called before any writer joins.
func (s *Budget) Gate() <-chan struct{} {
	s.gated, s.wantRound = true, make(chan struct{}, 1)
	return s.wantRound
}

// Limit returns the bytes of rows all the budget's writers may hold.
func (s *Budget) Limit() int64 { return s.limit }

// join registers a pipeline whose open buffer relieve may seal.
func (s *Budget) join(p member) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pipes[p] = struct{}{}
}

// Leave unregisters a pipeline (its writer closed).
func (s *Budget) Leave(p member) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pipes, p)
}

// addMem counts delta bytes of rows taken (positive) or freed (negative); freeing wakes the waiters.
func (s *Budget) addMem(delta int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.used += delta
	if delta < 0 {
		close(s.changed)
		s.changed = make(chan struct{})
	}
}

// full reports whether size more bytes do not fit (a call into an empty budget always fits, as for a lone
// writer: one record larger than the budget must still get through).
func (s *Budget) full(size int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used > 0 && s.used+size > s.limit
}

// AskRound asks for a round without waiting for it; a request already pending covers this one.
func (s *Budget) AskRound() {
	select {
	case s.wantRound <- struct{}{}:
	default:
	}
}

// changedCh returns a channel closed the next time memory is freed.
func (s *Budget) changedCh() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// InUse returns the bytes of rows held by all writers.
func (s *Budget) InUse() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}

// relieve seals the largest open buffer among the pipelines other than self that may be sealed, and reports
// whether it sealed one. The caller holds no pipeline's mu.
func (s *Budget) relieve(self member) bool {
	s.mu.Lock()
	others := make([]member, 0, len(s.pipes))
	for p := range s.pipes {
		if p != self {
			others = append(others, p)
		}
	}
	s.mu.Unlock()
	type sized struct {
		p     member
		bytes int64
	}
	var open []sized
	for _, p := range others {
		if b := p.openBytes(); b > 0 {
			open = append(open, sized{p, b})
		}
	}
	slices.SortFunc(open, func(a, b sized) int { return cmp.Compare(b.bytes, a.bytes) })
	for _, o := range open {
		if o.p.sealForMemory() {
			return true
		}
	}
	return false
}

// sealForMemory seals the open buffer for the budget's sake (sealForMemoryLocked) and reports whether it did.
func (p *Pipeline[B]) sealForMemory() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sealForMemoryLocked()
}

// openBytes returns the bytes in the pipeline's open buffer.
func (p *Pipeline[B]) openBytes() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if none(p.buf.open) || p.life.closed {
		return 0
	}
	return p.buf.open.Head().Bytes
}

// addMem counts delta bytes of rows held by the pipeline, in its shared budget too when it has one.
func (p *Pipeline[B]) addMem(delta int64) {
	p.memUsed += delta
	if s := p.cfg.Shared; s != nil && delta != 0 {
		s.addMem(delta)
	}
}

// memFullLocked reports whether size more bytes of rows do not fit the pipeline's budget (its writer's, or
// the router's shared one).
func (p *Pipeline[B]) memFullLocked(size int64) bool {
	if s := p.cfg.Shared; s != nil {
		return s.full(size)
	}
	return p.memUsed > 0 && p.memUsed+size > p.cfg.RowBudget
}

// relieveLocked asks the shared budget to seal another pipeline's open buffer, releasing mu meanwhile (the
// other pipeline's mu is taken without holding ours). It reports whether a buffer was sealed.
func (p *Pipeline[B]) relieveLocked() bool {
	s := p.cfg.Shared
	if s == nil {
		return false
	}
	p.mu.Unlock()
	defer p.mu.Lock()
	return s.relieve(p)
}

// sharedChanged returns the shared budget's change channel, nil without one (a nil channel never fires).
func (p *Pipeline[B]) sharedChanged() <-chan struct{} {
	if s := p.cfg.Shared; s != nil {
		return s.changedCh()
	}
	return nil
}
