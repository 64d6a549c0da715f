package iceberg_test

import (
	"context"
	"fmt"
	"io/fs"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/tabletest"
	"github.com/icewriter/iceberg/storage"
)

// TestCopyOnWriteRewritesOnlyHoldingFiles: with ids shuffled across 20 files (min/max pruning useless), an
// upsert of 5 keys that sit in 5 files rewrites exactly those 5 files (iceberg-go's own copy-on-write delete
// rewrote 20 of 20 here), and the table reads back as the model says.
func TestCopyOnWriteRewritesOnlyHoldingFiles(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	for _, shuffled := range []bool{false, true} {
		t.Run(fmt.Sprintf("shuffled=%v", shuffled), func(t *testing.T) {
			w, holder, cat, ident := cowTable(t, ctx, 20, 200, shuffled)
			model := kvModel{}
			for id := int64(0); id < 4000; id++ {
				model.insert(id, id)
			}
			// 5 keys in 5 distinct files.
			var keys []int64
			files := map[int]bool{}
			for id := int64(0); len(keys) < 5; id += 7 {
				if !files[holder[id]] {
					files[holder[id]] = true
					keys = append(keys, id)
				}
			}
			vs := []int64{-1, -2, -3, -4, -5}
			for i, k := range keys {
				model.upsert(k, vs[i])
			}
			if err := w.Upsert(ctx, kvBatch(keys, vs)); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			snap := w.Table().CurrentSnapshot()
			if st := w.Stats(); st.FilesRewritten != int64(len(files)) || st.DeleteFiles != 0 {
				t.Fatalf("stats: %d files rewritten, %d delete files; want %d and 0", st.FilesRewritten, st.DeleteFiles, len(files))
			}
			if got := snap.Summary.Properties["icewriter.cow-rewritten-files"]; got != strconv.Itoa(len(files)) {
				t.Fatalf("rewrote %s files, want exactly %d (candidates %s)", got, len(files),
					snap.Summary.Properties["icewriter.cow-candidate-files"])
			}
			// A delete of a key in a file already rewritten, and of one never touched.
			model.del(keys[0])
			model.del(keys[0] + 1)
			if err := w.Delete(ctx, keyBatch([]int64{keys[0], keys[0] + 1})); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
			compareKV(t, readKV(t, cat, ident), model)
		})
	}
}

