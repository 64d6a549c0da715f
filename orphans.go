package iceberg

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/icewriter/iceberg/internal/pipeline"

	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"golang.org/x/sync/errgroup"

	"github.com/icewriter/iceberg/internal/redact"
	"github.com/icewriter/iceberg/storage"
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
type OrphanReport struct {
	Location string // the location listed
	Listed   int    // files found under it (outside the metadata location)
	Recent   int    // files younger than the safety window, left alone referenced or not
	// Orphans are the files older than the window that no snapshot or metadata file references, sorted; with
	// OrphanDryRun they are only listed.
	Orphans []string
	Bytes   int64    // the orphans' total size
	Deleted []string // the orphans deleted (none in a dry run)
}

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
		loc = dataLocation(tbl)
		if !under(loc, tbl.Location()) {
			return fail(OrphanReport{}, fmt.Errorf("the data location %s is outside the table location %s, where "+
				"other tables may keep files: name it with OrphanLocation to list it anyway", loc, tbl.Location()))
		}
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return fail(OrphanReport{}, err)
	}
	scan := orphanScan{tbl: tbl, fs: fs, location: loc, cutoff: time.Now().Add(-o.olderThan)}
	rep, err := scan.run(ctx)
	if err == nil && !o.dryRun {
		rep.Deleted, err = deleteFiles(ctx, fs, rep.Orphans)
	}
	if err != nil {
		return fail(rep, err)
	}
	return rep, nil
}

// dataLocation is where the table's data files go: write.data.path, else the table location's data folder
// (iceberg-go's location providers, the object-store one included, put data files under it).
func dataLocation(tbl *table.Table) string {
	if p, ok := tbl.Properties()[table.WriteDataPathKey]; ok && p != "" {
		return strings.TrimSuffix(p, "/")
	}
	return strings.TrimSuffix(tbl.Location(), "/") + "/data"
}

// metadataLocation is where the table's metadata files go: write.metadata.path, else the metadata folder.
func metadataLocation(tbl *table.Table) string {
	if p, ok := tbl.Properties()[table.WriteMetadataPathKey]; ok && p != "" {
		return strings.TrimSuffix(p, "/")
	}
	return strings.TrimSuffix(tbl.Location(), "/") + "/metadata"
}

// under reports whether location p is dir or lies below it, compared as pathKey does.
func under(p, dir string) bool {
	k, d := pathKey(p), pathKey(dir)
	return k == d || strings.HasPrefix(k, strings.TrimSuffix(d, "/")+"/")
}

// orphanScan finds the unreferenced files under a location that are older than a cutoff.
type orphanScan struct {
	tbl      *table.Table // the metadata whose references count
	fs       iceio.IO
	location string
	cutoff   time.Time
	// only, when set, restricts the candidates to the files it accepts (a writer ID's own, sweepOrphans).
	only func(path string) bool
}

// run lists the location, then reads the table's references only when some listed file could be an orphan.
func (s *orphanScan) run(ctx context.Context) (OrphanReport, error) {
	rep := OrphanReport{Location: s.location}
	meta := metadataLocation(s.tbl)
	var old []storage.FileInfo
	err := storage.List(ctx, s.fs, s.location, func(f storage.FileInfo) error {
		if under(f.Path, meta) {
			return nil // a metadata file (a data location that holds the metadata folder): never a candidate
		}
		rep.Listed++
		switch {
		case s.only != nil && !s.only(f.Path):
		case !f.ModTime.Before(s.cutoff):
			rep.Recent++
		default:
			old = append(old, f)
		}
		return nil
	})
	if err != nil || len(old) == 0 {
		return rep, err
	}
	refs, err := referencedFiles(ctx, s.tbl, s.fs)
	if err != nil {
		return rep, err
	}
	for _, f := range old {
		if !refs.has(f.Path) {
			rep.Orphans = append(rep.Orphans, f.Path)
			rep.Bytes += f.Size
		}
	}
	slices.Sort(rep.Orphans)
	return rep, nil
}

// refSet holds referenced locations by pathKey, escaped and unescaped.
type refSet map[string]struct{}

func (r refSet) add(p string) {
	if p == "" {
		return
	}
	for _, k := range pathKeys(p) {
		r[k] = struct{}{}
	}
}

func (r refSet) has(p string) bool {
	for _, k := range pathKeys(p) {
		if _, ok := r[k]; ok {
			return true
		}
	}
	return false
}

