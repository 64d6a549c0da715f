package iceberg

import (
	"time"

	ice "github.com/apache/iceberg-go"

	"github.com/icewriter/iceberg/internal/commit"
)

// What the stages report to the writer's hooks and logs. Each report builds its event only when a hook wants
// it (callbacks.wants), so a writer without hooks pays a nil check.

// Attempted implements commit.Reporter: HookAttempt, and HookConflict for a conflict.
func (c *callbacks) Attempted(op *commit.Op, attempt int, start time.Time, sent bool, cause ConflictCause, err error) {
	if c.wants(hookAttempt) {
		c.emit(CommitAttempt{Table: op.Ident, WriterID: c.writerID, Kind: op.Kind, What: op.What,
			Attempt: attempt + 1, Start: start, Duration: time.Since(start), Sent: sent, Err: c.masked(err), Cause: cause})
	}
	if cause != "" && c.wants(hookConflict) {
		c.emit(Conflict{Table: op.Ident, WriterID: c.writerID, Kind: op.Kind, What: op.What, Attempt: attempt + 1,
			Cause: cause, Err: c.masked(err)})
	}
}

// Retrying implements commit.Reporter: HookRetry, with the error masked.
func (c *callbacks) Retrying(op *commit.Op, attempt int, wait time.Duration, cause ConflictCause, err error) {
	if c.wants(hookRetry) {
		c.emit(Retry{Table: op.Ident, WriterID: c.writerID, Kind: op.Kind, What: op.What, Attempt: attempt + 1,
			Wait: wait, Cause: cause, Err: c.masked(err)})
	}
}

// Fenced implements commit.Reporter: HookFenced.
func (c *callbacks) Fenced(op *commit.Op, tableEpoch int64) {
	if c.wants(hookFenced) {
		c.emit(Fenced{Table: op.Ident, WriterID: op.FenceID, Kind: op.Kind, What: op.What, Epoch: op.Epoch,
			TableEpoch: tableEpoch})
	}
}

// sealedHook is the pipeline's report of a sealed batch (nil when no hook wants it).
func (w *Writer) sealedHook() func(b *batch) {
	if !w.cbs.wants(hookSealed) {
		return nil
	}
	return func(b *batch) {
		now := time.Now()
		w.cbs.emit(BatchSealed{Table: w.env.ident, WriterID: w.env.id, Seq: b.Seq, Rows: b.Rows, Bytes: b.Bytes,
			Open: now.Sub(b.FirstAt), At: now})
	}
}

// encodedHook is the pipeline's report of a batch's files written (nil when no hook wants it).
func (w *Writer) encodedHook() func(b *batch, start time.Time) {
	if !w.cbs.wants(hookFileWritten) {
		return nil
	}
	return func(b *batch, start time.Time) {
		now := time.Now()
		files, err := b.dataFiles(nil)
		if err != nil {
			w.env.log.Error("iceberg: no FileWritten events for a batch", "table", w.env.ident, "seq", b.Seq, "err", err)
			return
		}
		for i, f := range append(files, b.enc.deletes...) {
			w.cbs.emit(FileWritten{Table: w.env.ident, WriterID: w.env.id, Seq: b.Seq, Path: f.FilePath(), Index: i,
				Deletes: i >= len(files), Rows: f.Count(), Bytes: f.FileSizeBytes(), Encode: now.Sub(start), At: now})
		}
	}
}

// waitedHook is the pipeline's report of a call that waited for room (nil when no hook wants it).
func (w *Writer) waitedHook() func(d time.Duration, memory bool, rows, size int64) {
	if !w.cbs.wants(hookBackpressure) {
		return nil
	}
	return func(d time.Duration, memory bool, rows, size int64) {
		reason := BackpressureUncommitted
		if memory {
			reason = BackpressureMemory
		}
		w.cbs.emit(BackpressureWait{Table: w.env.ident, WriterID: w.env.id, Reason: reason, Duration: d,
			Rows: rows, Bytes: size})
	}
}

// commitInfo is what WithOnCommit and HookCommitted get about a committed run of n batches.
func (w *Writer) commitInfo(run *Run, n int, res *CommitResult) CommitInfo {
	ci := CommitInfo{SnapshotID: res.SnapshotID, Token: run.Token, Rows: run.Rows, Files: commit.FileCount(run), Bytes: run.Bytes,
		FirstSeq: run.FirstSeq, LastSeq: run.LastSeq, Batches: n, Attempts: res.Attempts, Conflicts: res.Conflicts,
		Duration: commit.CommittedAt(run).Sub(commit.FormedAt(run)), CommitTime: commit.CommittedAt(run), Table: w.env.ident, WriterID: w.env.id}
	for _, s := range run.Segments {
		for _, fs := range [][]ice.DataFile{s.DataFiles, s.DeleteFiles, s.DVFiles} {
			for _, f := range fs {
				ci.FileBytes += f.FileSizeBytes()
			}
		}
	}
	return ci
}

// compacted reports a compaction that started at start: Compact's, or the maintainer's (automatic).
func (w *Writer) compacted(start time.Time, automatic, smallOnly bool, res CompactResult, err error) {
	if w.cbs.wants(hookCompaction) {
		w.cbs.emit(Compaction{Table: w.env.ident, WriterID: w.env.id, Automatic: automatic, SmallOnly: smallOnly,
			Result: res, Duration: time.Since(start), Err: w.cbs.masked(err)})
	}
}

// converted reports a conversion of equality deletes that started at start, when it committed or failed:
// ConvertEqualityDeletes', or the maintainer's (automatic).
func (w *Writer) converted(start time.Time, automatic bool, res ConvertResult, err error) {
	if w.cbs.wants(hookConversion) {
		w.cbs.emit(DeleteConversion{Table: w.env.ident, WriterID: w.env.id, Automatic: automatic, Result: res,
			Duration: time.Since(start), Err: w.cbs.masked(err)})
	}
}

// expired reports an expiry that started at start, when it expired snapshots or failed (n: the snapshots its
// last build would expire).
func (w *Writer) expired(start time.Time, r commit.Result, n int, full bool, err error) {
	c := w.cbs
	if c.wants(hookExpiry) {
		c.emit(Expiry{Table: w.env.ident, WriterID: c.writerID, Expired: n, Full: full, Attempts: r.Attempts,
			Duration: time.Since(start), Err: c.masked(err)})
	}
}
