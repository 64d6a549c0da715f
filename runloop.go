package iceberg

import (
	"context"
	"fmt"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/icewriter/iceberg/internal/redact"
)

// commitLoop is the one ordered committer of this writer: it repeatedly takes the longest run of consecutive
// staged batches from the head of the queue and commits them as one snapshot.
func (w *Writer) commitLoop() {
	defer close(w.done)
	defer w.cbs.close() // nothing is delivered after the loop: the callback goroutine ends once it is drained
	for {
		select {
		case <-w.kick:
		case <-w.ctx.Done():
			return
		}
		for {
			run, batches := w.nextRun()
			if run == nil {
				break
			}
			w.commitMu.Lock()
			w.mu.Lock()
			tbl := w.tbl
			w.mu.Unlock()
			var res *CommitResult
			err := w.indexRun(w.ctx, tbl, run, batches)
			if err == nil {
				res, err = w.committer.Commit(w.ctx, run)
			}
			if err == nil {
				w.commitIndex(run, res)
			}
			w.finishRun(run, batches, res, err)
			w.commitMu.Unlock()
			if err != nil {
				break
			}
		}
		w.mu.Lock()
		stop := w.stopping
		w.mu.Unlock()
		if stop {
			return
		}
	}
}

// nextRun cuts the next run from the head of the queue (nil when none is ready).
func (w *Writer) nextRun() (*Run, []*batch) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed != nil || w.stopping {
		return nil, nil
	}
	n := 0
	for n < len(w.queue) && w.queue[n].staged {
		n++
	}
	if w.opts.checkpoints {
		for n > 0 && !w.queue[n-1].hasToken {
			n--
		}
	}
	if n == 0 {
		return nil, nil
	}
	batches := append([]*batch(nil), w.queue[:n]...)
	for _, b := range batches {
		b.handed = true
	}
	run := &Run{
		Table: w.ident, Branch: w.opts.branch, WriterID: w.id, StableID: w.opts.stableID, Epoch: w.epoch,
		FirstSeq: batches[0].seq, LastSeq: batches[n-1].seq,
		BaseSnapshotID: headID(w.tbl.Metadata(), w.opts.branch),
		formatVersion:  w.tbl.Metadata().Version(), spec: w.tbl.Spec(), schema: w.tbl.Schema(),
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
	}
	return run, batches
}

func (w *Writer) finishRun(run *Run, batches []*batch, res *CommitResult, err error) {
	w.mu.Lock()
	if err != nil {
		w.failLocked(fmt.Errorf("iceberg: commit run %d..%d: %w", run.FirstSeq, run.LastSeq, err))
		w.mu.Unlock()
		return
	}
	w.queue = w.queue[len(batches):]
	w.committed = run.LastSeq
	if res.Table != nil {
		w.tbl = res.Table
	}
	w.st.commits.Add(1)
	w.st.rowsCommitted.Add(run.Rows)
	if res.Attempts > 1 {
		w.st.retries.Add(int64(res.Attempts - 1))
	}
	w.st.conflicts.Add(int64(res.Conflicts))
	w.st.deleteFiles.Add(int64(run.deleteFiles()))
	w.st.rewritten.Add(int64(res.FilesRewritten))
	w.signalLocked()
	w.mu.Unlock()
	if res.Table != nil {
		_ = w.setTable(res.Table) // picks up schema changes made by others at the next batch
	}
	if w.opts.onCommit != nil {
		w.cbs.deliver(CommitInfo{SnapshotID: res.SnapshotID, Token: run.Token, Rows: run.Rows, Files: run.files(),
			Bytes: run.Bytes, FirstSeq: run.FirstSeq, LastSeq: run.LastSeq, Batches: len(batches), Attempts: res.Attempts})
	}
	w.maint.afterCommit(w.ctx, run.deleteFiles())
}

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
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usableLocked(); err != nil {
		return err
	}
	w.sealLocked(&token)
	return nil
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
