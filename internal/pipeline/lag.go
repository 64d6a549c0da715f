package pipeline

import (
	"slices"
	"strings"
	"time"
)

// PositionLag is how far a source partition's committed position trails the positions the writer accepted for
// it (Source.Checkpoint, CheckpointPositions).
type PositionLag struct {
	Partition string
	Accepted  string // the newest position checkpointed
	Committed string // the newest position this writer committed ("": none since NewWriter)
	// Since is when the oldest checkpoint of the partition not committed yet was made, zero when every one is
	// (Committed is Accepted): time.Since(Since) is how long the table's position has trailed the source's.
	Since time.Time
}

// PositionLags reports how far each source partition's committed position trails, sorted by partition.
func (p *Pipeline[B]) PositionLags() []PositionLag {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.buf.lastPos) == 0 {
		return nil
	}
	byPart := make(map[string]*PositionLag, len(p.buf.lastPos))
	out := make([]PositionLag, 0, len(p.buf.lastPos))
	for part, pos := range p.buf.lastPos {
		out = append(out, PositionLag{Partition: part, Accepted: pos, Committed: p.pos.committed[part]})
	}
	for i := range out {
		byPart[out[i].Partition] = &out[i]
	}
	pending := func(part string, when time.Time) {
		if l := byPart[part]; l != nil && (l.Since.IsZero() || when.Before(l.Since)) {
			l.Since = when
		}
	}
	for _, b := range p.queue {
		for part, when := range b.Head().PosSince {
			pending(part, when)
		}
	}
	for _, m := range p.buf.marks {
		if !m.token {
			pending(m.source, m.when)
		}
	}
	slices.SortFunc(out, func(a, b PositionLag) int { return strings.Compare(a.Partition, b.Partition) })
	return out
}

// positionsCommittedLocked records the positions of the batches just committed, in sequence order.
func (p *Pipeline[B]) positionsCommittedLocked(batches []B) {
	for _, b := range batches {
		for part, pos := range b.Head().Positions {
			if p.pos.committed == nil {
				p.pos.committed = map[string]string{}
			}
			p.pos.committed[part] = pos
		}
	}
}

// older returns the earlier of t and the first row of b, a batch or buffer, when b holds rows.
func older[B Batch[B]](t time.Time, b B) time.Time {
	if b.Head().Rows > 0 && (t.IsZero() || b.Head().FirstAt.Before(t)) {
		return b.Head().FirstAt
	}
	return t
}