// pathKeys are the keys a location is compared by: pathKey, and pathKey of its unescaped form when that
// differs (a writer may have recorded a path escaped that the store lists unescaped, or the reverse).
func pathKeys(p string) []string {
	k := pathKey(p)
	if u, err := url.PathUnescape(k); err == nil && u != k {
		return []string{k, pathKey(u)}
	}
	return []string{k}
}

// pathKey is a location without its scheme and authority, cleaned: s3://bucket/a//b and s3a://other/a/b both
// become /a/b, file:///w/t and /w/t both /w/t. Two files that differ only there compare equal, which can only
// make a file look referenced (kept), never the reverse.
func pathKey(p string) string {
	if i := strings.Index(p, "://"); i > 0 {
		rest := p[i+3:]
		if j := strings.IndexByte(rest, '/'); j >= 0 {
			p = rest[j:]
		} else {
			p = ""
		}
	} else if i := strings.IndexByte(p, ':'); i > 0 && !strings.Contains(p[:i], "/") {
		p = p[i+1:] // file:/w/t
	}
	return path.Clean("/" + p)
}

// manifestReaders bounds the manifests read at once.
const manifestReaders = 8

// referencedFiles collects every location the table's metadata references (see RemoveOrphanFiles), through
// iceberg-go's readers of manifest lists and manifests.
func referencedFiles(ctx context.Context, tbl *table.Table, fs iceio.IO) (refSet, error) {
	meta := tbl.Metadata()
	refs := refSet{}
	refs.add(tbl.MetadataLocation())
	for e := range meta.PreviousFiles() {
		refs.add(e.MetadataFile)
	}
	for s := range meta.Statistics() {
		refs.add(s.StatisticsPath)
	}
	for s := range meta.PartitionStatistics() {
		refs.add(s.StatisticsPath)
	}
	manifests := map[string]ice.ManifestFile{}
	for _, snap := range meta.Snapshots() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		refs.add(snap.ManifestList)
		mans, err := snap.Manifests(fs)
		if err != nil {
			return nil, fmt.Errorf("read the manifest list of snapshot %d: %w", snap.SnapshotID, err)
		}
		for _, m := range mans {
			manifests[m.FilePath()] = m
			refs.add(m.FilePath())
		}
	}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(manifestReaders)
	for p, m := range manifests {
		g.Go(func() error {
			var files []string
			for e, err := range m.Entries(fs, true) {
				if err == nil {
					err = gctx.Err()
				}
				if err != nil {
					return fmt.Errorf("read manifest %s: %w", p, err)
				}
				files = append(files, e.DataFile().FilePath())
				if ref := e.DataFile().ReferencedDataFile(); ref != nil {
					files = append(files, *ref)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for _, f := range files {
				refs.add(f)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return refs, nil
}

// deleteFiles deletes paths, in bulk where the file IO can, and returns those deleted; the error names the
// rest.
func deleteFiles(ctx context.Context, fs iceio.IO, paths []string) ([]string, error) {
	if len(paths) == 0 {
		return nil, nil
	}
	if b, ok := fs.(iceio.BulkRemovableIO); ok {
		return b.DeleteFiles(ctx, paths)
	}
	var deleted []string
	var errs []error
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		if err := fs.Remove(p); err != nil {
			errs = append(errs, fmt.Errorf("delete %s: %w", p, err))
			continue
		}
		deleted = append(deleted, p)
	}
	return deleted, errors.Join(errs...)
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
	fs, err := tbl.FS(ctx)
	var rep OrphanReport
	if err == nil {
		scan := orphanScan{tbl: tbl, fs: fs, location: dataLocation(tbl),
			cutoff: time.Now().Add(-o.window), only: o.names.earlier}
		rep, err = scan.run(ctx)
	}
	if err == nil {
		rep.Deleted, err = deleteFiles(ctx, fs, rep.Orphans)
	}
	if len(rep.Deleted) > 0 {
		o.env.log.Info("iceberg: removed orphan files", "table", o.env.ident, "writer", o.env.id, "files", len(rep.Deleted),
			"bytes", rep.Bytes)
	}
	if err != nil {
		o.env.log.Warn("iceberg: orphan file removal", "table", o.env.ident, "writer", o.env.id, "err", err)
	}
}