// TestCopyOnWritePrunesLargeUpsertsByKeyRange: an upsert of 300 consecutive keys (more than the 200 values
// iceberg-go's statistics pruning evaluates in a set) makes only the 2 files whose id ranges hold them
// candidates, not all 20 of the table, and the table reads back as the model says.
func TestCopyOnWritePrunesLargeUpsertsByKeyRange(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	w, holder, cat, ident := cowTable(t, ctx, 20, 200, false)
	model := kvModel{}
	for id := int64(0); id < 4000; id++ {
		model.insert(id, id)
	}
	var keys, vs []int64
	files := map[int]bool{}
	for id := int64(650); id < 950; id++ {
		keys, vs = append(keys, id), append(vs, -id)
		model.upsert(id, -id)
		files[holder[id]] = true
	}
	if err := w.Upsert(ctx, kvBatch(keys, vs)); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	props := w.Table().CurrentSnapshot().Summary.Properties
	want := strconv.Itoa(len(files))
	if got := props["icewriter.cow-candidate-files"]; got != want {
		t.Errorf("%s candidate files for keys in %d files of 20, want %s", got, len(files), want)
	}
	if got := props["icewriter.cow-rewritten-files"]; got != want {
		t.Errorf("rewrote %s files, want %s", got, want)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	compareKV(t, readKV(t, cat, ident), model)
}

// TestCopyOnWriteReadsEachFileOnce: a copy-on-write commit scans a candidate file twice (to confirm that it
// holds a key, then to rewrite it), but opens it, and its delete files, once: its footer is read once, and the
// rewrite reads a file up to the upload part size (storage.PartSizeKey; 8 MiB unset) whole in one read of the
// open file (readonce_internal_test.go counts those), a larger one by its column chunks. Each scan opened it
// before: 2 opens of each file, 9 GETs a commit in BenchmarkRemoteCost (the data file's end and key column
// chunk, then its end and its 6 column chunks).
func TestCopyOnWriteReadsEachFileOnce(t *testing.T) {
	t.Parallel() // see TestMain
	for _, tc := range []struct {
		name                string
		partSize            string // the table's upload part size: the largest file read whole
		wantOpens, wantRead int64  // of the rewritten data file
	}{
		{"read-whole", "", 1, 0},
		{"larger-than-the-part-size", "1024", 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			cat, _ := tabletest.CountedCatalog(t)
			ident := table.Identifier{"cow", "reads"}
			props := map[string]string{}
			if tc.partSize != "" {
				props[storage.PartSizeKey] = tc.partSize
			}
			model := kvModel{}
			// A merge-on-read writer first, for a position delete file on the table's file.
			mor, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(kvSchema, iceberg.IdentifierFields("id"),
				iceberg.FormatVersion(2), iceberg.TableProperties(props)), iceberg.WithMode(iceberg.MergeOnRead),
				iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompactionEvery(0))
			must(t, err)
			writeIDs(t, ctx, mor, model, 1000)
			upsert := func(w *iceberg.Writer, ids []int64, v int64) {
				t.Helper()
				vs := make([]int64, len(ids))
				for i, id := range ids {
					vs[i] = v
					model.upsert(id, v)
				}
				must(t, w.Upsert(ctx, kvBatch(ids, vs)))
				must(t, w.Flush(ctx))
			}
			upsert(mor, []int64{1, 2, 3}, -1)
			must(t, mor.Close(ctx))

			w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithMode(iceberg.CopyOnWrite),
				iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompactionEvery(0))
			must(t, err)
			before := map[string]table.FileScanTask{}
			for _, task := range tabletest.LiveDataFiles(t, tabletest.Load(t, cat, ident)) {
				before[task.File.FilePath()] = task
			}
			type reads struct{ opens, whole int64 }
			counts := func(files []string) []reads {
				var out []reads
				for _, f := range files {
					o, r := tabletest.FileReads(f)
					out = append(out, reads{o, r})
				}
				return out
			}
			var table0, deletes []string
			for p, task := range before {
				if task.File.Count() == 1000 {
					table0 = append(table0, p)
					for _, d := range task.DeleteFiles {
						deletes = append(deletes, d.FilePath())
					}
				}
			}
			if len(table0) != 1 || len(deletes) == 0 {
				t.Fatalf("table files of 1000 rows %v with position delete files %v: want one with some", table0, deletes)
			}
			was, wasDeletes := counts(table0), counts(deletes)
			upsert(w, []int64{500, 501}, -500)
			must(t, w.Close(ctx))
			compareKV(t, readKV(t, cat, ident), model)
			for _, task := range tabletest.LiveDataFiles(t, tabletest.Load(t, cat, ident)) {
				if task.File.FilePath() == table0[0] {
					t.Fatalf("%s holds upserted keys and was not rewritten", table0[0])
				}
			}
			now := counts(table0)[0]
			if got, want := (reads{now.opens - was[0].opens, now.whole - was[0].whole}), (reads{tc.wantOpens, tc.wantRead}); got != want {
				t.Errorf("the rewritten file was opened %d times and read whole %d times, want %d and %d",
					got.opens, got.whole, want.opens, want.whole)
			}
			for i, n := range counts(deletes) {
				if got := n.opens + n.whole - wasDeletes[i].opens - wasDeletes[i].whole; got != 1 || n.opens-wasDeletes[i].opens != 1 {
					t.Errorf("its position delete file %s was read %d times (opens %d, whole %d), want one open",
						deletes[i], got, n.opens-wasDeletes[i].opens, n.whole-wasDeletes[i].whole)
				}
			}
		})
	}
}

// TestCopyOnWriteKeepsEarlierDeletes: a row deleted by a merge-on-read delete file stays deleted when a
// copy-on-write writer later rewrites its file, and the delete files that became dead are removed.
// On v2 the earlier delete is an equality delete file, on v3 a deletion vector.
func TestCopyOnWriteKeepsEarlierDeletes(t *testing.T) {
	t.Parallel() // see TestMain
	for _, v := range []int{2, 3} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) { copyOnWriteKeepsEarlierDeletes(t, v) })
	}
}

func copyOnWriteKeepsEarlierDeletes(t *testing.T, version int) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"cow", "mixed"}
	mor, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(kvSchema, iceberg.IdentifierFields("id"),
		iceberg.FormatVersion(version)))
	if err != nil {
		t.Fatal(err)
	}
	model := kvModel{}
	ids := []int64{1, 2, 3, 4, 5, 6}
	for _, id := range ids {
		model.insert(id, id)
	}
	if err := mor.Write(ctx, kvBatch(ids, ids)); err != nil {
		t.Fatal(err)
	}
	if err := mor.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	model.del(2)
	if err := mor.Delete(ctx, keyBatch([]int64{2})); err != nil { // an equality delete file or a deletion vector
		t.Fatal(err)
	}
	if err := mor.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if tbl := tabletest.Load(t, cat, ident); tbl.CurrentSnapshot().Summary.Properties["total-delete-files"] != "1" {
		t.Fatalf("setup: %s delete files, want 1", tbl.CurrentSnapshot().Summary.Properties["total-delete-files"])
	}
	cow, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithMode(iceberg.CopyOnWrite))
	if err != nil {
		t.Fatal(err)
	}
	model.upsert(5, 50)
	if err := cow.Upsert(ctx, kvBatch([]int64{5}, []int64{50})); err != nil {
		t.Fatal(err)
	}
	if err := cow.Close(ctx); err != nil {
		t.Fatal(err)
	}
	compareKV(t, readKV(t, cat, ident), model)
	tbl := tabletest.Load(t, cat, ident)
	if n := tbl.CurrentSnapshot().Summary.Properties["total-delete-files"]; n != "0" {
		t.Fatalf("%s delete files left after the rewrite, want 0", n)
	}
}

