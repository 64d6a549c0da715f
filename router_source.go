package iceberg

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go/table"
	"github.com/icewriter/iceberg/internal/commit"
)

// RouterSource is one partition of an ordered source (a Kafka topic-partition, a replication slot) whose rows
// the router spreads over tables: Source for a router. Its positions are committed per table, atomically with
// that table's rows (as Source.Checkpoint does), so a partition that routes to several tables has a position in
// each, and the tables' commits may land at different moments. Exactly-once still holds, this way:
//
//   - Before a partition's first row goes into a table during the router's life, the table must hold a
//     position of the partition at or before that row. If it holds none, the router commits one first (the
//     partition's last position checkpointed or resumed from through the router, else the empty position, the
//     partition's start): one small commit per table and partition. So a table without a position of the
//     partition holds none of its rows.
//   - Checkpoint records the position in every table the partition wrote into.
//   - Resume reads the partition's position in every open table: reading resumes after the lowest of them,
//     and ResumePoint.Covered tells, per table, which replayed rows that table already holds (at or before its
//     own position), so the connector skips exactly those.
//
// Positions must name the last row they cover (a Kafka record's offset, not the next offset to read), and be
// ordered by WithPositionOrder (a writer option: WithWriterOptions).
type RouterSource struct {
	r    *Router
	name string
}

// routedSource is the router's state of one partition: the tables it wrote into during the router's life and
// its newest position. mu orders the partition's first routes and checkpoints.
type routedSource struct {
	mu      sync.Mutex
	routed  map[string]*Writer // by identKey
	last    string
	hasLast bool
}

// Source returns the handle of a source partition. Handles are cheap: two with one name are the same partition.
func (r *Router) Source(partition string) *RouterSource { return &RouterSource{r: r, name: partition} }

// source returns the router's state of a partition.
func (r *Router) source(partition string) *routedSource {
	r.srcMu.Lock()
	defer r.srcMu.Unlock()
	s, ok := r.sources[partition]
	if !ok {
		s = &routedSource{routed: map[string]*Writer{}}
		r.sources[partition] = s
	}
	return s
}

// Partition returns the partition's name.
func (s *RouterSource) Partition() string { return s.name }

// Write is Router.Write for rows of the partition.
func (s *RouterSource) Write(ctx context.Context, ident table.Identifier, rec arrow.RecordBatch) error {
	return s.r.call(ctx, s.name, ident, rec, opInsert)
}

// Upsert is Router.Upsert for rows of the partition.
func (s *RouterSource) Upsert(ctx context.Context, ident table.Identifier, rec arrow.RecordBatch) error {
	return s.r.call(ctx, s.name, ident, rec, opUpsert)
}

// Delete is Router.Delete for keys of the partition.
func (s *RouterSource) Delete(ctx context.Context, ident table.Identifier, keys arrow.RecordBatch) error {
	return s.r.call(ctx, s.name, ident, keys, opDelete)
}

// Apply is Router.Apply for changes of the partition.
func (s *RouterSource) Apply(ctx context.Context, ident table.Identifier, rec arrow.RecordBatch) error {
	return s.r.call(ctx, s.name, ident, rec, opApply)
}

// route makes sure the table holds a position of the partition before the partition's first row goes into it
// during the router's life (see RouterSource).
func (rs *routedSource) route(ctx context.Context, r *Router, ident table.Identifier, w *Writer, name string) error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	key := commit.IdentKey(ident)
	if rs.routed[key] == w {
		return nil
	}
	all, err := w.Positions(ctx)
	if err != nil {
		return err
	}
	if _, ok := all[name]; !ok {
		start := ""
		if rs.hasLast {
			start = rs.last
		}
		if err := w.CheckpointPositions(ctx, map[string]string{name: start}); err != nil {
			return err
		}
		if err := r.flushWriter(ctx, w); err != nil {
			return fmt.Errorf("iceberg: router: first position of partition %q in table %v: %w", name, ident, err)
		}
	}
	rs.routed[key] = w
	return nil
}

