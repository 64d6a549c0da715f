package iceberg

import (
	"context"

	"github.com/apache/iceberg-go/table"
)

// maintain keeps metadata bounded: snapshot expiry by count (and by age when asked) and periodic manifest
// rewriting. It runs in the commit loop between runs, so it never races the writer's own commits; a failure is
// logged and retried at a later commit, since no data depends on it.
func (w *Writer) maintain(commits int64) {
	w.mu.Lock()
	tbl := w.tbl
	w.mu.Unlock()
	if tbl == nil {
		return
	}
	ctx := w.ctx
	keep := w.opts.keepSnapshots
	if keep > 0 || w.opts.expireAge > 0 {
		n := len(tbl.Metadata().Snapshots())
		slack := max(10, keep/10)
		if (keep > 0 && n > keep+slack) || (w.opts.expireAge > 0 && commits%50 == 0) {
			opts := []table.ExpireSnapshotsOpt{}
			if keep > 0 {
				opts = append(opts, table.WithRetainLast(keep))
			}
			if w.opts.expireAge > 0 {
				opts = append(opts, table.WithOlderThan(w.opts.expireAge))
			} else {
				opts = append(opts, table.WithOlderThan(0))
			}
			w.runMaintenance(ctx, tbl, "expire snapshots", func(tx *table.Transaction) error {
				if err := refreshMirrors(tx, tbl.Metadata(), w.opts.branch); err != nil {
					return err
				}
				return tx.ExpireSnapshots(opts...)
			})
		}
	}
	if every := w.opts.rewriteEvery; every > 0 && commits%int64(every) == 0 {
		w.mu.Lock()
		tbl = w.tbl
		w.mu.Unlock()
		w.runMaintenance(ctx, tbl, "rewrite manifests", func(tx *table.Transaction) error {
			_, err := tx.RewriteManifests(ctx)
			return err
		})
	}
}

func (w *Writer) runMaintenance(ctx context.Context, tbl *table.Table, what string, build func(*table.Transaction) error) {
	tx := tbl.NewTransactionOnBranch(w.opts.branch)
	if err := build(tx); err != nil {
		w.log.Warn("iceberg: maintenance skipped", "what", what, "table", w.ident, "err", err)
		return
	}
	tc, err := tx.TableCommit()
	if err != nil || len(tc.Updates) == 0 {
		return
	}
	meta, loc, err := w.cat.CommitTable(ctx, w.ident, tc.Requirements, tc.Updates)
	if err != nil {
		// A conflict leaves the table as it was; the next due commit tries again.
		w.log.Info("iceberg: maintenance not applied", "what", what, "table", w.ident, "err", err)
		return
	}
	next := table.New(w.ident, meta, loc, tbl.FS, w.cat)
	postCommit(ctx, w.log, tbl, next, tc.Updates)
	if w.defaultC != nil {
		w.defaultC.setLatest(w.ident, next)
	}
	_ = w.setTable(next)
}