// TestCopyOnWriteConcurrentAppend: an append committed by another writer while a copy-on-write commit is
// planned survives it (the commit re-plans on the new head instead of overwriting).
func TestCopyOnWriteConcurrentAppend(t *testing.T) {
	t.Parallel() // see TestMain
	for _, v := range []int{2, 3} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) { copyOnWriteConcurrentAppend(t, v) })
	}
}

func copyOnWriteConcurrentAppend(t *testing.T, version int) {
	ctx := context.Background()
	w, _, cat, ident := cowTable(t, ctx, 4, 50, false,
		iceberg.WithCreate(kvSchema, iceberg.IdentifierFields("id"), iceberg.FormatVersion(version)))
	if v := w.Table().Metadata().Version(); v != version {
		t.Fatalf("format version %d, want %d", v, version)
	}
	other, err := iceberg.NewWriter(ctx, cat, ident)
	if err != nil {
		t.Fatal(err)
	}
	// The other writer's commit lands between the copy-on-write writer's plan and its commit: the catalog
	// wrapper commits it just before the first attempt reaches the catalog.
	commitBeforeNext(t, ctx, cat, other, other.Write, kvBatch([]int64{1000, 1001}, []int64{1000, 1001}))
	if err := w.Upsert(ctx, kvBatch([]int64{3, 120}, []int64{-3, -120})); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.Retries == 0 {
		t.Fatalf("the copy-on-write commit did not meet the concurrent append: %+v", st)
	}
	_ = other.Close(ctx)
	got := readKV(t, cat, ident)
	if len(got[1000]) != 1 || len(got[1001]) != 1 {
		t.Fatalf("the concurrent append was lost: %v %v", got[1000], got[1001])
	}
	if len(got[3]) != 1 || got[3][0] != -3 || len(got[120]) != 1 || got[120][0] != -120 || len(got) != 202 {
		t.Fatalf("upserts: 3=%v 120=%v, %d ids", got[3], got[120], len(got))
	}
}

// TestCopyOnWriteRewritesATableFileOnce: two batches coalesced into one commit whose keys overlap (so the run is
// split into two snapshots) and both hit the same table file: the file is rewritten once, by the first
// snapshot, for the keys of both; the second only rewrites the file of new rows the first added.
func TestCopyOnWriteRewritesATableFileOnce(t *testing.T) {
	t.Parallel() // see TestMain
	for _, v := range []int{2, 3} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			ctx := context.Background()
			cat, ident, model := closedCowTable(t, ctx, v)
			w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithMode(iceberg.CopyOnWrite),
				iceberg.WithFlushRows(1), iceberg.WithFlushInterval(0))
			if err != nil {
				t.Fatal(err)
			}
			base := w.Table().CurrentSnapshot().SnapshotID
			var lineage0 map[int64]tabletest.KeyRow
			if v >= 3 {
				lineage0 = readRowIDs(t, cat, ident)
			}
			// The first commit (of row 1000) holds the commit loop until both upserts are staged behind it.
			entered, release := make(chan struct{}), make(chan struct{})
			cat.mu.Lock()
			cat.before = func() {
				cat.before = nil
				close(entered)
				<-release
			}
			cat.mu.Unlock()
			upsert := func(ids []int64, v int64) {
				vs := make([]int64, len(ids))
				for i := range ids {
					vs[i] = v
					model.upsert(ids[i], v)
				}
				if err := w.Upsert(ctx, kvBatch(ids, vs)); err != nil {
					t.Fatal(err)
				}
			}
			model.insert(1000, 1000)
			if err := w.Write(ctx, kvBatch([]int64{1000}, []int64{1000})); err != nil { // the commit in flight
				t.Fatal(err)
			}
			<-entered
			upsert([]int64{5}, -5)    // batch 1: writes key 5
			upsert([]int64{5, 6}, -6) // batch 2: rewrites key 5 (a new snapshot) and 6, in the same table file
			waitStaged(t, w, 3)       // both upserts encoded and staged
			close(release)
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
			compareKV(t, readKV(t, cat, ident), model)
			tbl := tabletest.Load(t, cat, ident)
			var snaps []*table.Snapshot
			for s := tbl.CurrentSnapshot(); s != nil && s.SnapshotID != base; s = tbl.SnapshotByID(*s.ParentSnapshotID) {
				snaps = append(snaps, s)
				if s.ParentSnapshotID == nil {
					break
				}
			}
			deleted := 0
			for _, s := range snaps {
				n, _ := strconv.Atoi(s.Summary.Properties["deleted-data-files"])
				deleted += n
			}
			// Snapshots: the insert of 1000, then the upserts' (two on v2; on v3 each rewrite is followed by a row
			// delta adding the new rows).
			if len(snaps) < 3 {
				t.Fatalf("%d snapshots since the table was written: the upserts did not coalesce into one split commit", len(snaps))
			}
			if deleted != 2 {
				t.Fatalf("%d data files removed, want 2 (the table file once, the first batch's new file once)", deleted)
			}
			if v >= 3 { // updates keep their row ids, through both segments for key 5
				lineage1 := readRowIDs(t, cat, ident)
				for _, id := range []int64{5, 6} {
					if lineage1[id].RowID != lineage0[id].RowID {
						t.Fatalf("updated id %d: _row_id %d, was %d", id, lineage1[id].RowID, lineage0[id].RowID)
					}
				}
			}
		})
	}
}