// Checkpoint records the partition's position in every table the partition wrote into during the router's
// life, as Source.Checkpoint does in one: it covers the partition's rows accepted so far, and is committed with
// them, table by table. A position that goes backwards (Source.Checkpoint) in any of the tables is refused in
// all of them with ErrPositionBackwards.
func (s *RouterSource) Checkpoint(ctx context.Context, position string) error {
	if err := commit.CheckPosition(s.name, position); err != nil {
		return err
	}
	rs := s.r.source(s.name)
	rs.mu.Lock() // before the cut lock: route holds it while it waits for a round, which takes the cut lock
	defer rs.mu.Unlock()
	s.r.cutMu.Lock()
	defer s.r.cutMu.Unlock()
	pos := map[string]string{s.name: position}
	// A position that goes backwards in any table is refused in all of them before any records it.
	for _, w := range rs.routed {
		if err := w.pipe.CheckOrder(pos); errors.Is(err, ErrPositionBackwards) {
			return fmt.Errorf("table %v: %w", w.env.ident, err)
		}
	}
	var errs []error
	for _, w := range rs.routed {
		if err := w.CheckpointPositions(ctx, pos); err != nil {
			errs = append(errs, fmt.Errorf("table %v: %w", w.env.ident, err))
		}
	}
	rs.last, rs.hasLast = position, true
	return errors.Join(errs...)
}

// CheckpointPositions records several partitions' positions at once, as RouterSource.Checkpoint does for one.
func (r *Router) CheckpointPositions(ctx context.Context, positions map[string]string) error {
	var errs []error
	for p, pos := range positions {
		if err := r.Source(p).Checkpoint(ctx, pos); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Abort ends the router's share of the partition, as Source.Abort does, in every table it wrote into: their
// rows after the partition's newest position are dropped, the ones before it committed, and Abort returns once
// they are. The partition may be written again afterwards.
func (s *RouterSource) Abort(ctx context.Context) error {
	rs := s.r.source(s.name)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var errs []error
	for key, w := range rs.routed {
		if err := w.Source(s.name).Abort(ctx); err != nil {
			errs = append(errs, fmt.Errorf("table %v: %w", w.env.ident, err))
			continue
		}
		delete(rs.routed, key)
	}
	return errors.Join(errs...)
}

// ResumePoint is where a partition resumes after a restart, from the positions of every table the router has
// open (Router.Open the tables the partition may route to first).
type ResumePoint struct {
	// Position is the lowest of the tables' positions of the partition: read the partition after it. Empty
	// with FromStart.
	Position string
	// FromStart is true when no open table holds a position of the partition, or one holds the partition's
	// start (the empty position): read the partition from its beginning.
	FromStart bool
	// Tables holds each open table's position of the partition, by identifier joined with dots.
	Tables map[string]string

	idents map[string]string // identKey -> position
	order  func(a, b string) int
}

// Covered reports whether the table already holds the partition's row at position (a row at or before the
// table's own position): a replay skips it for that table.
func (p ResumePoint) Covered(ident table.Identifier, position string) bool {
	pos, ok := p.idents[commit.IdentKey(ident)]
	return ok && pos != "" && p.order(position, pos) <= 0
}

// Resume reads the partition's position in every table the router has open and returns where to resume. It
// also makes that the partition's position for the tables it first routes to afterwards.
func (s *RouterSource) Resume(ctx context.Context) (ResumePoint, error) {
	order := func(a, b string) int { return s.r.opts.order(s.name, a, b) }
	p := ResumePoint{Tables: map[string]string{}, idents: map[string]string{}, order: order, FromStart: true}
	first := true
	for _, t := range s.r.opened() {
		all, err := t.w.ResumePositions(ctx, s.name)
		if err != nil {
			return ResumePoint{}, fmt.Errorf("table %v: %w", t.ident, err)
		}
		pos, ok := all[s.name]
		if !ok {
			continue
		}
		p.Tables[strings.Join(t.ident, ".")] = pos
		p.idents[commit.IdentKey(t.ident)] = pos
		if first || p.order(pos, p.Position) < 0 {
			p.Position = pos
		}
		first = false
	}
	p.FromStart = first || p.Position == ""
	rs := s.r.source(s.name)
	rs.mu.Lock()
	if !p.FromStart {
		rs.last, rs.hasLast = p.Position, true
	}
	rs.mu.Unlock()
	return p, nil
}
