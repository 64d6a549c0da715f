package iceberg

import (
	"context"
	"fmt"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/icewriter/iceberg/internal/redact"
)

// commit is the pipeline's commit of one run: the run formed from the batches, placed in the key index,
// committed by the Committer, then the index, the table and the counters brought up to date before the pipeline
// reports the batches committed. It runs inside the commit queue, on the writer's context.
func (w *Writer) commit(ctx context.Context, batches []*batch) (*Run, *CommitResult, error) {
	run := w.formRun(batches)
	tbl := w.view.table()
	dvs, err := w.keys.apply(ctx, tbl, run, batches)
	var res *CommitResult
	if err == nil {
		res, err = w.committer.Commit(ctx, run)
	}
	if err != nil {
		return run, nil, err
	}
	w.keys.committed(run, res, dvs)
	if res.Table != nil {
		_ = w.view.set(res.Table) // picks up schema changes made by others at the next batch
	}
	w.st.commits.Add(1)
	w.st.rowsCommitted.Add(run.Rows)
	if res.Attempts > 1 {
		w.st.retries.Add(int64(res.Attempts - 1))
	}
	w.st.conflicts.Add(int64(res.Conflicts))
	w.st.deleteFiles.Add(int64(run.deleteFiles()))
	w.st.rewritten.Add(int64(res.FilesRewritten))
	return run, res, nil
}

// formRun makes the run of consecutive staged batches the pipeline cut from its queue.
func (w *Writer) formRun(batches []*batch) *Run {
	tbl := w.view.table()
	n := len(batches)
	run := &Run{
		Table: w.ident, Branch: w.opts.branch, WriterID: w.id, StableID: w.opts.stableID, Epoch: w.epoch,
		FirstSeq: batches[0].seq, LastSeq: batches[n-1].seq,
		BaseSnapshotID: headID(tbl.Metadata(), w.opts.branch),
		formatVersion:  tbl.Metadata().Version(), spec: tbl.Spec(), schema: tbl.Schema(),
	}
	// Batches coalesced into one snapshot share its sequence number, and an equality delete does not reach rows
	// of its own sequence number: a batch that upserts or deletes a key written earlier in the run starts a new
	// segment, a snapshot of its own inside the same atomic catalog commit.
	var seg *Segment
	var segWritten map[uint64]struct{}
	for _, b := range batches {
		if seg == nil || (len(b.keyedSet) > 0 && intersects(b.keyedSet, segWritten)) {
			run.Segments = append(run.Segments, Segment{})
			seg = &run.Segments[len(run.Segments)-1]
			segWritten = map[uint64]struct{}{}
		}
		seg.DataFiles = append(seg.DataFiles, b.files...)
		seg.DeleteFiles = append(seg.DeleteFiles, b.deletes...)
		seg.DeleteKeys = append(seg.DeleteKeys, b.cowKeys...)
		b.segIdx = len(run.Segments) - 1
		seg.LastSeq = b.seq
		seg.Rows += b.rows
		for k := range b.written {
			segWritten[k] = struct{}{}
		}
		run.Rows += b.rows
		run.Bytes += b.bytes
		if b.hasToken {
			run.Token, run.HasToken = b.token, true
			seg.Token, seg.HasToken = b.token, true
		}
		// Batches come in sequence order: a later batch's position of a partition replaces an earlier one's.
		for p, v := range b.positions {
			if run.Positions == nil {
				run.Positions = map[string]string{}
			}
			run.Positions[p] = v
		}
	}
	return run
}

// committed follows a run's commit inside the commit queue: its callback is queued (delivered in commit order
// outside every lock), then the maintenance due (the maintainer's schedule).
func (w *Writer) committed(ctx context.Context, run *Run, batches []*batch, res *CommitResult, _ int64) {
	if w.opts.onCommit != nil {
		w.cbs.deliver(CommitInfo{SnapshotID: res.SnapshotID, Token: run.Token, Rows: run.Rows, Files: run.files(),
			Bytes: run.Bytes, FirstSeq: run.FirstSeq, LastSeq: run.LastSeq, Batches: len(batches), Attempts: res.Attempts})
	}
	w.maint.afterCommit(ctx, run.deleteFiles())
}

// loopDone: nothing is delivered after the commit loop; the callback goroutine ends once it is drained.
func (w *Writer) loopDone() { w.cbs.close() }

// CommitInfo describes one successful commit, as WithOnCommit reports it.
type CommitInfo struct {
	SnapshotID int64
	Token      string // newest checkpoint token in the commit, "" if none
	Rows       int64  // rows added by the commit
	Files      int    // data files added
	Bytes      int64  // Arrow bytes of the rows
	FirstSeq   int64  // first batch sequence number in the commit
	LastSeq    int64  // last batch sequence number in the commit
	Batches    int    // batches coalesced into the commit
	Attempts   int    // catalog attempts it took
}

// Checkpoint marks everything accepted so far with an opaque token (source offsets, a log position) and ends the
// current batch there. With WithCheckpoints, a commit never includes rows after its newest token.
func (w *Writer) Checkpoint(ctx context.Context, token string) error {
	if len(token) > defaultMaxTokenBytes {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrTokenTooLarge, len(token), defaultMaxTokenBytes)
	}
	return w.pipe.checkpoint(token)
}

// LastCheckpoint returns the newest token committed by this writer's ID on the table's current branch history.
func (w *Writer) LastCheckpoint(ctx context.Context) (token string, ok bool, err error) {
	tbl, err := w.cat.LoadTable(ctx, w.ident)
	if err != nil {
		return "", false, fmt.Errorf("iceberg: load table %v: %w", w.ident, err)
	}
	token, _, ok = lastCheckpoint(tbl.Metadata(), w.opts.branch, w.id)
	return token, ok, nil
}

// LastCheckpoint returns the newest token that the writer ID committed to the table, without opening a writer
// (and so without fencing a running one). Its errors are masked as NewWriter's are.
func LastCheckpoint(ctx context.Context, cat catalog.Catalog, ident table.Identifier, writerID string) (string, bool, error) {
	tbl, err := redact.WrapCatalog(cat, nil).LoadTable(ctx, ident)
	if err != nil {
		return "", false, fmt.Errorf("iceberg: load table %v: %w", ident, err)
	}
	token, _, ok := lastCheckpoint(tbl.Metadata(), table.MainBranch, writerID)
	return token, ok, nil
}
