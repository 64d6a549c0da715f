package maintain

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/icewriter/iceberg/internal/commit"
)

// Maintainer is the writer's one maintenance scheduler: snapshot expiry (by count, and by age when asked),
// manifest rewriting, automatic compaction after commits with delete files, and small-file compaction. The
// commit loop calls AfterCommit after each of its commits, inside the commit queue, so maintenance never races
// the writer's own commits; compactions and conversions of equality deletes only start there and run off the
// commit path, one at a time (compactor). Its commits go through the writer's transaction helper (Env.Commit):
// retried, fenced and installed like every other. A failure is logged and tried again when next due, since no
// data depends on it; a fenced writer stops (Env.Commit fails it), and so does its maintenance.
type Maintainer struct {
	env    Env
	cfg    Config
	runner *compactor // the background passes and the cleanups after expiry

	// The start of a background compaction or conversion (false: one is running, or the writer is closing),
	// and a file cleanup off the commit path: the runner's, replaced by tests of the schedule.
	compact func(smallOnly bool) (started bool)
	convert func() (started bool)
	cleanup func(func(ctx context.Context))

	commits      int64      // commits so far
	deltaCommits int        // commits with delete files since the last automatic compaction
	waiting      []passKind // background passes due but not started yet (another one ran), the oldest first
	// rewriteDue: a background compaction committed since the last manifest rewrite. Its replace snapshot
	// leaves the manifests it merged holding an entry for every file it removed, which each scan decodes and
	// skips (BenchmarkReadAfterUpserts measures a reader's cost). Set off the commit path, read by AfterCommit.
	rewriteDue atomic.Bool
}

// passKind is a background pass of the maintenance.
type passKind int

const (
	passConvert passKind = iota
	passCompact
	passSmallFiles
)

// maintainAttempts bounds the attempts of one maintenance commit: it holds the commit queue, and whatever is
// not done now is done when next due. A second attempt is what finds a writer fenced meanwhile.
const maintainAttempts = 3

// New schedules a writer's maintenance by cfg, the writer's resolved options.
func New(env Env, cfg Config) *Maintainer {
	m := &Maintainer{env: env, cfg: cfg, runner: newCompactor(env.Log, env.Ident)}
	m.cleanup = m.runner.spawn
	// Off the commit path (compactor): the pass reads and writes while the loop commits on.
	m.convert = func() bool {
		return m.runner.start("equality delete conversion", func(ctx context.Context) error {
			_, err := m.convertBackground(ctx)
			return err
		})
	}
	m.compact = func(smallOnly bool) bool {
		return m.runner.start("compaction", func(ctx context.Context) error {
			start := time.Now()
			res, err := m.compactBackground(ctx, smallOnly)
			if err == nil && res.SnapshotID != 0 {
				m.rewriteDue.Store(true) // before the hook: a commit that follows its event rewrites
			}
			m.env.OnCompaction(start, true, smallOnly, res, err)
			return err
		}, "small_only", smallOnly)
	}
	return m
}

// Stop cancels a background pass still reading or writing and waits for it, and for the cleanups, to end.
func (m *Maintainer) Stop() { m.runner.stop() }

// PassDone returns a channel closed when the running background pass ends (closed already when none runs).
func (m *Maintainer) PassDone() <-chan struct{} { return m.runner.passDone() }

