package iceberg

import (
	"time"

	"github.com/icewriter/iceberg/internal/pipeline"
)

// PositionLag is how far a source partition's committed position trails the positions the writer accepted for
// it (Source.Checkpoint, CheckpointPositions): Partition, Accepted (the newest position checkpointed),
// Committed (the newest this writer committed, "" for none since NewWriter) and Since, when the oldest
// checkpoint of the partition not committed yet was made (zero when Committed is Accepted).
type PositionLag = pipeline.PositionLag

// PositionLags reports, for each source partition the writer has accepted positions for, how far its committed
// position trails, sorted by partition. A writer without source positions returns none.
func (w *Writer) PositionLags() []PositionLag { return w.pipe.PositionLags() }

// lastCommit is when the latest commit returned (zero: none yet).
func (r *runStage) lastCommit() time.Time {
	if ns := r.lastAt.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}
