package iceberg

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/icewriter/iceberg/internal/commit/cow"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/icewriter/iceberg/internal/commit"
	"github.com/icewriter/iceberg/internal/keyindex"
	"github.com/icewriter/iceberg/internal/redact"
)

// commit is the pipeline's commit of one run: the run formed from the batches, placed in the key index,
// committed by the Committer, then the index and the table brought up to date before the pipeline reports the
// batches committed. It runs inside the commit queue, on the writer's context.
func (w *Writer) commit(ctx context.Context, batches []*batch) (*Run, *CommitResult, error) {
	tbl := w.view.table()
	run, err := w.runs.form(tbl, batches)
	if err != nil {
		return nil, nil, err
	}
	placeOn := tbl
	if w.keys.wantsFresh() {
		// Others commit to the table: place the run on its head, so that the key index catches up with them
		// before the commit rather than after a fallback (a failed load costs the fallback, not the run).
		if fresh, err := w.env.cat.LoadTable(ctx, w.env.ident); err == nil {
			placeOn = w.env.tables.Loaded(fresh)
		}
	}
	dvs, err := w.keys.apply(ctx, placeOn, run, batches)
	var res *CommitResult
	if err == nil {
		res, err = w.runs.commit(ctx, run)
	}
	if err != nil {
		return run, nil, err
	}
	w.keys.committed(ctx, run, res, dvs)
	if res.Table != nil {
		_ = w.view.set(res.Table) // picks up schema changes made by others at the next batch
	}
	return run, res, nil
}

// runStage forms the Run of the batches the commit loop cut, hands it to the Committer and counts what the
// commits did. The commit loop drives it, one run at a time; its counters are atomic for Stats.
type runStage struct {
	env       *writerEnv
	committer Committer
	def       *catalogCommitter // the default committer (nil when WithCommitter replaced it)

	rows, commits, retries, conflicts, deleteFiles, rewritten atomic.Int64
	// lastAt is the latest commit's time (Unix ns), for Stats.LastCommit.
	lastAt atomic.Int64

	// bases are the positions the writer expects the table to hold per source partition (Run.PositionBases):
	// the one it resumed a partition from, then the one each of its commits left. basesMu guards them: resumes
	// come from the caller's goroutines (a rebalance callback), commits from the commit loop.
	basesMu sync.Mutex
	bases   map[string]string
}

// rebase makes positions (partition -> position, "" for none) the bases of their partitions.
func (r *runStage) rebase(positions map[string]string) {
	r.basesMu.Lock()
	defer r.basesMu.Unlock()
	if r.bases == nil {
		r.bases = map[string]string{}
	}
	maps.Copy(r.bases, positions)
}

// forget drops a partition's base: the writer released it (Source.Abort), so its next owner's commits are no
// longer this writer's business, and a later resume sets a new base.
func (r *runStage) forget(partition string) {
	r.basesMu.Lock()
	defer r.basesMu.Unlock()
	delete(r.bases, partition)
}

// basesOf returns the bases of the partitions of positions that have one (nil: none).
func (r *runStage) basesOf(positions map[string]string) map[string]string {
	r.basesMu.Lock()
	defer r.basesMu.Unlock()
	var out map[string]string
	for p := range positions {
		if b, ok := r.bases[p]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[p] = b
		}
	}
	return out
}

// newRunStage hands runs to c or, when c is nil, to a catalog committer of its own working from tbl, the table
// as NewWriter left it, that rewrites copy-on-write files as the writer encodes its own.
func newRunStage(env *writerEnv, c Committer, tbl *table.Table, cow cow.Config) *runStage {
	r := &runStage{env: env, committer: c}
	if c == nil {
		r.def = newCatalogCommitter(env.cat, tbl, env.log, env.timeout, env.tables)
		setCow(r.def, cow)
		if env.retryWaits != nil {
			r.def.MinWait, r.def.MaxWait = env.retryWaits[0], env.retryWaits[1]
		}
		r.def.Report = env.events
		r.committer = r.def
	}
	return r
}

// commit has the Committer commit run and counts it.
func (r *runStage) commit(ctx context.Context, run *Run) (*CommitResult, error) {
	res, err := r.committer.Commit(ctx, run)
	if err != nil {
		return nil, err
	}
	r.rebase(run.Positions)
	commit.SetCommitted(run, time.Now())
	r.lastAt.Store(commit.CommittedAt(run).UnixNano())
	r.commits.Add(1)
	r.rows.Add(run.Rows)
	if res.Attempts > 1 {
		r.retries.Add(int64(res.Attempts - 1))
	}
	r.conflicts.Add(int64(res.Conflicts))
	r.deleteFiles.Add(int64(commit.DeleteFileCount(run)))
	r.rewritten.Add(int64(res.FilesRewritten))
	return res, nil
}

// installed tells the default committer the table a transaction of the writer's own left, so that its next
// run builds on it.
func (r *runStage) installed(tbl *table.Table) {
	if r.def != nil {
		r.def.SetLatest(r.env.ident, tbl)
	}
}

