package iceberg

import (
	"context"

	"github.com/icewriter/iceberg/internal/pipeline"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/icewriter/iceberg/internal/commit"
)

// ErrPartitionUncovered is returned by Source.Abort when rows of the partition were sealed before any checkpoint
// covered them, no later one does, and they share a batch with another partition's rows: the memory limit (or a
// change of the table's schema) reached between checkpoints seals such rows in a batch per partition, except
// when two partitions upserted, deleted or applied changes to one key in that stretch, whose order must stay the
// order accepted. Those cannot be dropped alone: abort the writer instead.
var ErrPartitionUncovered = pipeline.ErrPartitionUncovered

// Source is one partition of an ordered source: a Kafka topic-partition, a Postgres replication slot, a Kinesis
// shard. Rows written through it are its rows; Checkpoint records the partition's position with them, and
// Abort drops the rows the writer has not committed yet, as when a rebalance revokes the partition. The rows of
// all partitions share batches and files: a checkpoint never ends a file.
//
// Operations on one key keep their order within a partition. Across partitions, rows are ordered by the moment
// each call is accepted, except that with WithCheckpoints the rows a seal leaves open (no checkpoint of their
// partition covers them yet) are committed after the covered rows of other partitions sealed with them.
type Source struct {
	w    *Writer
	name string
}

// Source returns the handle of a source partition (any string: "orders/3", a slot name). Handles are cheap and
// hold no state of their own: two handles with one name are the same partition.
func (w *Writer) Source(partition string) *Source { return &Source{w: w, name: partition} }

// Partition returns the partition's name.
func (s *Source) Partition() string { return s.name }

// Write is Writer.Write for rows of the partition.
func (s *Source) Write(ctx context.Context, rec arrow.RecordBatch) error {
	return s.w.write(ctx, s.name, rec)
}

// Upsert is Writer.Upsert for rows of the partition.
func (s *Source) Upsert(ctx context.Context, rec arrow.RecordBatch) error {
	return s.w.upsert(ctx, s.name, rec)
}

// Delete is Writer.Delete for keys of the partition.
func (s *Source) Delete(ctx context.Context, keys arrow.RecordBatch) error {
	return s.w.delete(ctx, s.name, keys)
}

// Apply is Writer.Apply for changes of the partition.
func (s *Source) Apply(ctx context.Context, rec arrow.RecordBatch) error {
	return s.w.apply(ctx, s.name, rec)
}

// Checkpoint records the partition's position (an offset, an LSN, a sequence number: any string) as covering
// every row of the partition accepted so far. It marks a row boundary and seals nothing: the position is
// committed with the commit that holds those rows, atomically. With WithCheckpoints, rows of the partition
// after its newest position are never committed, and a position with no new rows is not committed again.
// A position before the partition's last one known to the writer (the newest checkpointed, or the one Resume
// read, whichever came last), by WithPositionOrder, is refused with ErrPositionBackwards; an equal one is fine.
func (s *Source) Checkpoint(ctx context.Context, position string) error {
	return s.w.CheckpointPositions(ctx, map[string]string{s.name: position})
}

// Abort ends the writer's share of the partition, as when a rebalance revokes it: the partition's rows after
// its newest position (or the newest token, whichever covers more) are dropped, the ones before it are
// committed with that position (sealed now if they were still open, along with whatever other partitions'
// rows their checkpoints cover), and Abort returns once they are; the rest of the writer goes on. After it
// returns nothing of the partition is pending in this writer, so a new owner that resumes from the partition's
// committed position neither loses nor duplicates rows. ctx bounds the wait; the partition may be written
// again afterwards. Without WithCheckpoints, rows of the partition already sealed are committed whatever their
// position. With WithCheckpoints, the flush policy (rows, bytes, interval) never seals rows no checkpoint
// covers, so they stay abortable. The memory limit reached first (or a change of the table's schema) seals them
// in batches of one partition each, which Abort drops from the queue while no commit has taken them (deleting
// their files if written; another partition's rows are never touched). Only changes to a key that two
// partitions changed in that stretch are sealed with the other partition's, in the order accepted: for those
// Abort returns ErrPartitionUncovered and changes nothing.
// With a version column (ChangeColumns.Version), the versions of the dropped changes are forgotten: each key
// they changed goes back to the version it had before them, unless a change that stays has changed it since.
func (s *Source) Abort(ctx context.Context) error {
	dropped, undos, err := s.w.pipe.AbortSource(ctx, s.name)
	s.w.changes.Restore(ctx, undos)
	if dropped > 0 {
		s.w.env.log.Info("iceberg: partition aborted", "table", s.w.env.ident, "writer", s.w.env.id, "partition", s.name,
			"dropped_rows", dropped)
	}
	if err == nil {
		s.w.runs.forget(s.name)
	}
	return err
}

// CheckpointPositions records several partitions' positions at once, as Source.Checkpoint does for one (a Kafka
// poll returns records of many partitions). Positions are committed atomically with the rows they cover,
// merged with those already on the table (the newest per partition), and readable by any process. A position
// that goes backwards (see Source.Checkpoint) refuses the whole call: none of its positions is recorded.
func (w *Writer) CheckpointPositions(ctx context.Context, positions map[string]string) error {
	for p, v := range positions {
		if err := commit.CheckPosition(p, v); err != nil {
			return err
		}
	}
	return w.pipe.CheckpointPositions(positions)
}

// Resume returns the partition's committed position on the table, as Position does, and makes it the position
// the writer's next commit of the partition must find there: if another writer commits the partition first
// (this writer was paused while a consumer group moved the partition), that commit fails with
// ErrPositionMoved instead of committing rows the other writer already committed. Each commit of the
// partition then moves the expectation to the position it committed, and Abort drops it. Call it when the
// partition is assigned, before reading the source from the position returned.
func (s *Source) Resume(ctx context.Context) (string, bool, error) {
	all, err := s.w.ResumePositions(ctx, s.name)
	if err != nil {
		return "", false, err
	}
	pos, ok := all[s.name]
	return pos, ok, nil
}

// ResumePositions is Source.Resume for several partitions with one read of the table: it returns the
// positions the table holds of them (a partition without one is absent) and makes each the position the
// writer's next commit of the partition must find (none, for an absent one).
func (w *Writer) ResumePositions(ctx context.Context, partitions ...string) (map[string]string, error) {
	all, err := w.Positions(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(partitions))
	bases := make(map[string]string, len(partitions))
	for _, p := range partitions {
		bases[p] = all[p]
		if v, ok := all[p]; ok {
			out[p] = v
		}
	}
	w.runs.rebase(bases)
	w.pipe.Resumed(bases)
	return out, nil
}

// Position returns the partition's committed position on the table, whichever writer committed it, and whether
// it has one. It only reads: a new owner of the partition resumes with Resume, which also fences the old one.
func (s *Source) Position(ctx context.Context) (string, bool, error) {
	all, err := s.w.Positions(ctx)
	if err != nil {
		return "", false, err
	}
	pos, ok := all[s.name]
	return pos, ok, nil
}
