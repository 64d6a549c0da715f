package maintain

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

	ice "github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"golang.org/x/sync/errgroup"

	"github.com/icewriter/iceberg/storage"
)

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

// OrphanScan names the files RemoveOrphans may delete: those under Location, last modified before Cutoff, that
// Only accepts (nil: all).
type OrphanScan struct {
	Location string
	Cutoff   time.Time
	// Only, when set, restricts the candidates to the files it accepts (a writer ID's own files of earlier
	// epochs, for the sweep a NewWriter starts).
	Only   func(path string) bool
	DryRun bool // list the orphans, delete nothing
}

// RemoveOrphans lists s.Location through tbl's file IO and deletes the files the scan names that tbl does not
// reference (see the root's RemoveOrphanFiles for what counts as a reference). Files under the table's metadata
// location are never candidates. Deletion is best effort: the report names what was deleted, and the error the
// files that were not.
func RemoveOrphans(ctx context.Context, tbl *table.Table, s OrphanScan) (OrphanReport, error) {
	fs, err := tbl.FS(ctx)
	if err != nil {
		return OrphanReport{}, err
	}
	rep, err := orphans(ctx, tbl, fs, s)
	if err == nil && !s.DryRun {
		rep.Deleted, err = deleteFiles(ctx, fs, rep.Orphans)
	}
	return rep, err
}

// DataLocation is where the table's data files go: write.data.path, else the table location's data folder
// (iceberg-go's location providers, the object-store one included, put data files under it).
func DataLocation(tbl *table.Table) string {
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

// Under reports whether location p is dir or lies below it, compared without scheme and authority (pathKey).
func Under(p, dir string) bool {
	k, d := pathKey(p), pathKey(dir)
	return k == d || strings.HasPrefix(k, strings.TrimSuffix(d, "/")+"/")
}

// orphans lists the scan's location, then reads the table's references only when some listed file could be an
// orphan.
func orphans(ctx context.Context, tbl *table.Table, fs iceio.IO, s OrphanScan) (OrphanReport, error) {
	rep := OrphanReport{Location: s.Location}
	meta := metadataLocation(tbl)
	var old []storage.FileInfo
	err := storage.List(ctx, fs, s.Location, func(f storage.FileInfo) error {
		if Under(f.Path, meta) {
			return nil // a metadata file (a data location that holds the metadata folder): never a candidate
		}
		rep.Listed++
		switch {
		case s.Only != nil && !s.Only(f.Path):
		case !f.ModTime.Before(s.Cutoff):
			rep.Recent++
		default:
			old = append(old, f)
		}
		return nil
	})
	if err != nil || len(old) == 0 {
		return rep, err
	}
	refs, err := referencedFiles(ctx, tbl, fs)
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
