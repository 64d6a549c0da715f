package iceberg

import (
	"time"

	"github.com/icewriter/iceberg/internal/encode"
)

// Names the external tests need that users do not get.

// WithRowGroupRowsForTest sets the Parquet row-group limit of the files the writer encodes (not an option
// users get): small values make files of many row groups, which the key index must read in row order.
func WithRowGroupRowsForTest(n int) Option { return func(o *options) { o.files.rowGroupRows = n } }

// WithQuickRetriesForTest bounds the waits between commit retries at 1 to 20 ms instead of 50 ms to 5 s (20 ms
// to 2 s for the writer's own transactions): tests that make commits conflict or lose their replies on purpose
// retry without spending wall time, while the jitter still spreads writers that collide.
func WithQuickRetriesForTest() Option {
	return func(o *options) { o.commit.retryWaits = &[2]time.Duration{time.Millisecond, 20 * time.Millisecond} }
}

// DeadLetterWired reports whether the writer's base conformer routes bad Arrow rows to WithDeadLetter without
// schema evolution (the view must build its conformers with the writer's hooks).
func DeadLetterWired(w *Writer) bool {
	h := w.view.conformer().Hooks()
	return h != nil && h.DeadLetter != nil
}

// OrphanSweepDone returns a channel closed once the removal of the writer ID's orphans that NewWriter started
// has returned (closed at once when it started none).
func OrphanSweepDone(w *Writer) <-chan struct{} {
	if w.own.sweep == nil {
		done := make(chan struct{})
		close(done)
		return done
	}
	return w.own.sweep.done
}

// WithFanoutForTest lowers the partitions of a fan-out chunk and the fan-out warning's threshold (fanout.go), so
// that a small test batch takes several chunks and is reported.
func WithFanoutForTest(chunkPartitions, warnPartitions int) Option {
	return func(o *options) {
		o.files.fanout = encode.FanoutLimits{ChunkPartitions: chunkPartitions, WarnPartitions: warnPartitions}
	}
}

// WithHoldRewritesForTest makes every background pass of the writer's maintenance (compaction or conversion
// of equality deletes) call hold once it has written its files and before it takes the commit queue.
func WithHoldRewritesForTest(hold func()) Option {
	return func(o *options) { o.maint.rewriteWritten = hold }
}

// WithCommitterWrapForTest wraps the committer the writer hands its runs to (the default one, unless
// WithCommitter replaced it) in wrap: a test observes the runs the writer commits.
func WithCommitterWrapForTest(wrap func(Committer) Committer) Option {
	return func(o *options) { o.commit.wrapCommitter = wrap }
}

// BackgroundPassDoneForTest returns a channel closed when the writer's running background maintenance pass
// (compaction or conversion of equality deletes) ends, or already closed when none runs. It first waits for the
// commit queue: the maintenance after a commit (which starts a pass) runs in it, and may still run when the
// commit's Flush has returned.
func BackgroundPassDoneForTest(w *Writer) <-chan struct{} {
	defer w.pipe.EnterQueue()()
	return w.maint.PassDone()
}

// SupersededBatch is how many superseded position delete files a v2 writer lets accumulate before removing them.
const SupersededBatch = supersededBatch

// WithSupersededBatchForTest sets how many superseded position delete files a v2 writer lets accumulate before
// a run removes them, so that a short test reaches the removal.
func WithSupersededBatchForTest(n int) Option { return func(o *options) { o.keyed.supersedeBatch = n } }

// WithRowIDsAtCommitForTest makes a v3 merge-on-read writer carry the replaced rows' _row_id only by the
// commit-time rewrite (read the uploaded file, write it again with the ids, delete the first), as before the
// encoder wrote them: BenchmarkUpsertV3RowIDs's baseline.
func WithRowIDsAtCommitForTest() Option { return func(o *options) { o.keyed.rowIDsAtCommit = true } }

// SelectedRowsForTest counts the rows the writer's open buffer holds by selection: rows of Apply calls' records
// kept uncopied (batchRecord.sel).
func SelectedRowsForTest(w *Writer) int {
	n := 0
	w.pipe.InspectOpen(func(o *batch) {
		if o != nil {
			for _, sel := range o.In.Sels {
				n += len(sel)
			}
		}
	})
	return n
}
