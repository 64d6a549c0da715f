package maintain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	log    *slog.Logger // a failed pass is logged (it runs again when next due)
	ident  table.Identifier
	ctx    context.Context // ends at stop
	cancel context.CancelFunc

	mu      sync.Mutex
	pass    chan struct{} // while a pass runs: closed when it ends
	stopped bool
	wg      sync.WaitGroup
}

func newCompactor(log *slog.Logger, ident table.Identifier) *compactor {
	ctx, cancel := context.WithCancel(context.Background())
	return &compactor{log: log, ident: ident, ctx: ctx, cancel: cancel}
}

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
		case errors.Is(err, commit.ErrFenced):
			// The writer stopped and said so.
		default:
			c.log.Warn("iceberg: maintenance not done; it runs again when next due",
				append([]any{"what", what, "table", c.ident, "err", err}, logAttrs...)...)
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
func (m *Maintainer) compactBackground(ctx context.Context, smallOnly bool) (CompactResult, error) {
	base := m.env.Table()
	if base == nil {
		return CompactResult{}, nil
	}
	pl, err := m.planRewrite(ctx, base, smallOnly)
	if err != nil || pl == nil {
		return CompactResult{}, err
	}
	p := &compactPass{pl: pl, env: &m.env}
	if err := p.write(ctx, m.groupOptions()); err != nil {
		p.removeNew(ctx)
		if ctx.Err() != nil && err == ctx.Err() {
			return CompactResult{}, err
		}
		return CompactResult{}, m.env.Redact(err)
	}
	if len(p.results) == 0 {
		return CompactResult{}, nil
	}
	if m.env.RewriteWritten != nil {
		m.env.RewriteWritten()
	}
	if ctx.Err() != nil {
		p.removeNew(ctx)
		return CompactResult{}, ctx.Err()
	}
	// The commit: in the queue, between two runs, and never cut off half-way by stop.
	commitCtx := context.WithoutCancel(ctx)
	defer m.env.EnterQueue()()
	if err := m.env.Usable(); err != nil {
		p.removeNew(ctx)
		return CompactResult{}, err
	}
	op := p.op(m.env.Table())
	r, err := m.env.Commit(commitCtx, op)
	if err != nil {
		if !p.sent {
			p.removeNew(ctx)
		}
		return CompactResult{Attempts: r.Attempts}, m.env.Redact(err)
	}
	if r.How == commit.Nothing {
		p.removeNew(ctx)
		if p.overlap != nil {
			m.env.Log.Info("iceberg: compaction given up; the next one due plans again", "table", m.env.Ident,
				"reason", p.overlap.Error())
		}
		return CompactResult{Attempts: r.Attempts}, nil
	}
	if !p.sent {
		p.removePaths(ctx, p.orphans) // no earlier build reached the catalog: its deletes are nobody's
	}
	if p.rebased != nil && len(p.rebased.files) > 0 {
		m.env.Log.Debug("iceberg: compaction re-based deletes committed while it ran", "table", m.env.Ident,
			"delete_files", len(p.drift.deletes), "rows", p.rebased.rows)
	}
	return p.result(r), nil
}

// compactPass is one background compaction: the files it wrote (write), then the transaction that commits
// them (op), re-based on every attempt.
type compactPass struct {
	pl    *rewritePlan
	env   *Env // names the re-based delete files as the writer names its own; the key index's hooks
	nonce string

	results []table.CompactionGroupResult // the groups that wrote files
	res     CompactResult                 // counted while writing
	// traced maps each rewritten file to its group's rewriteRows: what re-bases the deletes committed on it
	// while the pass runs. A table with a sort order has none (its writer reorders rows), nor has a group whose
	// rows cannot be traced (traceErr says why); a delete since on such a file gives the pass up.
	traced    map[string]*rewriteRows
	traceErr  error
	rewritten map[string]struct{} // the files the commit removes

	// Set by the commit's builds: rebased, the deletes the last build staged on the new files; orphans, those
	// of earlier builds; drift, what changed since the pass's snapshot; overlap, why the pass was given up;
	// sent, whether an attempt reached the catalog.
	rebased *rebasedDeletes
	orphans []string
	drift   *rewriteDrift
	overlap error
	sent    bool
}