// sideFiles is the default committer's cache of position side files (nil with WithCommitter).
func (r *runStage) sideFiles() *commit.PositionsCache {
	if r.def == nil {
		return nil
	}
	return r.def.SideFiles()
}

// form makes the run of consecutive staged batches the pipeline cut from its queue, on tbl, the table as the
// writer last saw it. Packed data files are decoded here (the error: one that does not decode).
func (r *runStage) form(tbl *table.Table, batches []*batch) (*Run, error) {
	e := r.env
	n := len(batches)
	run := &Run{
		Table: e.ident, Branch: e.branch, WriterID: e.id, StableID: e.stableID, Epoch: e.epoch,
		FirstSeq: batches[0].Seq, LastSeq: batches[n-1].Seq,
		BaseSnapshotID: commit.HeadID(tbl.Metadata(), e.branch),
	}
	commit.Describe(run, tbl.Metadata().Version(), tbl.Spec(), tbl.Schema())
	commit.SetFormed(run, time.Now())
	// Batches coalesced into one snapshot share its sequence number, and an equality delete does not reach rows
	// of its own sequence number: a batch that upserts or deletes a key written earlier in the run starts a new
	// segment, a snapshot of its own inside the same atomic catalog commit.
	// segWritten holds the key sets the segment's batches wrote, each checked in turn rather than merged: a
	// merge copied every batch's set, the last batch's (most runs have one) for nothing.
	var seg *Segment
	var segWritten []map[uint64]struct{}
	for _, b := range batches {
		if seg == nil || (len(b.enc.keyedSet) > 0 && keyindex.IntersectsAny(b.enc.keyedSet, segWritten)) {
			run.Segments = append(run.Segments, Segment{})
			seg = &run.Segments[len(run.Segments)-1]
			segWritten = segWritten[:0]
		}
		var err error
		if seg.DataFiles, err = b.dataFiles(seg.DataFiles); err != nil {
			return nil, err
		}
		seg.DeleteFiles = append(seg.DeleteFiles, b.enc.deletes...)
		seg.DeleteKeys = append(seg.DeleteKeys, b.keys.cowKeys...)
		b.SegIdx = len(run.Segments) - 1
		seg.LastSeq = b.Seq
		seg.Rows += b.Rows
		if len(b.enc.written) > 0 {
			segWritten = append(segWritten, b.enc.written)
		}
		run.Rows += b.Rows
		run.Bytes += b.Bytes
		if b.HasToken {
			run.Token, run.HasToken = b.Token, true
			seg.Token, seg.HasToken = b.Token, true
		}
		// Batches come in sequence order: a later batch's position of a partition replaces an earlier one's.
		for p, v := range b.Positions {
			if run.Positions == nil {
				run.Positions = map[string]string{}
			}
			run.Positions[p] = v
		}
	}
	run.PositionBases = r.basesOf(run.Positions)
	return run, nil
}

// committed follows a run's commit inside the commit queue: it is logged, its callback is queued (delivered in
// commit order outside every lock), then the maintenance due (the maintainer's schedule).
func (w *Writer) committed(ctx context.Context, run *Run, batches []*batch, res *CommitResult, _ int64) {
	ci := w.commitInfo(run, len(batches), res)
	w.env.log.Info("iceberg: committed", "table", w.env.ident, "snapshot", ci.SnapshotID, "rows", ci.Rows,
		"files", ci.Files, "duration", ci.Duration, "attempts", ci.Attempts)
	w.cbs.deliver(ci)
	w.maint.AfterCommit(ctx, commit.DeleteFileCount(run))
}

// loopDone: nothing is delivered after the commit loop; the callback goroutine ends once it is drained.
func (w *Writer) loopDone() { w.cbs.close(w) }

// CommitInfo describes one successful commit, as WithOnCommit and HookCommitted report it.
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
	Conflicts  int    // attempts the catalog rejected because the table moved
	// FileBytes is the size of the files the commit adds: data files, delete files and deletion vectors.
	FileBytes int64
	// Duration is the commit's time, from forming the run to its commit returning: the key index's deletion
	// vectors, every attempt and the backoffs between them.
	Duration time.Duration
	// CommitTime is when the commit returned, by the writer's clock (the snapshot's own timestamp is the
	// committer's, in the table's metadata).
	CommitTime time.Time
	Table      table.Identifier
	WriterID   string
}

// Checkpoint marks everything accepted so far with an opaque token (source offsets, a log position) and ends the
// current batch there. With WithCheckpoints, a commit never includes rows after its newest token.
func (w *Writer) Checkpoint(ctx context.Context, token string) error {
	if len(token) > defaultMaxTokenBytes {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrTokenTooLarge, len(token), defaultMaxTokenBytes)
	}
	return w.pipe.Checkpoint(token)
}

// LastCheckpoint returns the newest token committed by this writer's ID on the table's current branch history.
func (w *Writer) LastCheckpoint(ctx context.Context) (token string, ok bool, err error) {
	tbl, err := w.env.loadTable(ctx)
	if err != nil {
		return "", false, err
	}
	token, _, ok = lastCheckpoint(tbl.Metadata(), w.env.branch, w.env.id)
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
