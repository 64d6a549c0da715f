package maintain

import (
	"context"
	"errors"
	"fmt"
	"time"

	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/icewriter/iceberg/internal/commit"
)

// errConversionOverlap makes a background conversion plan again: the table changed since its snapshot in a way
// its commit would undo (see convertBackground).
var errConversionOverlap = errors.New("iceberg: equality delete conversion re-planned: the table changed under its files")

// convertBackground is the maintainer's conversion of equality deletes, a pass of the compactor's runner: it
// plans and writes on the table as the writer's last commit left it (snapshot S), without holding the commit
// queue, so that the writer's flushes go on meanwhile; only the commit, metadata only, takes the queue, and it
// builds on the table the writer's last commit left by then (no catalog load: if another writer committed
// since, the catalog rejects the attempt and the retry reloads at once).
//
// Commits made after S stay correct this way:
//   - Data files added since have higher sequence numbers than the equality deletes the pass removes, which
//     never applied to them; equality deletes added since are not removed (the next pass converts them).
//   - Position deletes added since on a v2 table sit beside the pass's file-scoped position delete files.
//   - A deletion vector added since on a file the pass also gives a vector replaced the vector the pass merged
//     its positions with: committing the pass's vector would drop it. So would removing a data file the pass
//     gives deletes (a rewrite keeps the removed equality deletes' sequence number below its files'), or an
//     equality delete file the pass removes being gone already, or S no longer being an ancestor of the head.
//     The pass then removes its files and plans again on the head (reading the files again), at most
//     maintainAttempts times in all; the last time it gives up, and the next pass that is due plans again.
//
// Vectors are not merged in the commit step: that would read and write files while holding the queue.
func (m *Maintainer) convertBackground(ctx context.Context) (ConvertResult, error) {
	var res ConvertResult
	var err error
	for try := 1; try <= maintainAttempts; try++ {
		start := time.Now()
		var overlap error
		res, overlap, err = m.convertPass(ctx)
		if errors.Is(err, m.env.Closed) || (err != nil && ctx.Err() != nil) {
			return res, nil // the writer closed while the pass ran: nothing was committed, nothing failed
		}
		if overlap == nil || err != nil {
			return res, m.convertedEvent(start, true, res, err)
		}
		m.env.Log.Info("iceberg: equality delete conversion planned again", "table", m.env.Ident, "try", try,
			"reason", overlap.Error())
	}
	m.env.Log.Info("iceberg: equality delete conversion given up; the next one due plans again", "table", m.env.Ident)
	return res, nil
}

// convertPass plans, writes and commits one background conversion (see convertBackground); overlap says why the
// commit was not made and the pass should plan again.
func (m *Maintainer) convertPass(ctx context.Context) (res ConvertResult, overlap error, err error) {
	base := m.env.Table()
	if base == nil || !hasEqualityDeletes(base, m.env.Branch) {
		return ConvertResult{}, nil, nil
	}
	plan, err := planConversion(ctx, base, &m.env)
	if err != nil || plan == nil {
		return ConvertResult{}, nil, err
	}
	removeNew := func() { plan.removeFiles(context.WithoutCancel(ctx), base) }
	if m.env.RewriteWritten != nil {
		m.env.RewriteWritten()
	}
	if ctx.Err() != nil {
		removeNew()
		return ConvertResult{}, nil, ctx.Err()
	}
	// The commit: in the queue, between two runs, and never cut off half-way by stop.
	commitCtx := context.WithoutCancel(ctx)
	defer m.env.EnterQueue()()
	if err := m.env.Usable(); err != nil {
		removeNew()
		return ConvertResult{}, nil, err
	}
	nonce := uuid.NewString()
	var sent bool
	op := &commit.Op{
		Start: m.env.Table(),
		What:  "convert equality deletes", Kind: KindDeleteConversion, MaxAttempts: maintainAttempts, MaxBuilds: m.env.MaxBuilds,
		Build: func(ctx context.Context, tbl *table.Table, _ int) (*table.Transaction, error) {
			if overlap = conversionOverlap(tbl, m.env.Branch, plan); overlap != nil {
				return nil, nil
			}
			return plan.stage(ctx, tbl, m.env.Branch, m.conversionProps(nonce))
		},
		Prove: commit.NonceProof(m.env.Branch, SummaryNonce, nonce, nil),
		Failed: func(s bool) {
			sent = sent || s
			m.conversionFailed(s)
		},
		Committed: func(_ context.Context, pre, next *table.Table) {
			m.env.IndexConverted(pre, next, plan.vectors)
		},
	}
	r, err := m.env.Commit(commitCtx, op)
	if (err != nil && !sent) || (err == nil && r.How == commit.Nothing) {
		removeNew() // nothing that names them reached the catalog
	}
	if err == nil && r.How == commit.Nothing && overlap == nil {
		return ConvertResult{Attempts: r.Attempts}, nil, nil
	}
	return conversionResult(m.env.Branch, r, err, plan, nonce), overlap, err
}

