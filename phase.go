package iceberg

import (
	"context"
	"errors"
	"math"

	"github.com/icewriter/iceberg/internal/pipeline"
)

// Phase is how a Router writes a table: a bulk phase for an initial load (a database snapshot), then a live
// phase for the changes that follow, switched per table at runtime (Router.SetPhase).
type Phase int

const (
	// PhaseLive is the Writer's way: the flush policy of the writer options (an interval seal, 1 s by default),
	// every operation, the key index and the key columns' bloom filters.
	PhaseLive Phase = iota
	// PhaseBulk is for an initial load: append only (Upsert, Delete and Apply return ErrBulkPhase), no interval
	// seal (batches as large as half the router's row budget, sealed by size or memory), files rolled at the bulk
	// target file size (DefaultBulkTargetFileSize), no key index and no key bloom filters (the live phase reads the
	// bulk rows' keys back when it starts). On an unpartitioned table the batches the memory limit seals go into
	// Parquet files kept open across batches (each record a row group, written to the object store as it comes),
	// so files reach the target size whatever the limit; a file is committed once it reaches it, or when Flush,
	// Close or SetPhase close it (then up to one file per encoder at once, WithMaxInFlight, is smaller). Rows in
	// a file still open are not committed and their source positions not recorded; a process that dies leaves
	// such files unreferenced, and the next writer with its ID removes them (WithOrphanOlderThan). With
	// WithCheckpoints, a batch no checkpoint covers is written to files of its own. A partitioned table, and one
	// that shreds its variant columns (table property write.parquet.shred-variants), writes a batch's files per
	// batch.
	PhaseBulk
)

// String returns the phase's name.
func (p Phase) String() string {
	switch p {
	case PhaseLive:
		return "live"
	case PhaseBulk:
		return "bulk"
	}
	return "unknown"
}

// DefaultBulkTargetFileSize is the size at which the bulk phase rolls files (Supermetal's snapshot file size).
const DefaultBulkTargetFileSize = 512 << 20

// ErrBulkPhase is returned by Upsert, Delete and Apply on a table in its bulk phase (append only).
var ErrBulkPhase = errors.New("iceberg: table in its bulk phase (append only): switch it to PhaseLive first")

// enterBulk puts the writer in the bulk phase and returns its live seal policy, for leaveBulk. batchBytes is the
// bulk phase's batch size. The key index goes off (no rows of the load are indexed); the commit in flight, if
// any, ends first.
func (w *Writer) enterBulk(fileSize, batchBytes int64) pipeline.SealPolicy {
	w.files.SetBulk(fileSize)
	w.pipe.SetCarry(true)
	live := w.pipe.SetPolicy(pipeline.SealPolicy{Rows: math.MaxInt64, Bytes: batchBytes})
	defer w.pipe.EnterQueue()()
	w.keys.drop("", nil) // a batch encoded for the index gets its equality deletes from apply
	return live
}

// leaveBulk ends the bulk phase: the key index is loaded from the table's files, the bulk ones included, then
// the live seal policy comes back. The caller holds every call to the table off and has committed what the
// bulk phase sealed (no seal can happen meanwhile: the bulk policy has no timer). A batch still queued (with
// WithCheckpoints, rows no checkpoint covers) was encoded without the index: the index then stays off, and
// upserts and deletes use equality deletes.
func (w *Writer) leaveBulk(ctx context.Context, live pipeline.SealPolicy) error {
	w.files.SetBulk(0)
	w.pipe.SetCarry(false)
	defer w.pipe.SetPolicy(live)
	defer w.pipe.EnterQueue()()
	if w.pipe.Queued() {
		w.env.log.Info("iceberg: key index stays off after the bulk phase: batches encoded without it are not committed yet",
			"table", w.env.ident)
		return nil
	}
	return w.keys.load(ctx, w.view.table())
}
