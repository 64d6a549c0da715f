package iceberg

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	ice "github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
)

// compactor runs the maintenance compactions (WithSmallFileCompaction, WithAutoCompact) off the commit path, so
// that a live stream's next flush never waits behind one: reading the files with their deletes and writing the
// merged files, the slow part, happens on a goroutine of its own on the table as the writer's last commit left
// it (snapshot S), while the commit loop goes on committing. Only the rewrite's commit takes the commit queue,
// between two runs, and it is metadata only.
//
// Commits the writer made meanwhile stay correct this way:
//   - The new files get S's sequence number as their data sequence number (Java's "use starting sequence
//     number"), so every equality delete committed after S still applies to them, as it did to the files they
//     replace. Equality deletes at or before S were applied when the files were read.
//   - A position delete or deletion vector committed after S that targets a rewritten file (or cannot be tied
//     to one file), or a rewritten file removed since S, would be lost: the pass is then given up, its files
//     removed, and the next one that is due plans again. So is a pass whose S is no longer an ancestor of the
//     branch's head.
//
// One pass runs at a time; a pass due while one runs is skipped. Close and Abort cancel a pass still reading or
// writing, and wait for one that is committing. The compactor also runs the file cleanup after an expiry
// (spawn), for the same reason.
type compactor struct {
	w      *Writer
	ctx    context.Context // ends at stop
	cancel context.CancelFunc

	mu      sync.Mutex
	running bool
	stopped bool
	wg      sync.WaitGroup
}

func newCompactor(w *Writer) *compactor {
	ctx, cancel := context.WithCancel(context.Background())
	return &compactor{w: w, ctx: ctx, cancel: cancel}
}

// testHookRewriteWritten, when set, runs after a background pass wrote its files and before it takes the commit
// queue (tests hold a pass there).
var testHookRewriteWritten func()

// start begins a pass unless one is running or the writer is closing; it reports whether it began one.
func (c *compactor) start(smallOnly bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running || c.stopped {
		return false
	}
	c.running = true
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		start := time.Now()
		res, err := c.w.compactBackground(c.ctx, smallOnly)
		c.w.compacted(start, true, smallOnly, res, err)
		switch {
		case err == nil, c.ctx.Err() != nil:
		case errors.Is(err, ErrFenced):
			// The writer stopped and said so.
		default:
			c.w.env.log.Warn("iceberg: maintenance not done; it runs again when next due", "what", "compaction",
				"small_only", smallOnly, "table", c.w.env.ident, "err", err)
		}
		c.mu.Lock()
		c.running = false
		c.mu.Unlock()
	}()
	return true
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
	removeNew := func() {
		fs, err := base.FS(context.WithoutCancel(ctx))
		if err != nil {
			return
		}
		for _, gr := range results {
			for _, df := range gr.NewDataFiles {
				_ = fs.Remove(df.FilePath())
			}
		}
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
		res.RewrittenDataFiles += len(gr.OldDataFiles)
		res.AddedDataFiles += len(gr.NewDataFiles)
		res.RemovedDeleteFiles += len(gr.SafePosDeletes) + len(gr.SafeDeletionVectors)
		res.BytesBefore += gr.BytesBefore
		res.BytesAfter += gr.BytesAfter
	}
	if len(results) == 0 {
		return CompactResult{}, nil
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
	w.pipe.commitMu.Lock()
	defer w.pipe.commitMu.Unlock()
	if err := w.pipe.usable(); err != nil {
		removeNew()
		return CompactResult{}, err
	}
	nonce := uuid.NewString()
	var overlap error
	var sent bool
	op := &txOp{
		what: "compact", kind: KindCompaction, maxAttempts: compactAttempts, maxBuilds: maxBuildAttempts,
		build: func(ctx context.Context, tbl *table.Table, _ int) (*table.Transaction, error) {
			if overlap = rewriteOverlap(tbl, w.env.branch, pl); overlap != nil {
				return nil, nil
			}
			tx := tbl.NewTransactionOnBranch(w.env.branch)
			rw := tx.NewRewrite(ice.Properties{summaryWriterID: w.env.id, summaryOperation: "compact", summaryNonce: nonce})
			staged := map[string]struct{}{}
			for _, gr := range results {
				rw.ApplyResult(gr)
				for _, df := range gr.SafePosDeletes {
					staged[df.FilePath()] = struct{}{}
				}
				for _, df := range gr.SafeDeletionVectors {
					staged[df.FilePath()] = struct{}{}
				}
			}
			for _, df := range pl.deadEq {
				if _, ok := staged[df.FilePath()]; !ok {
					rw.DeleteFile(df)
				}
			}
			rw.DataSequenceNumber(pl.snap.SequenceNumber)
			if err := rw.Commit(ctx); err != nil {
				return nil, fmt.Errorf("iceberg: compact: stage: %w", err)
			}
			return tx, nil
		},
		prove: nonceProof(w.env.branch, summaryNonce, nonce, nil),
		failed: func(s bool) {
			if s {
				sent = true
				w.keys.drop("a compaction's commit returned an error (its reply may be lost)", nil)
			}
		},
		committed: func(ctx context.Context, pre, next *table.Table) {
			w.keys.rebase(ctx, pre, next, pl.rewritten)
		},
	}
	r, err := w.commitTx(commitCtx, op)
	if err != nil {
		if !sent {
			removeNew()
		}
		return CompactResult{Attempts: r.attempts}, w.env.red.Error(err)
	}
	if r.how == txNothing {
		removeNew()
		if overlap != nil {
			w.env.log.Info("iceberg: compaction given up; the next one due plans again", "table", w.env.ident,
				"reason", overlap.Error())
		}
		return CompactResult{Attempts: r.attempts}, nil
	}
	res.Attempts = r.attempts
	res.RemovedDeleteFiles += len(pl.deadEq)
	if s, ok := findNonce(r.table.Metadata(), w.env.branch, summaryNonce, nonce); ok {
		res.SnapshotID = s.SnapshotID
		if s.Summary != nil {
			fmt.Sscan(s.Summary.Properties["total-delete-files"], &res.DeleteFilesRemaining)
		}
	}
	return res, nil
}