// AfterCommit runs the maintenance due after a commit of the writer that added deleteFiles delete files. Each
// step runs on the table the previous one left. Metadata first: expiry once the snapshots exceed the kept count
// by a slack of max(10, keep/2) (expiry reads every retained manifest list, so fewer, larger steps cost less in
// total) or, with an age limit, every 50 commits; manifest rewriting every rewriteEvery commits and after each
// background compaction that committed (rewriteDue; not when rewriteEvery is 0); the conversion of
// equality deletes every convertEvery commits while the table holds any (anyone's). Then at most one compaction:
// the automatic one once autoCompact commits added delete files, else the small-file one every smallFiles
// commits. The conversion and the compactions run in the background, one at a time (compactor): one due while
// another runs waits, and starts after a later commit once the runner is free, the one that waited longest
// first, so that frequent conversions do not starve compactions.
func (m *Maintainer) AfterCommit(ctx context.Context, deleteFiles int) {
	m.commits++
	if m.expiryDue() && m.stop("expire snapshots", m.expire(ctx)) {
		return
	}
	afterPass := m.rewriteDue.Swap(false)
	if m.cfg.RewriteEvery > 0 && (afterPass || m.commits%int64(m.cfg.RewriteEvery) == 0) &&
		m.stop("rewrite manifests", m.rewriteManifests(ctx)) {
		return
	}
	if m.cfg.ConvertEvery > 0 && m.commits%int64(m.cfg.ConvertEvery) == 0 && hasEqualityDeletes(m.env.Table(), m.env.Branch) {
		m.due(passConvert)
	}
	switch {
	case m.cfg.AutoCompact > 0 && deleteFiles > 0 && m.deltaCommits+1 >= m.cfg.AutoCompact:
		m.deltaCommits = 0
		m.due(passCompact)
	case m.cfg.AutoCompact > 0 && deleteFiles > 0:
		m.deltaCommits++
		fallthrough
	default:
		if m.cfg.SmallFiles > 0 && m.commits%int64(m.cfg.SmallFiles) == 0 {
			m.due(passSmallFiles)
		}
	}
	for len(m.waiting) > 0 && m.start(m.waiting[0]) {
		m.waiting = m.waiting[1:]
	}
}

// due queues a background pass unless it waits already; an automatic compaction covers a small-file one.
func (m *Maintainer) due(k passKind) {
	for i, w := range m.waiting {
		switch {
		case w == k, w == passCompact && k == passSmallFiles:
			return
		case w == passSmallFiles && k == passCompact:
			m.waiting[i] = passCompact
			return
		}
	}
	m.waiting = append(m.waiting, k)
}

// start starts a background pass, reporting whether it did (false: one is running, or the writer is closing).
func (m *Maintainer) start(k passKind) bool {
	switch k {
	case passConvert:
		return m.convert()
	case passCompact:
		return m.compact(false)
	default:
		return m.compact(true)
	}
}

// stop logs a failed step and reports whether maintenance must stop: the writer was fenced (and stopped).
func (m *Maintainer) stop(what string, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, commit.ErrFenced):
		return true // the writer stopped and said so
	}
	m.env.Log.Warn("iceberg: maintenance not done; it runs again when next due", "what", what, "table", m.env.Ident, "err", err)
	return false
}

func (m *Maintainer) expiryDue() bool {
	if m.cfg.ExpireAge > 0 && m.commits%50 == 0 {
		return true
	}
	return m.cfg.Keep > 0 && len(m.env.Table().Metadata().Snapshots()) > m.cfg.Keep+max(10, m.cfg.Keep/2)
}

// expire removes snapshots beyond the retention and deletes the files only they referenced.
//
// iceberg-go's cleanup reads every entry of every retained manifest to find data files that became garbage,
// which grows with the table. When every expired snapshot only added files (no data or delete file removed),
// no data file can have become garbage, so the writer deletes just the manifest lists and manifests that no
// retained snapshot references, reading manifest lists only; otherwise it runs iceberg-go's full cleanup.
func (m *Maintainer) expire(ctx context.Context) error {
	var opts []table.ExpireSnapshotsOpt
	if m.cfg.Keep > 0 {
		opts = append(opts, table.WithRetainLast(m.cfg.Keep))
	}
	if m.cfg.ExpireAge > 0 {
		opts = append(opts, table.WithOlderThan(m.cfg.ExpireAge))
	} else {
		opts = append(opts, table.WithOlderThan(0))
	}
	var expired []*table.Snapshot
	full := false
	start := time.Now()
	r, err := m.env.Commit(ctx, &commit.Op{
		What: "expire snapshots", Kind: KindExpiry, Start: m.env.Table(), MaxAttempts: maintainAttempts,
		Build: func(_ context.Context, tbl *table.Table, _ int) (*table.Transaction, error) {
			var tx *table.Transaction
			var err error
			tx, expired, full, err = m.expireTx(tbl, opts)
			return tx, err
		},
		Committed: func(_ context.Context, pre, next *table.Table) {
			// Deleting the files only the expired snapshots referenced reads every retained manifest list (and,
			// for the full cleanup, manifest): off the commit path. A file a later commit stops referencing is
			// still referenced by next's snapshots, so a cleanup racing later commits deletes nothing live.
			expired, full := expired, full
			m.cleanup(func(ctx context.Context) {
				if full {
					ids := make([]int64, len(expired))
					for i, s := range expired {
						ids[i] = s.SnapshotID
					}
					if err := table.NewRemoveSnapshotsUpdate(ids, true).PostCommit(ctx, pre, next); err != nil {
						m.env.Log.Warn("iceberg: expiry cleanup not done", "table", m.env.Ident, "err", err)
					}
				} else {
					m.deleteUnreferencedManifests(ctx, pre, next, expired)
				}
				m.deleteExpiredPositions(ctx, next, expired)
			})
		},
	})
	m.expired(start, r, len(expired), full, err)
	return err
}

