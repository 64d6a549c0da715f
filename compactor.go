package iceberg

import (
	"context"
	"errors"
	"fmt"
	"sync"

	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/icewriter/iceberg/internal/commit"
)

// compactor runs the maintenance compactions (WithSmallFileCompactionEvery, WithAutoCompactEvery) off the commit path, so
// that a live stream's next flush never waits behind one (and, with the same runner, start, the conversion of
// equality deletes: see convertBackground): reading the files with their deletes and writing the
// merged files, the slow part, happens on a goroutine of its own on the table as the writer's last commit left
// it (snapshot S), while the commit loop goes on committing. Only the rewrite's commit takes the commit queue,
// between two runs: metadata, and the deletes it re-bases (below).
//
// Commits the writer made meanwhile stay correct this way:
//   - The new files get S's sequence number as their data sequence number (Java's "use starting sequence
//     number"), so every equality delete committed after S still applies to them, as it did to the files they
//     replace. Equality deletes at or before S were applied when the files were read.
//   - A position delete or deletion vector committed after S on a rewritten file (on a v3 keyed table the
//     key index writes one on almost every upsert; on v2 the equality delete conversion writes position
//     deletes) is re-based: the pass's output holds each row live at S once, in read order (rewriteRows), so
//     the commit moves each such delete onto the output row that holds it, as one deletion vector per new
//     file (v3) or one file-scoped position delete file per new file (v2), and removes the deletes it
//     replaces. The commit's build does this on the table it commits onto, so a retry re-bases again.
//   - The pass is given up, its files removed, and the next one that is due plans again, when S is no longer
//     an ancestor of the branch's head, a rewritten file was removed since S, a position delete since S
//     cannot be tied to one file, or the rows of the rewrite cannot be traced (a table with a sort order).
//
// One background pass, compaction or conversion, runs at a time; start refuses a pass while one runs (the
// maintainer tries it again after its next commit). Close and Abort cancel a pass still reading or writing, and
// wait for one that is committing. The compactor also runs the file cleanup after an expiry (spawn), for the
// same reason.
type compactor struct {
	w   *Writer
	ctx context.Context // ends at stop
	// deleteRatio (WithDeleteRewriteRatio): a small-file pass also rewrites the files with this share of their
	// rows deleted (0: off).
	deleteRatio float64
	cancel      context.CancelFunc

	mu      sync.Mutex
	pass    chan struct{} // while a pass runs: closed when it ends
	stopped bool
	wg      sync.WaitGroup
}

func newCompactor(w *Writer, deleteRatio float64) *compactor {
	ctx, cancel := context.WithCancel(context.Background())
	return &compactor{w: w, ctx: ctx, cancel: cancel, deleteRatio: deleteRatio}
}

// testHookRewriteWritten, when set, runs after a background pass (compaction or conversion) wrote its files
// and before it takes the commit queue (tests hold a pass there).
var testHookRewriteWritten func()

// start begins a background pass (a compaction or an equality delete conversion: what names it in logs) unless
// one is running or the writer is closing; it reports whether it began one. pass runs on the compactor's
// goroutine with a context that stop cancels; it reports its own events. A failure is logged and the pass runs
// again when next due; a fenced writer stopped and said so.
func (c *compactor) start(what string, pass func(ctx context.Context) error, logAttrs ...any) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pass != nil || c.stopped {
		return false
	}
	done := make(chan struct{})
	c.pass = done
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer close(done)
		err := pass(c.ctx)
		switch {
		case err == nil, c.ctx.Err() != nil:
		case errors.Is(err, ErrFenced):
			// The writer stopped and said so.
		default:
			c.w.env.log.Warn("iceberg: maintenance not done; it runs again when next due",
				append([]any{"what", what, "table", c.w.env.ident, "err", err}, logAttrs...)...)
		}
		c.mu.Lock()
		c.pass = nil
		c.mu.Unlock()
	}()
	return true
}

// passDone returns a channel closed when the running pass ends (closed already when none runs).
func (c *compactor) passDone() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pass == nil {
		done := make(chan struct{})
		close(done)
		return done
	}
	return c.pass
}

// spawn runs fn on a goroutine stop waits for (the file cleanup after an expiry), unless the writer is closing.
func (c *compactor) spawn(fn func(ctx context.Context)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		fn(context.WithoutCancel(c.ctx)) // a cleanup is not cut off: Close waits for it
	}()
}

// stop cancels a pass still reading or writing and waits for the pass to end.
func (c *compactor) stop() {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
}