// write rewrites the plan's groups and traces their rows. It keeps what it wrote in p.results even when it
// fails (removeNew deletes it).
func (p *compactPass) write(ctx context.Context, opts []table.CompactionGroupOption) error {
	pl := p.pl
	p.traced = map[string]*rewriteRows{}
	var resolver DeleteResolver
	if pl.writeTable.Metadata().SortOrder().IsUnsorted() {
		resolver, p.traceErr = p.env.NewDeleteResolver(ctx, pl.base)
	} else {
		p.traceErr = errors.New("the table has a sort order")
	}
	for _, g := range pl.groups {
		var gr table.CompactionGroupResult
		var err error
		if p.env.Shred != nil {
			gr, err = executeShredGroup(ctx, p.env, pl.writeTable, g)
		} else {
			gr, err = table.ExecuteCompactionGroup(ctx, pl.writeTable, g, opts...)
		}
		if len(gr.NewDataFiles) > 0 {
			p.results = append(p.results, gr)
		}
		if err != nil {
			return fmt.Errorf("iceberg: compact: rewrite: %w", err)
		}
		if resolver != nil {
			rows, err := newRewriteRows(ctx, resolver, g.Tasks, gr.NewDataFiles)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				p.traceErr = err
			}
			for _, t := range g.Tasks {
				if rows != nil {
					p.traced[t.File.FilePath()] = rows
				}
			}
		}
		p.res.RewrittenDataFiles += len(gr.OldDataFiles)
		p.res.AddedDataFiles += len(gr.NewDataFiles)
		p.res.RemovedDeleteFiles += len(gr.SafePosDeletes) + len(gr.SafeDeletionVectors)
		p.res.BytesBefore += gr.BytesBefore
		p.res.BytesAfter += gr.BytesAfter
	}
	// The files the commit removes: a group that wrote nothing (its rows were all deleted) is not committed.
	p.rewritten = map[string]struct{}{}
	for _, gr := range p.results {
		for _, df := range gr.OldDataFiles {
			p.rewritten[df.FilePath()] = struct{}{}
		}
	}
	return nil
}

// removePaths deletes files the pass wrote, whatever ctx says.
func (p *compactPass) removePaths(ctx context.Context, paths []string) {
	fs, err := p.pl.base.FS(context.WithoutCancel(ctx))
	if err != nil {
		return
	}
	for _, path := range paths {
		_ = fs.Remove(path)
	}
}

// removeNew deletes every file the pass wrote: the new data files and the re-based deletes of every build.
func (p *compactPass) removeNew(ctx context.Context) {
	var paths []string
	for _, gr := range p.results {
		for _, df := range gr.NewDataFiles {
			paths = append(paths, df.FilePath())
		}
	}
	if p.rebased != nil {
		paths = append(paths, p.rebased.paths...)
	}
	p.removePaths(ctx, append(paths, p.orphans...))
}

// op is the pass's transaction, first built on start (the table the writer's last commit left: in the commit
// queue no commit of this writer is in flight, as the writer's commits and the conversion pass build on; no
// table load a pass). If another writer moved the head since, the attempt is rejected and the retry reloads at
// once. The key index is dropped on a lost reply and re-indexes the new files after the commit.
func (p *compactPass) op(start *table.Table) *commit.Op {
	p.nonce = uuid.NewString()
	return &commit.Op{
		Start: start,
		What:  "compact", Kind: KindCompaction, MaxAttempts: compactAttempts, MaxBuilds: p.env.MaxBuilds,
		Build: p.build,
		Prove: commit.NonceProof(p.env.Branch, SummaryNonce, p.nonce, nil),
		Failed: func(s bool) {
			if s {
				p.sent = true
				p.env.DropIndex("a compaction's commit returned an error (its reply may be lost)")
			}
		},
		Committed: func(ctx context.Context, pre, next *table.Table) {
			p.env.RebaseIndex(ctx, pre, next, p.rewritten)
		},
	}
}

