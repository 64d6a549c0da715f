package iceberg

import (
	"context"
	"strconv"

	"github.com/apache/iceberg-go/table"
)

// maintain keeps metadata bounded: snapshot expiry by count (and by age when asked) and periodic manifest
// rewriting. It runs in the commit loop between runs, so it never races the writer's own commits; a failure is
// logged and retried at a later commit, since no data depends on it.
func (w *Writer) maintain(commits int64) {
	tbl := w.view.table()
	if tbl == nil {
		return
	}
	ctx := w.pipe.ctx
	keep := w.opts.keepSnapshots
	if keep > 0 || w.opts.expireAge > 0 {
		n := len(tbl.Metadata().Snapshots())
		// Expire in steps of half the kept count: each expiry reads every retained manifest list, so fewer,
		// larger steps cost less in total.
		slack := max(10, keep/2)
		if (keep > 0 && n > keep+slack) || (w.opts.expireAge > 0 && commits%50 == 0) {
			w.expire(ctx, tbl)
		}
	}
	if every := w.opts.rewriteEvery; every > 0 && commits%int64(every) == 0 {
		tbl = w.view.table()
		w.runMaintenance(ctx, tbl, "rewrite manifests", func(tx *table.Transaction) error {
			_, err := tx.RewriteManifests(ctx)
			return err
		}, true)
	}
}

// expire removes snapshots beyond the retention and deletes the files only they referenced.
//
// iceberg-go's cleanup reads every entry of every retained manifest to find data files that became garbage,
// which grows with the table. When every expired snapshot only added files (no data or delete file removed),
// no data file can have become garbage, so the writer deletes just the manifest lists and manifests that no
// retained snapshot references, reading manifest lists only; otherwise it runs iceberg-go's full cleanup.
func (w *Writer) expire(ctx context.Context, tbl *table.Table) {
	var opts []table.ExpireSnapshotsOpt
	if w.opts.keepSnapshots > 0 {
		opts = append(opts, table.WithRetainLast(w.opts.keepSnapshots))
	}
	if w.opts.expireAge > 0 {
		opts = append(opts, table.WithOlderThan(w.opts.expireAge))
	} else {
		opts = append(opts, table.WithOlderThan(0))
	}
	build := func(full bool) func(tx *table.Transaction) error {
		return func(tx *table.Transaction) error {
			if err := refreshMirrors(tx, tbl.Metadata(), w.opts.branch); err != nil {
				return err
			}
			return tx.ExpireSnapshots(append(opts, table.WithPostCommit(full))...)
		}
	}
	// Stage once to see what would expire.
	probe := tbl.NewTransactionOnBranch(w.opts.branch)
	if err := build(false)(probe); err != nil {
		w.log.Warn("iceberg: maintenance skipped", "what", "expire snapshots", "table", w.ident, "err", err)
		return
	}
	staged, err := probe.StagedTable()
	if err != nil {
		return
	}
	var expired []*table.Snapshot
	for i := range tbl.Metadata().Snapshots() {
		s := &tbl.Metadata().Snapshots()[i]
		if staged.Metadata().SnapshotByID(s.SnapshotID) == nil {
			expired = append(expired, s)
		}
	}
	if len(expired) == 0 {
		return
	}
	// A data file added by an expired snapshot and removed by a retained one became garbage too: the cheap
	// path only holds when no snapshot, expired or retained, removed files.
	var all []*table.Snapshot
	for i := range tbl.Metadata().Snapshots() {
		all = append(all, &tbl.Metadata().Snapshots()[i])
	}
	full := !onlyAdded(all)
	post := w.runMaintenance(ctx, tbl, "expire snapshots", build(full), full)
	if post == nil || full {
		return
	}
	w.deleteUnreferencedManifests(ctx, tbl, post, expired)
}

// onlyAdded reports whether every snapshot only added files.
func onlyAdded(snaps []*table.Snapshot) bool {
	for _, s := range snaps {
		if s.Summary == nil {
			return false
		}
		for _, k := range []string{"deleted-data-files", "removed-delete-files", "removed-equality-delete-files",
			"removed-position-delete-files", "removed-dvs", "deleted-records"} {
			if v, ok := s.Summary.Properties[k]; ok {
				if n, _ := strconv.ParseInt(v, 10, 64); n != 0 {
					return false
				}
			}
		}
	}
	return true
}

// deleteUnreferencedManifests deletes the manifest lists of expired snapshots and the manifests that only
// they referenced.
func (w *Writer) deleteUnreferencedManifests(ctx context.Context, pre, post *table.Table, expired []*table.Snapshot) {
	if !post.Properties().GetBool(table.GCEnabledKey, table.GCEnabledDefault) {
		return
	}
	fs, err := post.FS(ctx)
	if err != nil {
		return
	}
	retained := map[string]bool{}
	for _, s := range post.Metadata().Snapshots() {
		mans, err := s.Manifests(fs)
		if err != nil {
			w.log.Warn("iceberg: expiry cleanup skipped", "table", w.ident, "err", err)
			return
		}
		for _, m := range mans {
			retained[m.FilePath()] = true
		}
	}
	drop := map[string]bool{}
	for _, s := range expired {
		drop[s.ManifestList] = true
		mans, err := s.Manifests(fs)
		if err != nil {
			continue // already gone
		}
		for _, m := range mans {
			if !retained[m.FilePath()] {
				drop[m.FilePath()] = true
			}
		}
	}
	for p := range drop {
		_ = fs.Remove(p)
	}
}

// runMaintenance commits one maintenance transaction and returns the table it left (nil when not applied).
func (w *Writer) runMaintenance(ctx context.Context, tbl *table.Table, what string, build func(*table.Transaction) error, hooks bool) *table.Table {
	tx := tbl.NewTransactionOnBranch(w.opts.branch)
	if err := build(tx); err != nil {
		w.log.Warn("iceberg: maintenance skipped", "what", what, "table", w.ident, "err", err)
		return nil
	}
	tc, err := tx.TableCommit()
	if err != nil || len(tc.Updates) == 0 {
		return nil
	}
	meta, loc, err := w.cat.CommitTable(ctx, w.ident, tc.Requirements, tc.Updates)
	if err != nil {
		// A conflict leaves the table as it was; the next due commit tries again.
		w.log.Info("iceberg: maintenance not applied", "what", what, "table", w.ident, "err", err)
		return nil
	}
	next := w.tables.derive(tbl, meta, loc, w.cat)
	updates := tc.Updates
	if !hooks {
		updates = nil
	}
	postCommit(ctx, w.log, tbl, next, updates)
	if w.defaultC != nil {
		w.defaultC.setLatest(w.ident, next)
	}
	_ = w.view.set(next)
	return next
}
