package iceberg

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/icewriter/iceberg/internal/keyindex"
	"golang.org/x/sync/semaphore"
)

// sharedBudget is the memory budget and the encode pool that the writers of a Router share, in place of each
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
type sharedBudget struct {
	limit int64               // bytes of rows held by all writers before their calls wait
	sem   *semaphore.Weighted // encodings at once across all writers
	// gated: the router commits in rounds (router_rounds.go): a writer's commit loop commits only what a round
	// released, and its run commits join the round's multi-table commit.
	gated bool
	// wantRound (gated budgets only, capacity 1) brings the router's next timed round forward: a writer
	// whose call waits for a commit (its uncommitted batches or their held file metadata are at their cap)
	// would otherwise wait up to a flush interval for the timed round.
	wantRound chan struct{}

	// index and versions are the memory of the tables' key indexes (WithKeyIndexBytes) and of Apply's versions
	// of keys (ChangeColumns.VersionBytes), one budget each for all tables (nil: no versions budget).
	index, versions *memPool

	mu      sync.Mutex
	used    int64
	changed chan struct{} // closed and replaced whenever memory is freed
	pipes   map[*pipeline]struct{}
}

// newSharedBudget makes the budget of a router's options: the rows get what rowBudget gives a lone writer with
// the same options (the versions budget set aside), the key indexes and the versions a pool each.
func newSharedBudget(o *options) *sharedBudget {
	s := &sharedBudget{
		limit: rowBudget(o), sem: semaphore.NewWeighted(int64(o.flush.maxInFlight)),
		changed: make(chan struct{}), pipes: map[*pipeline]struct{}{},
		index: &memPool{limit: o.keyed.indexBytes},
	}
	if v := o.keyed.changes.versionBudget(); v > 0 {
		s.versions = &memPool{limit: v}
	}
	return s
}

// memPool is a memory budget several tables draw from: a Router's key indexes, or its versions of keys. A
// table counts what it takes and gives back what it frees or drops; one that finds the pool over its limit
// gives up (the key index) or forgets its oldest entries (the versions), as a lone writer does past its own.
type memPool struct {
	limit int64
	used  atomic.Int64
}

// add counts n bytes taken (negative: freed). A nil pool counts nothing.
func (m *memPool) add(n int64) {
	if m != nil {
		m.used.Add(n)
	}
}

// over reports whether the pool holds more than its limit.
func (m *memPool) over() bool { return m.used.Load() > m.limit }

// free returns the bytes left under the limit (at least 0).
func (m *memPool) free() int64 { return max(0, m.limit-m.used.Load()) }

// versionPool is a Router's versions budget as the versions of keys (changes.Pool) draw from it.
type versionPool struct{ *memPool }

func (p versionPool) Add(n int64) { p.add(n) }
func (p versionPool) Over() bool  { return p.over() }
func (p versionPool) Free() int64 { return p.free() }

// join registers a pipeline whose open buffer relieve may seal.
func (s *sharedBudget) join(p *pipeline) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pipes[p] = struct{}{}
}

// leave unregisters a pipeline (its writer closed).
func (s *sharedBudget) leave(p *pipeline) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pipes, p)
}

// addMem counts delta bytes of rows taken (positive) or freed (negative); freeing wakes the waiters.
func (s *sharedBudget) addMem(delta int64) {
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
func (s *sharedBudget) full(size int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used > 0 && s.used+size > s.limit
}

// askRound asks for a round without waiting for it; a request already pending covers this one.
func (s *sharedBudget) askRound() {
	select {
	case s.wantRound <- struct{}{}:
	default:
	}
}

// changedCh returns a channel closed the next time memory is freed.
func (s *sharedBudget) changedCh() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// inUse returns the bytes of rows held by all writers.
func (s *sharedBudget) inUse() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}

// relieve seals the largest open buffer among the pipelines other than self that may be sealed, and reports
// whether it sealed one. The caller holds no pipeline's mu.
func (s *sharedBudget) relieve(self *pipeline) bool {
	s.mu.Lock()
	others := make([]*pipeline, 0, len(s.pipes))
	for p := range s.pipes {
		if p != self {
			others = append(others, p)
		}
	}
	s.mu.Unlock()
	type sized struct {
		p     *pipeline
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
		o.p.mu.Lock()
		sealed := o.p.sealForMemoryLocked()
		o.p.mu.Unlock()
		if sealed {
			return true
		}
	}
	return false
}

// openBytes returns the bytes in the pipeline's open buffer.
func (p *pipeline) openBytes() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.buf.open == nil || p.life.closed {
		return 0
	}
	return p.buf.open.bytes
}

// addMem counts delta bytes of rows held by the pipeline, in its shared budget too when it has one.
func (p *pipeline) addMem(delta int64) {
	p.memUsed += delta
	if s := p.cfg.shared; s != nil && delta != 0 {
		s.addMem(delta)
	}
}

// memFullLocked reports whether size more bytes of rows do not fit the pipeline's budget (its writer's, or
// the router's shared one).
func (p *pipeline) memFullLocked(size int64) bool {
	if s := p.cfg.shared; s != nil {
		return s.full(size)
	}
	return p.memUsed > 0 && p.memUsed+size > p.cfg.rowBudget
}

// relieveLocked asks the shared budget to seal another pipeline's open buffer, releasing mu meanwhile (the
// other pipeline's mu is taken without holding ours). It reports whether a buffer was sealed.
func (p *pipeline) relieveLocked() bool {
	s := p.cfg.shared
	if s == nil {
		return false
	}
	p.mu.Unlock()
	defer p.mu.Lock()
	return s.relieve(p)
}

// sharedChanged returns the shared budget's change channel, nil without one (a nil channel never fires).
func (p *pipeline) sharedChanged() <-chan struct{} {
	if s := p.cfg.shared; s != nil {
		return s.changedCh()
	}
	return nil
}

// routerIndexPool is the key index budget of a Router's writer (nil for a lone writer, or a table whose own
// WithKeyIndexBytes turned the index off).
func routerIndexPool(o *options) keyindex.Pool {
	if o.shared == nil || o.keyed.indexBytes <= 0 {
		return nil
	}
	return indexPool{o.shared.index}
}

// indexPool is a Router's key index budget as its tables' indexes draw from it.
type indexPool struct{ *memPool }

func (p indexPool) Add(n int64)  { p.add(n) }
func (p indexPool) Over() bool   { return p.over() }
func (p indexPool) Limit() int64 { return p.limit }