// build stages the rewrite on tbl, re-basing the deletes committed since the pass's snapshot; nil when the
// pass is given up (p.overlap says why).
func (p *compactPass) build(ctx context.Context, tbl *table.Table, _ int) (*table.Transaction, error) {
	if p.rebased != nil {
		p.orphans = append(p.orphans, p.rebased.paths...)
		p.rebased = nil
	}
	var err error
	if p.drift, err = rewriteDriftOn(tbl, p.env, p.pl.snap, p.rewritten); err != nil {
		p.overlap = err
		return nil, nil
	}
	if p.rebased, err = rebaseDeletes(ctx, tbl, p.env, p.drift, p.traced); err != nil {
		if errors.Is(err, errRewriteOverlap) {
			if p.traceErr != nil {
				err = fmt.Errorf("%w (%w)", err, p.traceErr)
			}
			p.overlap = err
			return nil, nil
		}
		return nil, err
	}
	tx := tbl.NewTransactionOnBranch(p.env.Branch)
	rw := tx.NewRewrite(ice.Properties{commit.SummaryWriterID: p.env.WriterID, commit.SummaryOperation: commit.OpCompact, SummaryNonce: p.nonce})
	// The delete files that die with the rewritten files go as iceberg-go's automatic removals: those of
	// the pass's snapshot that are still live, and its dead equality deletes. The deletes committed since
	// go as explicit removals, which the deletes re-based onto the new files replace (iceberg-go gives
	// added delete files the highest sequence number of the explicit ones, above the new files').
	staged := map[string]struct{}{}
	var auto []ice.DataFile
	stage := func(df ice.DataFile) {
		if _, ok := staged[deleteFileKey(df)]; !ok && !p.drift.has(df) {
			staged[deleteFileKey(df)] = struct{}{}
			auto = append(auto, df)
		}
	}
	for _, gr := range p.results {
		for _, df := range gr.OldDataFiles {
			rw.DeleteFile(df)
		}
		for _, df := range gr.NewDataFiles {
			rw.AddDataFile(df)
		}
		for _, safe := range [][]ice.DataFile{gr.SafePosDeletes, gr.SafeDeletionVectors} {
			for _, df := range safe {
				stage(df)
			}
		}
	}
	for _, df := range p.pl.deadEq {
		stage(df)
	}
	// ApplyResult is iceberg-go's only way to an automatic removal: a result of delete files alone.
	rw.ApplyResult(table.CompactionGroupResult{SafePosDeletes: auto})
	for _, df := range p.drift.deletes {
		rw.DeleteFile(df)
	}
	for _, df := range p.rebased.files {
		rw.AddDeleteFile(df)
	}
	rw.DataSequenceNumber(p.pl.snap.SequenceNumber)
	if err := rw.Commit(ctx); err != nil {
		return nil, fmt.Errorf("iceberg: compact: stage: %w", err)
	}
	return tx, nil
}

// result is what the committed pass did.
func (p *compactPass) result(r commit.Result) CompactResult {
	res := p.res
	res.Attempts = r.Attempts
	res.RemovedDeleteFiles += len(p.pl.deadEq)
	if p.drift != nil {
		res.RemovedDeleteFiles += len(p.drift.deletes)
	}
	if s, ok := commit.FindNonce(r.Table.Metadata(), p.env.Branch, SummaryNonce, p.nonce); ok {
		res.SnapshotID = s.SnapshotID
		if s.Summary != nil {
			fmt.Sscan(s.Summary.Properties["total-delete-files"], &res.DeleteFilesRemaining)
		}
	}
	return res
}
