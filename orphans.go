package iceberg

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/icewriter/iceberg/internal/maintain"
	"github.com/icewriter/iceberg/internal/pipeline"
	"github.com/icewriter/iceberg/internal/redact"
)

// DefaultOrphanOlderThan is how old an unreferenced file must be before RemoveOrphanFiles deletes it.
const DefaultOrphanOlderThan = 24 * time.Hour

// OrphanOption configures RemoveOrphanFiles.
type OrphanOption func(*orphanOptions)

type orphanOptions struct {
	olderThan time.Duration
	dryRun    bool
	location  string
}

// OrphanOlderThan sets the safety window: only files whose last modification (the end of their upload) is
// older than d are deleted; a Writer's own sweep takes its age from WithOrphanOlderThan. Default:
// DefaultOrphanOlderThan (24 hours; Spark's remove_orphan_files defaults to 3 days). A writer uploads its files
// before the commit that references them, so a file younger than every commit in progress may be one a writer
// (this library's or any other engine's) is about to commit: the window must exceed the longest time a writer
// holds an uploaded file uncommitted (a commit with its retries, WithCommitTimeout; with WithCheckpoints, the
// time from a file's upload to the checkpoint that commits it). Zero deletes every unreferenced file, in-flight
// ones included: use it only on a table nothing writes to.
func OrphanOlderThan(d time.Duration) OrphanOption { return func(o *orphanOptions) { o.olderThan = d } }

// OrphanDryRun lists the orphan files without deleting them. Default: off.
func OrphanDryRun() OrphanOption { return func(o *orphanOptions) { o.dryRun = true } }

// OrphanLocation lists uri instead of the table's data location. Default: the data location
// (write.data.path, else the table location's data folder), which RemoveOrphanFiles refuses to list when it
// lies outside the table's location (other tables may keep their files there): naming it here says it does
// not. Files under the table's metadata location are never removed.
func OrphanLocation(uri string) OrphanOption { return func(o *orphanOptions) { o.location = uri } }

// OrphanReport says what RemoveOrphanFiles found and did.
type OrphanReport = maintain.OrphanReport

// RemoveOrphanFiles deletes the files under a table's data location that the table does not reference and
// that are older than a safety window (OrphanOlderThan, default 24 hours), as Spark's remove_orphan_files
// does. Any table works, whoever writes it. A writer killed between uploading files and committing them leaves
// such files behind; nothing else ever deletes them.
//
// A file is referenced when the table's current metadata file or one of its metadata log names it as a
// metadata file, statistics or partition-statistics file, or when ANY snapshot in the metadata (every
// branch's and tag's history, not only the main branch's) names it as a manifest list, a manifest, a data
// file, a delete file (deletion vectors included) or the data file of a deletion vector; manifest entries
// that record a deletion do not count (the snapshot before still does, while it is kept). Paths are compared
// without their scheme and authority, and both escaped and unescaped, so that a file referenced under another
// spelling is kept rather than deleted. Files under the metadata location are never removed.
//
// The files are listed through the table's file IO (package storage: one flat prefix listing of the bucket);
// a file IO that cannot list fails with an error that wraps storage.ErrNotListable and names its type.
// Deletion is best effort: the report names what was deleted, and the error the files that were not.
func RemoveOrphanFiles(ctx context.Context, cat catalog.Catalog, ident table.Identifier, opts ...OrphanOption) (OrphanReport, error) {
	o := orphanOptions{olderThan: DefaultOrphanOlderThan}
	for _, f := range opts {
		f(&o)
	}
	if o.olderThan < 0 {
		return OrphanReport{}, optionErr("OrphanOlderThan", "must not be negative, got %s", o.olderThan)
	}
	cat = redact.WrapCatalog(cat, nil)
	red := redact.RedactorOf(cat)
	fail := func(rep OrphanReport, err error) (OrphanReport, error) {
		return rep, red.Error(fmt.Errorf("iceberg: remove orphan files of %v: %w", ident, err))
	}
	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		return fail(OrphanReport{}, err)
	}
	loc := o.location
	if loc == "" {
		loc = maintain.DataLocation(tbl)
		if !maintain.Under(loc, tbl.Location()) {
			return fail(OrphanReport{}, fmt.Errorf("the data location %s is outside the table location %s, where "+
				"other tables may keep files: name it with OrphanLocation to list it anyway", loc, tbl.Location()))
		}
	}
	rep, err := maintain.RemoveOrphans(ctx, tbl, maintain.OrphanScan{Location: loc, Cutoff: time.Now().Add(-o.olderThan),
		DryRun: o.dryRun})
	if err != nil {
		return fail(rep, err)
	}
	return rep, nil
}

