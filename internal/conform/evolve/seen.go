package evolve

import (
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
)

// MaxSeen bounds each map of a Seen: past it the map starts over.
const MaxSeen = 1024

// Seen caches which input schemas fit a table schema as they are (need no schema change): by the input schema's
// pointer, and by its fingerprint for callers that build a new *arrow.Schema per batch. Each entry holds the
// table's Arrow schema it fits and the caller's C for that schema (its conformer). Safe for concurrent use.
type Seen[C any] struct {
	seen    sync.Map // *arrow.Schema -> *seenEntry[C]
	byPrint sync.Map // fingerprint -> *seenEntry[C]
	nSeen   atomic.Int64
	nPrint  atomic.Int64
}

// seenEntry records that an input schema fits target as it is.
type seenEntry[C any] struct {
	target *arrow.Schema
	c      C
}

// Lookup returns the C remembered for in against target (the table's Arrow schema now): a known pointer costs
// one map lookup, a known fingerprint two. On a miss fp is in's fingerprint, for Remember.
func (s *Seen[C]) Lookup(in, target *arrow.Schema) (c C, fp string, ok bool) {
	if v, ok := s.seen.Load(in); ok {
		if e := v.(*seenEntry[C]); e.target == target {
			return e.c, "", true
		}
	}
	fp = in.Fingerprint()
	if fp != "" {
		if v, ok := s.byPrint.Load(fp); ok {
			if e := v.(*seenEntry[C]); e.target == target {
				s.remember(in, "", e)
				return e.c, "", true
			}
		}
	}
	return c, fp, false
}

// Remember records that in (of fingerprint fp, "" for none) fits target as it is, with c.
func (s *Seen[C]) Remember(in *arrow.Schema, fp string, target *arrow.Schema, c C) {
	s.remember(in, fp, &seenEntry[C]{target: target, c: c})
}

// remember caches e for the schema pointer in and, when fp is set, its fingerprint. Each map starts over when
// full (callers that build a new *arrow.Schema per batch fill the pointer map; the fingerprints stay).
func (s *Seen[C]) remember(in *arrow.Schema, fp string, e *seenEntry[C]) {
	if s.nSeen.Add(1) > MaxSeen {
		s.seen.Clear()
		s.nSeen.Store(1)
	}
	s.seen.Store(in, e)
	if fp == "" {
		return
	}
	if s.nPrint.Add(1) > MaxSeen {
		s.byPrint.Clear()
		s.nPrint.Store(1)
	}
	s.byPrint.Store(fp, e)
}