// TestCopyOnWriteLeavesNoUnreferencedDataFile: after a copy-on-write upsert commit, every data file the
// writer wrote is referenced by some snapshot of the table: on v3 the new-row files carryRowIDs writes again do
// not leave the originals behind, and when the first attempt fails the files it wrote (rewrites, carried
// copies) are deleted once the retry commits.
func TestCopyOnWriteLeavesNoUnreferencedDataFile(t *testing.T) {
	t.Parallel() // see TestMain
	for _, v := range []int{2, 3} {
		for _, failFirst := range []bool{false, true} {
			t.Run(fmt.Sprintf("v%d/fail-first=%v", v, failFirst), func(t *testing.T) {
				ctx := context.Background()
				cat := &slowCatalog{Catalog: openCatalog(t)}
				ident := table.Identifier{"cow", "orphans"}
				w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(kvSchema, iceberg.IdentifierFields("id"),
					iceberg.FormatVersion(v)), iceberg.WithMode(iceberg.CopyOnWrite), iceberg.WithFlushInterval(0),
					iceberg.WithSmallFileCompactionEvery(0))
				if err != nil {
					t.Fatal(err)
				}
				ids := []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
				if err := w.Write(ctx, kvBatch(ids, ids)); err != nil {
					t.Fatal(err)
				}
				if err := w.Flush(ctx); err != nil {
					t.Fatal(err)
				}
				if failFirst {
					cat.mu.Lock()
					cat.failBefore = 1
					cat.mu.Unlock()
				}
				if err := w.Upsert(ctx, kvBatch([]int64{5, 20}, []int64{-5, -20})); err != nil {
					t.Fatal(err)
				}
				if err := w.Close(ctx); err != nil {
					t.Fatal(err)
				}
				if st := w.Stats(); (st.Retries != 0) != failFirst {
					t.Fatalf("retries: %+v", st)
				}
				if un := unreferencedDataFiles(t, cat, ident); len(un) > 0 {
					t.Fatalf("%d data file(s) in storage referenced by no snapshot: %v", len(un), un)
				}
				model := kvModel{}
				for _, id := range ids {
					model.insert(id, id)
				}
				model.upsert(5, -5)
				model.upsert(20, -20)
				compareKV(t, readKV(t, cat, ident), model)
			})
		}
	}
}

// unreferencedDataFiles lists the Parquet files under the table's location that no snapshot references.
func unreferencedDataFiles(t *testing.T, cat icecatalog.Catalog, ident table.Identifier) []string {
	t.Helper()
	ctx := context.Background()
	tbl := tabletest.Load(t, cat, ident)
	fio, err := tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	referenced := map[string]bool{}
	for _, s := range tbl.Metadata().Snapshots() {
		mans, err := s.Manifests(fio)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mans {
			entries, err := m.FetchEntries(fio, false)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				referenced[localPath(e.DataFile().FilePath())] = true
			}
		}
	}
	var unreferenced []string
	root := localPath(tbl.Location())
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".parquet") && !referenced[p] {
			unreferenced = append(unreferenced, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return unreferenced
}

// localPath turns a file location (a file:// URL or a path) into a clean local path.
func localPath(loc string) string {
	if u, err := url.Parse(loc); err == nil && u.Scheme == "file" {
		return filepath.Clean(u.Path)
	}
	return filepath.Clean(loc)
}
