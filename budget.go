package iceberg

import (
	"sync/atomic"

	"github.com/icewriter/iceberg/internal/keyindex"
	"github.com/icewriter/iceberg/internal/pipeline"
)

// sharedBudget is what a Router's writers share in place of each writer's own: the rows' memory and the encode
// pool (the pipeline's Budget), and a pool each for the tables' key indexes (WithKeyIndexBytes) and Apply's
// versions of keys (ChangeColumns.VersionBytes; nil: no versions budget).
type sharedBudget struct {
	rows            *pipeline.Budget
	index, versions *memPool
}

// sharedRows is the rows' budget of s, nil for a lone writer.
func sharedRows(s *sharedBudget) *pipeline.Budget {
	if s == nil {
		return nil
	}
	return s.rows
}

// newSharedBudget makes the budget of a router's options: the rows get what rowBudget gives a lone writer with
// the same options (the versions budget set aside), the key indexes and the versions a pool each.
func newSharedBudget(o *options) *sharedBudget {
	s := &sharedBudget{
		rows:  pipeline.NewBudget(rowBudget(o), o.flush.maxInFlight),
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

func (p versionPool) Over() bool { return p.over() }

func (p versionPool) Free() int64 { return p.free() }

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