// rewriteOverlap reports (wrapping errRewriteOverlap) why a rewrite planned on pl.snap cannot commit onto tbl:
// pl.snap is no longer an ancestor of the branch's head, or a snapshot since removed a rewritten file or added
// a position delete or deletion vector that targets one (or whose target is not one known file). Equality
// deletes added since are no overlap: the rewrite's files keep pl.snap's sequence number.
func rewriteOverlap(tbl *table.Table, branch string, pl *rewritePlan) error {
	meta := tbl.Metadata()
	head := meta.SnapshotByName(branch)
	var since []*table.Snapshot
	for s := head; ; {
		if s == nil {
			return fmt.Errorf("%w: its snapshot %d is no longer an ancestor of the branch", errRewriteOverlap, pl.snap.SnapshotID)
		}
		if s.SnapshotID == pl.snap.SnapshotID {
			break
		}
		since = append(since, s)
		if s.ParentSnapshotID == nil {
			s = nil
			continue
		}
		s = meta.SnapshotByID(*s.ParentSnapshotID)
	}
	if len(since) == 0 {
		return nil
	}
	fs, err := tbl.FS(context.Background())
	if err != nil {
		return fmt.Errorf("%w: %w", errRewriteOverlap, err)
	}
	for _, s := range since {
		if err := snapshotOverlaps(fs, s, pl.rewritten); err != nil {
			return err
		}
	}
	return nil
}

// snapshotOverlaps checks the entries snapshot s added or deleted against the rewritten files.
func snapshotOverlaps(fs iceio.IO, s *table.Snapshot, rewritten map[string]struct{}) error {
	mans, err := s.Manifests(fs)
	if err != nil {
		return fmt.Errorf("%w: snapshot %d: %w", errRewriteOverlap, s.SnapshotID, err)
	}
	for _, m := range mans {
		if m.SnapshotID() != s.SnapshotID {
			continue // carried over from an earlier snapshot
		}
		for e, err := range m.Entries(fs, false) {
			if err != nil {
				return fmt.Errorf("%w: snapshot %d: %w", errRewriteOverlap, s.SnapshotID, err)
			}
			if e.SnapshotID() != s.SnapshotID {
				continue
			}
			df := e.DataFile()
			switch {
			case df.ContentType() == ice.EntryContentData && e.Status() == ice.EntryStatusDELETED:
				if _, ok := rewritten[df.FilePath()]; ok {
					return fmt.Errorf("%w: snapshot %d removed %s", errRewriteOverlap, s.SnapshotID, df.FilePath())
				}
			case df.ContentType() == ice.EntryContentPosDeletes && e.Status() == ice.EntryStatusADDED:
				// posDeleteTarget, not ReferencedDataFile: format v2 manifests do not keep the referenced file,
				// and the key index's v2 position deletes say it by their file_path bounds.
				ref := posDeleteTarget(df)
				if ref == "" {
					return fmt.Errorf("%w: snapshot %d added position deletes %s of no one file", errRewriteOverlap,
						s.SnapshotID, df.FilePath())
				}
				if _, ok := rewritten[ref]; ok {
					return fmt.Errorf("%w: snapshot %d added position deletes on %s", errRewriteOverlap, s.SnapshotID, ref)
				}
			}
		}
	}
	return nil
}