// conversionOverlap reports (wrapping errConversionOverlap) why a conversion planned on c.snap cannot commit onto
// tbl (see convertBackground): c.snap is no longer an ancestor of the branch's head, or a snapshot since removed
// a data file the conversion gives deletes or an equality delete file it removes, or (v3) added a deletion
// vector or position deletes on a data file it gives a vector (or of no one file).
func conversionOverlap(tbl *table.Table, branch string, c *conversion) error {
	var since []*table.Snapshot
	found := false
	commit.Ancestors(tbl.Metadata(), branch, func(s *table.Snapshot) bool {
		found = s.SnapshotID == c.snap.SnapshotID
		if !found {
			since = append(since, s)
		}
		return found
	})
	if !found {
		return fmt.Errorf("%w: its snapshot %d is no longer an ancestor of the branch", errConversionOverlap, c.snap.SnapshotID)
	}
	if len(since) == 0 {
		return nil
	}
	fs, err := tbl.FS(context.Background())
	if err != nil {
		return fmt.Errorf("%w: %w", errConversionOverlap, err)
	}
	removed := make(map[string]struct{}, len(c.removed))
	for _, f := range c.removed {
		removed[f.FilePath()] = struct{}{}
	}
	for _, s := range since {
		mans, err := s.Manifests(fs)
		if err != nil {
			return fmt.Errorf("%w: snapshot %d: %w", errConversionOverlap, s.SnapshotID, err)
		}
		for _, m := range mans {
			if m.SnapshotID() != s.SnapshotID {
				continue // carried over from an earlier snapshot
			}
			for e, err := range m.Entries(fs, false) {
				if err != nil {
					return fmt.Errorf("%w: snapshot %d: %w", errConversionOverlap, s.SnapshotID, err)
				}
				if e.SnapshotID() != s.SnapshotID {
					continue
				}
				df := e.DataFile()
				_, target := c.targets[df.FilePath()]
				_, gone := removed[df.FilePath()]
				switch {
				case e.Status() == ice.EntryStatusDELETED && df.ContentType() == ice.EntryContentData && target:
					return fmt.Errorf("%w: snapshot %d removed %s", errConversionOverlap, s.SnapshotID, df.FilePath())
				case e.Status() == ice.EntryStatusDELETED && df.ContentType() == ice.EntryContentEqDeletes && gone:
					return fmt.Errorf("%w: snapshot %d removed equality deletes %s", errConversionOverlap, s.SnapshotID, df.FilePath())
				case e.Status() == ice.EntryStatusADDED && df.ContentType() == ice.EntryContentPosDeletes && c.v3:
					ref := df.ReferencedDataFile()
					if ref == nil {
						return fmt.Errorf("%w: snapshot %d added position deletes %s of no one file", errConversionOverlap,
							s.SnapshotID, df.FilePath())
					}
					if _, ok := c.targets[*ref]; ok {
						return fmt.Errorf("%w: snapshot %d added deletes on %s", errConversionOverlap, s.SnapshotID, *ref)
					}
				}
			}
		}
	}
	return nil
}

// removeFiles removes the delete files the conversion wrote (its commit was not made).
func (c *conversion) removeFiles(ctx context.Context, tbl *table.Table) {
	fs, err := tbl.FS(ctx)
	if err != nil {
		return
	}
	seen := map[string]bool{} // v3: the vectors share one Puffin file
	for _, f := range c.added {
		if p := f.FilePath(); !seen[p] {
			seen[p] = true
			_ = fs.Remove(p)
		}
	}
}