// expireTx stages the expiry on tbl (nil: nothing would expire) and returns the snapshots it expires and
// whether its cleanup must be iceberg-go's full one.
func (m *Maintainer) expireTx(tbl *table.Table, opts []table.ExpireSnapshotsOpt) (*table.Transaction, []*table.Snapshot, bool, error) {
	branch := m.env.Branch
	build := func() (*table.Transaction, error) {
		tx := tbl.NewTransactionOnBranch(branch)
		if err := m.env.RefreshMirrors(tx, tbl.Metadata(), branch); err != nil {
			return nil, err
		}
		if err := commit.RefreshPositionsMirror(tx, tbl.Metadata(), branch); err != nil {
			return nil, err
		}
		// The cleanup runs after the commit, off the commit path (Maintainer.expire).
		return tx, tx.ExpireSnapshots(append(slices.Clip(opts), table.WithPostCommit(false))...)
	}
	// Stage once to see what would expire.
	probe, err := build()
	if err != nil {
		return nil, nil, false, err
	}
	staged, err := probe.StagedTable()
	if err != nil {
		return nil, nil, false, err
	}
	var expired, all []*table.Snapshot
	for i := range tbl.Metadata().Snapshots() {
		s := &tbl.Metadata().Snapshots()[i]
		all = append(all, s)
		if staged.Metadata().SnapshotByID(s.SnapshotID) == nil {
			expired = append(expired, s)
		}
	}
	if len(expired) == 0 {
		return nil, nil, false, nil
	}
	// A data file added by an expired snapshot and removed by a retained one became garbage too: the cheap
	// cleanup only holds when no snapshot, expired or retained, removed files.
	return probe, expired, !onlyAdded(all), nil
}

// rewriteManifests rewrites the table's manifests, so that manifest lists stay short (row deltas never merge
// manifests).
func (m *Maintainer) rewriteManifests(ctx context.Context) error {
	_, err := m.env.Commit(ctx, &commit.Op{
		What: "rewrite manifests", Kind: KindManifests, Start: m.env.Table(), MaxAttempts: maintainAttempts,
		Build: func(ctx context.Context, tbl *table.Table, _ int) (*table.Transaction, error) {
			tx := tbl.NewTransactionOnBranch(m.env.Branch)
			_, err := tx.RewriteManifests(ctx)
			return tx, err
		},
	})
	return err
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
func (m *Maintainer) deleteUnreferencedManifests(ctx context.Context, pre, post *table.Table, expired []*table.Snapshot) {
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
			m.env.Log.Warn("iceberg: expiry cleanup skipped", "table", m.env.Ident, "err", err)
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

// deleteExpiredPositions deletes the side files of source positions that only expired snapshots named (the
// positions mirror keeps the newest one alive: see commit.RefreshPositionsMirror).
func (m *Maintainer) deleteExpiredPositions(ctx context.Context, post *table.Table, expired []*table.Snapshot) {
	if post.Properties().GetBool(table.GCEnabledKey, table.GCEnabledDefault) {
		m.env.RemovePaths(ctx, post, commit.ExpiredPositionFiles(post.Metadata(), expired))
	}
}

// hasEqualityDeletes reports whether the branch head may hold live equality delete files: its summary says so,
// or has no count.
func hasEqualityDeletes(tbl *table.Table, branch string) bool {
	s := tbl.Metadata().SnapshotByName(branch)
	if s == nil {
		return false
	}
	v, ok := commit.SummaryProp(s, "total-equality-deletes")
	return !ok || v != "0"
}

// expired reports an expiry that started at start, when it expired snapshots or failed (n: the snapshots its
// last build would expire).
func (m *Maintainer) expired(start time.Time, r commit.Result, n int, full bool, err error) {
	if err == nil && r.How != commit.Committed {
		return
	}
	if err != nil {
		n, full = 0, false
	}
	m.env.OnExpiry(start, r, n, full, err)
}