// DefaultWriterOrphanOlderThan is how old a file a writer ID left uncommitted must be before a NewWriter with
// that ID removes it (WithOrphanOlderThan).
const DefaultWriterOrphanOlderThan = time.Hour

// DefaultOrphanWindow is DefaultWriterOrphanOlderThan.
//
// Deprecated: use DefaultWriterOrphanOlderThan.
const DefaultOrphanWindow = DefaultWriterOrphanOlderThan

// orphanSweepTimeout bounds the sweep NewWriter starts.
const orphanSweepTimeout = 10 * time.Minute

// ownFiles owns the files of the writer's own ID: their names (names marks each with the ID and the epoch the
// writer holds; nil for a random ID, whose files get random names) and the removal of the ones the ID's earlier
// epochs left uncommitted, which NewWriter starts (sweep; nil when none runs). The file encoder and the key
// stage name their files through names.
type ownFiles struct {
	env    *writerEnv
	names  *fileNamer
	window time.Duration // WithOrphanOlderThan
	sweep  *orphanSweep
}

// newOwnFiles names the files of env's writer ID on tbl, once the fence set the epoch it holds.
func newOwnFiles(env *writerEnv, tbl *table.Table, window time.Duration) *ownFiles {
	o := &ownFiles{env: env, window: window}
	if env.stableID {
		o.names = newFileNamer(tbl.Metadata().TableUUID(), env.id, env.epoch)
	}
	return o
}

// orphanSweep is the removal of a writer ID's orphans that NewWriter starts on a goroutine of its own
// (ownFiles.sweepOrphans). It ends when it is done, after orphanSweepTimeout, or when the writer stops: Close
// and Abort cancel it and wait for it (within their ctx). A writer closed first leaves the rest to the next
// NewWriter.
type orphanSweep struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// startSweep starts the removal of the ID's orphans on tbl, the table as the fence left it: only for a writer
// ID with marked file names and a positive window.
func (o *ownFiles) startSweep(parent context.Context, tbl *table.Table) {
	if o.names == nil || o.window <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(parent, orphanSweepTimeout)
	s := &orphanSweep{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer cancel()
		o.sweepOrphans(ctx, tbl)
	}()
	o.sweep = s
}

// stop cancels the sweep and waits for it to return, or for ctx to end.
func (o *ownFiles) stop(ctx context.Context) {
	if o.sweep == nil {
		return
	}
	o.sweep.cancel()
	pipeline.WaitOr(ctx, o.sweep.done)
}

// sweepOrphans deletes the files this writer ID wrote in an earlier epoch that no snapshot of tbl (the table
// as the fence left it) references and that are older than WithOrphanOlderThan. Errors are logged, never
// returned: the writer's work does not depend on it.
//
// Why this is safe: such a file carries the writer ID's owner mark and an earlier epoch in its name
// (fileNamer), so it was written by this table's writer with this ID, by a process the fence of NewWriter
// took the ID over from. From that fence on, no run of an earlier epoch can commit: every commit of a fenced
// epoch (runs, compactions, maintenance) fails its requirement on the branch head the fence moved and then
// finds the newer epoch (ErrFenced), and the catalog committer refuses any run whose epoch is older than the
// table's (NewCatalogCommitter, for a coordinator, too). tbl is the metadata as the fence left it, so every
// commit of an earlier epoch that ever landed is in it, and a file it does not reference never will be
// referenced: a file of another writer is only ever referenced once committed. Files of the current epoch are
// never candidates. The window is a second guard only (it also leaves a zombie's newest files to the next
// sweep); it is not what makes the sweep safe, so it is shorter than RemoveOrphanFiles'. A writer with
// WithCommitter does not sweep: a committer of its own may not refuse a fenced epoch's runs.
//
// What it costs: one listing of the data location (storage.List: a flat, paginated prefix listing) per
// NewWriter, that is once per epoch; the table's manifests are read only when the listing found a candidate,
// that is after a crash.
func (o *ownFiles) sweepOrphans(ctx context.Context, tbl *table.Table) {
	rep, err := maintain.RemoveOrphans(ctx, tbl, maintain.OrphanScan{Location: maintain.DataLocation(tbl),
		Cutoff: time.Now().Add(-o.window), Only: o.names.earlier})
	if len(rep.Deleted) > 0 {
		o.env.log.Info("iceberg: removed orphan files", "table", o.env.ident, "writer", o.env.id, "files", len(rep.Deleted),
			"bytes", rep.Bytes)
	}
	if err != nil {
		o.env.log.Warn("iceberg: orphan file removal", "table", o.env.ident, "writer", o.env.id, "err", err)
	}
}