// errRewriteOverlap gives up a background pass: the table changed since its snapshot in a way its rewrite would
// undo (see compactor).
var errRewriteOverlap = errors.New("iceberg: compaction given up: the table changed under its files")

// compactBackground plans and writes a compaction on the writer's last committed table without holding the
// commit queue, then commits it in the queue (see compactor). A pass given up because of errRewriteOverlap
// returns a zero result and no error.
func (w *Writer) compactBackground(ctx context.Context, smallOnly bool) (CompactResult, error) {
	base := w.Table()
	if base == nil {
		return CompactResult{}, nil
	}
	pl, err := w.planRewrite(ctx, base, smallOnly)
	if err != nil || pl == nil {
		return CompactResult{}, err
	}
	var results []table.CompactionGroupResult
	var res CompactResult
	// rebased: the deletes the last build staged on the new files; orphans: those of earlier builds.
	var rebased *rebasedDeletes
	var orphans []string
	removePaths := func(paths []string) {
		fs, err := base.FS(context.WithoutCancel(ctx))
		if err != nil {
			return
		}
		for _, p := range paths {
			_ = fs.Remove(p)
		}
	}
	removeNew := func() {
		var paths []string
		for _, gr := range results {
			for _, df := range gr.NewDataFiles {
				paths = append(paths, df.FilePath())
			}
		}
		if rebased != nil {
			paths = append(paths, rebased.paths...)
		}
		removePaths(append(paths, orphans...))
	}
	// traced maps each rewritten file to its group's rewriteRows: what re-bases the deletes committed on it
	// while the pass runs. A table with a sort order has none (its writer reorders rows), nor has a group whose
	// rows cannot be traced (traceErr says why); a delete since on such a file gives the pass up.
	traced := map[string]*rewriteRows{}
	var traceErr error
	var resolver *deleteResolver
	if pl.writeTable.Metadata().SortOrder().IsUnsorted() {
		resolver, traceErr = newDeleteResolver(ctx, pl.base)
	} else {
		traceErr = errors.New("the table has a sort order")
	}
	for _, g := range pl.groups {
		gr, err := table.ExecuteCompactionGroup(ctx, pl.writeTable, g, w.compactionGroupOptions()...)
		if len(gr.NewDataFiles) > 0 {
			results = append(results, gr)
		}
		if err != nil {
			removeNew()
			return CompactResult{}, w.env.red.Error(fmt.Errorf("iceberg: compact: rewrite: %w", err))
		}
		if resolver != nil {
			rows, err := newRewriteRows(ctx, resolver, g.Tasks, gr.NewDataFiles)
			if err != nil {
				if ctx.Err() != nil {
					removeNew()
					return CompactResult{}, ctx.Err()
				}
				traceErr = err
			}
			for _, t := range g.Tasks {
				if rows != nil {
					traced[t.File.FilePath()] = rows
				}
			}
		}
		res.RewrittenDataFiles += len(gr.OldDataFiles)
		res.AddedDataFiles += len(gr.NewDataFiles)
		res.RemovedDeleteFiles += len(gr.SafePosDeletes) + len(gr.SafeDeletionVectors)
		res.BytesBefore += gr.BytesBefore
		res.BytesAfter += gr.BytesAfter
	}
	if len(results) == 0 {
		return CompactResult{}, nil
	}
	// The files the commit removes: a group that wrote nothing (its rows were all deleted) is not committed.
	rewritten := map[string]struct{}{}
	for _, gr := range results {
		for _, df := range gr.OldDataFiles {
			rewritten[df.FilePath()] = struct{}{}
		}
	}
	if testHookRewriteWritten != nil {
		testHookRewriteWritten()
	}
	if ctx.Err() != nil {
		removeNew()
		return CompactResult{}, ctx.Err()
	}
	// The commit: in the queue, between two runs, and never cut off half-way by stop.
	commitCtx := context.WithoutCancel(ctx)
	defer w.pipe.enterQueue()()
	if err := w.pipe.usable(); err != nil {
		removeNew()
		return CompactResult{}, err
	}
	nonce := uuid.NewString()
	var overlap error
	var sent bool
	var drift *rewriteDrift
	op := &commit.Op{
		// The table the writer's last commit left (in the commit queue: no commit of this writer is in flight), as
		// the writer's commits and the conversion pass build on: no table load a pass. If another writer moved
		// the head since, the attempt is rejected and the retry reloads at once.
		Start: w.Table(),
		What:  "compact", Kind: KindCompaction, MaxAttempts: compactAttempts, MaxBuilds: maxBuildAttempts,
		Build: func(ctx context.Context, tbl *table.Table, _ int) (*table.Transaction, error) {
			if rebased != nil {
				orphans = append(orphans, rebased.paths...)
				rebased = nil
			}
			var err error
			if drift, err = rewriteDriftOn(tbl, w.env.branch, pl.snap, rewritten); err != nil {
				overlap = err
				return nil, nil
			}
			if rebased, err = rebaseDeletes(ctx, tbl, drift, traced, w.own.names); err != nil {
				if errors.Is(err, errRewriteOverlap) {
					if traceErr != nil {
						err = fmt.Errorf("%w (%w)", err, traceErr)
					}
					overlap = err
					return nil, nil
				}
				return nil, err
			}
			tx := tbl.NewTransactionOnBranch(w.env.branch)
			rw := tx.NewRewrite(ice.Properties{summaryWriterID: w.env.id, summaryOperation: "compact", summaryNonce: nonce})
			// The delete files that die with the rewritten files go as iceberg-go's automatic removals: those of
			// the pass's snapshot that are still live, and its dead equality deletes. The deletes committed since
			// go as explicit removals, which the deletes re-based onto the new files replace (iceberg-go gives
			// added delete files the highest sequence number of the explicit ones, above the new files').
			staged := map[string]struct{}{}
			var auto []ice.DataFile
			for _, gr := range results {
				for _, df := range gr.OldDataFiles {
					rw.DeleteFile(df)
				}
				for _, df := range gr.NewDataFiles {
					rw.AddDataFile(df)
				}
				for _, safe := range [][]ice.DataFile{gr.SafePosDeletes, gr.SafeDeletionVectors} {
					for _, df := range safe {
						if _, ok := staged[deleteFileKey(df)]; !ok && !drift.has(df) {
							staged[deleteFileKey(df)] = struct{}{}
							auto = append(auto, df)
						}
					}
				}
			}
			for _, df := range pl.deadEq {
				if _, ok := staged[deleteFileKey(df)]; !ok && !drift.has(df) {
					staged[deleteFileKey(df)] = struct{}{}
					auto = append(auto, df)
				}
			}
			// ApplyResult is iceberg-go's only way to an automatic removal: a result of delete files alone.
			rw.ApplyResult(table.CompactionGroupResult{SafePosDeletes: auto})
			for _, df := range drift.deletes {
				rw.DeleteFile(df)
			}
			for _, df := range rebased.files {
				rw.AddDeleteFile(df)
			}
			rw.DataSequenceNumber(pl.snap.SequenceNumber)
			if err := rw.Commit(ctx); err != nil {
				return nil, fmt.Errorf("iceberg: compact: stage: %w", err)
			}
			return tx, nil
		},
		Prove: commit.NonceProof(w.env.branch, summaryNonce, nonce, nil),
		Failed: func(s bool) {
			if s {
				sent = true
				w.keys.drop("a compaction's commit returned an error (its reply may be lost)", nil)
			}
		},
		Committed: func(ctx context.Context, pre, next *table.Table) {
			w.keys.rebase(ctx, pre, next, rewritten)
		},
	}
	r, err := w.commitTx(commitCtx, op)
	if err != nil {
		if !sent {
			removeNew()
		}
		return CompactResult{Attempts: r.Attempts}, w.env.red.Error(err)
	}
	if r.How == commit.Nothing {
		removeNew()
		if overlap != nil {
			w.env.log.Info("iceberg: compaction given up; the next one due plans again", "table", w.env.ident,
				"reason", overlap.Error())
		}
		return CompactResult{Attempts: r.Attempts}, nil
	}
	if !sent {
		removePaths(orphans) // no earlier build reached the catalog: its deletes are nobody's
	}
	res.Attempts = r.Attempts
	res.RemovedDeleteFiles += len(pl.deadEq)
	if drift != nil {
		res.RemovedDeleteFiles += len(drift.deletes)
	}
	if rebased != nil && len(rebased.files) > 0 {
		w.env.log.Debug("iceberg: compaction re-based deletes committed while it ran", "table", w.env.ident,
			"delete_files", len(drift.deletes), "rows", rebased.rows)
	}
	if s, ok := commit.FindNonce(r.Table.Metadata(), w.env.branch, summaryNonce, nonce); ok {
		res.SnapshotID = s.SnapshotID
		if s.Summary != nil {
			fmt.Sscan(s.Summary.Properties["total-delete-files"], &res.DeleteFilesRemaining)
		}
	}
	return res, nil
}
