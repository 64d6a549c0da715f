package iceberg_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	ice "github.com/apache/iceberg-go"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/seed"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// Orphan files: what a writer killed between uploading and committing leaves behind, and the two ways they are
// removed (RemoveOrphanFiles for any table, NewWriter for its own ID). File ages are set on the local
// directory, never waited for.

// dataFiles returns the files under the table's data folder on disk (by location, file://...) with their sizes.
func dataFiles(t *testing.T, cat icecatalog.Catalog, ident table.Identifier) map[string]int64 {
	t.Helper()
	tbl := tabletest.Load(t, cat, ident)
	root := strings.TrimPrefix(tbl.Location(), "file://") + "/data"
	out := map[string]int64{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			out["file://"+p] = info.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ageFiles sets the modification time of the files at the locations given to age before now.
func ageFiles(t *testing.T, age time.Duration, locs ...string) {
	t.Helper()
	at := time.Now().Add(-age)
	for _, l := range locs {
		if err := os.Chtimes(strings.TrimPrefix(l, "file://"), at, at); err != nil {
			t.Fatal(err)
		}
	}
}

// added returns the locations in after and not in before, sorted.
func added(before, after map[string]int64) []string {
	var out []string
	for l := range after {
		if _, ok := before[l]; !ok {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return out
}

// sameFiles fails unless the table's data folder holds exactly the files of want.
func sameFiles(t *testing.T, what string, got, want map[string]int64) {
	t.Helper()
	if missing, extra := added(got, want), added(want, got); len(missing)+len(extra) > 0 {
		t.Fatalf("%s: files missing %v, files not expected %v", what, missing, extra)
	}
}

// stallWriters opens a writer for each ID on gated, then holds gated's commits and has each writer upload
// batches files of 100 seed rows (ids from first on), in turn. It returns the files each uploaded once they are
// all staged: their commits wait at the gate, as a process killed after uploading would never send them. The
// writers are aborted when the test ends (after the gate opens).
func stallWriters(t *testing.T, ctx context.Context, gated *slowCatalog, ident table.Identifier, first int64, batches int, ids ...string) map[string][]string {
	t.Helper()
	var ws []*iceberg.Writer
	for _, id := range ids {
		w, err := iceberg.NewWriter(ctx, gated, ident, iceberg.WithWriterID(id), iceberg.WithFlushRows(100),
			iceberg.WithFlushInterval(0))
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	gated.hold()
	t.Cleanup(func() {
		gated.release()
		for _, w := range ws {
			_ = w.Abort(ctx)
		}
	})
	out := map[string][]string{}
	for i, w := range ws {
		before := dataFiles(t, gated.Catalog, ident)
		g := seed.New(first+int64(i*batches*100), uint64(i))
		for range batches {
			writeSeed(t, w, g, 100)
		}
		waitStaged(t, w, int64(batches))
		out[ids[i]] = added(before, dataFiles(t, gated.Catalog, ident))
		if len(out[ids[i]]) != batches {
			t.Fatalf("writer %s uploaded %d files, want %d", ids[i], len(out[ids[i]]), batches)
		}
	}
	return out
}

// commitAsWriter creates the table of seed events and commits the ids 0..rows-1 with writer ID id; it returns the
// data files.
func commitAsWriter(t *testing.T, ctx context.Context, cat icecatalog.Catalog, ident table.Identifier, id string, rows int) map[string]int64 {
	t.Helper()
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema), iceberg.WithWriterID(id),
		iceberg.WithFlushInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	writeSeed(t, w, seed.New(0, 0), rows)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return dataFiles(t, cat, ident)
}

// waitSweep waits (30 s at most) for the orphan removal NewWriter started to return.
func waitSweep(t *testing.T, w *iceberg.Writer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	select {
	case <-iceberg.OrphanSweepDone(w):
	case <-ctx.Done():
		t.Fatal("the orphan removal NewWriter started did not return within 30 s")
	}
}

// openSweepClose opens a writer, waits for the orphan removal it started, and closes it.
func openSweepClose(t *testing.T, ctx context.Context, cat icecatalog.Catalog, ident table.Identifier, opts ...iceberg.Option) {
	t.Helper()
	w, err := iceberg.NewWriter(ctx, cat, ident, opts...)
	if err != nil {
		t.Fatal(err)
	}
	waitSweep(t, w)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestOrphanFilesAfterKill: a process writing with ID "job" is killed (SIGKILL) with four files uploaded and
// not committed. RemoveOrphanFiles lists exactly those older than its window in a dry run (deleting nothing),
// then deletes them and nothing else; the committed rows read back intact. The one file younger than the
// window survives it, and a later NewWriter with ID "job" removes it once it is older than the writer's window.
func TestOrphanFilesAfterKill(t *testing.T) {
	t.Parallel() // see TestMain
	if testing.Short() {
		t.Skip("spawns a process")
	}
	dir := t.TempDir()
	ctx := context.Background()
	cat := openCatalogAt(t, filepath.Join(dir, "catalog.db"))
	ident := table.Identifier{"procs", "events"}
	committed := commitAsWriter(t, ctx, cat, ident, "job", 1000)

	child := childProcess(t, dir, "TestOrphanChild")
	stdout, out := startChild(t, child)
	lines := bufio.NewScanner(stdout)
	for lines.Scan() && lines.Text() != "staged" {
		out.WriteString(lines.Text() + "\n")
	}
	killChild(t, child)
	files := dataFiles(t, cat, ident)
	left := added(committed, files)
	if len(left) != 4 {
		t.Fatalf("the killed process left %d uncommitted files, want 4:\n%s", len(left), out.String())
	}
	ageFiles(t, 48*time.Hour, slices.Collect(maps.Keys(files))...)
	young, old := left[0], left[1:]
	ageFiles(t, time.Minute, young)
	var oldBytes int64
	for _, l := range old {
		oldBytes += files[l]
	}

	rep, err := iceberg.RemoveOrphanFiles(ctx, cat, ident, iceberg.OrphanDryRun())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Orphans, old) || len(rep.Deleted) > 0 || rep.Recent != 1 || rep.Listed != len(files) ||
		rep.Bytes != oldBytes {
		t.Fatalf("dry run reported %+v, want orphans %v (%d bytes), 1 recent file, %d listed, none deleted", rep, old,
			oldBytes, len(files))
	}
	sameFiles(t, "after a dry run", dataFiles(t, cat, ident), files)

	rep, err = iceberg.RemoveOrphanFiles(ctx, cat, ident)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Orphans, old) || !slices.Equal(rep.Deleted, old) {
		t.Fatalf("RemoveOrphanFiles reported %+v, want %v found and deleted", rep, old)
	}
	want := maps.Clone(committed)
	want[young] = files[young]
	sameFiles(t, "after RemoveOrphanFiles", dataFiles(t, cat, ident), want)
	counts, _ := readRows(t, cat, ident)
	assertIDs(t, counts, 0, 1000)

	ageFiles(t, 2*time.Hour, young) // now older than the writer's window (1 hour), not than RemoveOrphanFiles'
	openSweepClose(t, ctx, cat, ident, iceberg.WithWriterID("job"))
	sameFiles(t, "after NewWriter with the killed process's ID", dataFiles(t, cat, ident), committed)
	counts, _ = readRows(t, cat, ident)
	assertIDs(t, counts, 0, 1000)
}

// TestOrphanChild is the process TestOrphanFilesAfterKill starts and kills: with writer ID "job" it uploads
// four files whose commits never leave it, says "staged", and waits to be killed.
func TestOrphanChild(t *testing.T) {
	dir := os.Getenv("ICEWRITER_CHILD_DIR")
	if dir == "" {
		t.Skip("run by TestOrphanFilesAfterKill")
	}
	ctx := context.Background()
	gated := &slowCatalog{Catalog: openCatalogAt(t, filepath.Join(dir, "catalog.db"))}
	stallWriters(t, ctx, gated, table.Identifier{"procs", "events"}, 1000, 4, "job")
	fmt.Println("staged")
	_, _ = io.Copy(io.Discard, os.Stdin) // until killed, or until the parent ends
	t.Fatal("not killed")
}

// TestOrphanWriterRemovesOwnFiles: two writers, "a" and "b", stand for processes killed with files uploaded and
// not committed. A NewWriter with ID "a" and the removal off leaves everything; one with the default window
// removes, in the background, exactly a's files older than the window: not a's younger one, not b's, not the
// files a committed in an earlier epoch.
func TestOrphanWriterRemovesOwnFiles(t *testing.T) {
	ctx := context.Background()
	gated := &slowCatalog{Catalog: openCatalog(t)}
	cat := gated.Catalog
	ident := table.Identifier{"ns", "events"}
	committed := commitAsWriter(t, ctx, cat, ident, "a", 500)
	ageFiles(t, 2*time.Hour, slices.Collect(maps.Keys(committed))...)
	stalled := stallWriters(t, ctx, gated, ident, 1000, 3, "a", "b")
	files := dataFiles(t, cat, ident)
	ageFiles(t, 2*time.Hour, slices.Collect(maps.Keys(files))...)
	young := stalled["a"][0]
	ageFiles(t, 30*time.Minute, young)

	openSweepClose(t, ctx, cat, ident, iceberg.WithWriterID("a"), iceberg.WithOrphanOlderThan(0))
	sameFiles(t, "with WithOrphanOlderThan(0)", dataFiles(t, cat, ident), files)

	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithWriterID("a"))
	if err != nil {
		t.Fatal(err)
	}
	waitSweep(t, w)
	want := maps.Clone(files)
	for _, l := range stalled["a"][1:] {
		delete(want, l)
	}
	sameFiles(t, `after NewWriter with ID "a"`, dataFiles(t, cat, ident), want)
	// The writer works on: what it writes is committed and read back with the earlier commits.
	writeSeed(t, w, seed.New(500, 5), 100)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	counts, _ := readRows(t, cat, ident)
	assertIDs(t, counts, 0, 600)
}

// writeDataFiles writes rec as data files of the table with iceberg-go's writer, committing nothing.
func writeDataFiles(t *testing.T, ctx context.Context, tbl *table.Table, rec arrow.RecordBatch) []ice.DataFile {
	t.Helper()
	var files []ice.DataFile
	recs := func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) }
	for df, err := range table.WriteRecords(ctx, tbl, rec.Schema(), recs) {
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, df)
	}
	return files
}

// commitOnBranch writes rec as a data file and commits it on a new branch made from the main branch's head; it
// returns the branch's new head.
func commitOnBranch(t *testing.T, ctx context.Context, cat icecatalog.Catalog, ident table.Identifier, branch string, rec arrow.RecordBatch) int64 {
	t.Helper()
	tbl := tabletest.Load(t, cat, ident)
	files := writeDataFiles(t, ctx, tbl, rec)
	ref := table.NewSetSnapshotRefUpdate(branch, tbl.CurrentSnapshot().SnapshotID, table.BranchRef, -1, -1, -1)
	if _, _, err := cat.CommitTable(ctx, ident, nil, []table.Update{ref}); err != nil {
		t.Fatal(err)
	}
	tbl = tabletest.Load(t, cat, ident)
	tx := tbl.NewTransactionOnBranch(branch)
	if err := tx.AddDataFiles(ctx, files, nil); err != nil {
		t.Fatal(err)
	}
	committed, err := tx.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return committed.Metadata().SnapshotByName(branch).SnapshotID
}

// snapshotRows counts the rows of one snapshot of the table, read with iceberg-go's scanner (which fails on a
// missing file).
func snapshotRows(t *testing.T, ctx context.Context, cat icecatalog.Catalog, ident table.Identifier, id int64) int64 {
	t.Helper()
	tbl := tabletest.Load(t, cat, ident)
	_, recs := tabletest.Records(t, tbl, table.WithSnapshotID(id))
	var n int64
	for r := range recs {
		n += r.NumRows()
	}
	return n
}

// TestOrphanFilesReferencedElsewhere: files that only an older snapshot, a branch or a tag references survive
// RemoveOrphanFiles, as do the files of a table in a sibling location (its name extends this one's), its
// uncommitted ones included; only this table's uncommitted file goes. Every snapshot reads back whole.
func TestOrphanFilesReferencedElsewhere(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := openCatalog(t)
	ident, sibling := table.Identifier{"ns", "t"}, table.Identifier{"ns", "t2"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(kvSchema, iceberg.IdentifierFields("id")),
		iceberg.WithMode(iceberg.CopyOnWrite), iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompactionEvery(0))
	if err != nil {
		t.Fatal(err)
	}
	model := kvModel{}
	for _, from := range []int64{0, 10} {
		ids := []int64{from, from + 1, from + 2}
		if err := w.Write(ctx, kvBatch(ids, ids)); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			model.insert(id, id)
		}
	}
	if err := w.Delete(ctx, keyBatch([]int64{0, 1, 2})); err != nil { // its file leaves the current snapshot
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	model.del(0)
	model.del(1)
	model.del(2)
	branchHead := commitOnBranch(t, ctx, cat, ident, "audit", kvBatch([]int64{100}, []int64{100}))
	tagged := commitOnBranch(t, ctx, cat, ident, "scratch", kvBatch([]int64{200}, []int64{200}))
	updates := []table.Update{table.NewSetSnapshotRefUpdate("v1", tagged, table.TagRef, -1, -1, -1),
		table.NewRemoveSnapshotRefUpdate("scratch")}
	if _, _, err := cat.CommitTable(ctx, ident, nil, updates); err != nil {
		t.Fatal(err)
	}
	tbl := tabletest.Load(t, cat, ident)
	current := tabletest.Paths(tabletest.LiveDataFiles(t, tbl))
	referenced := dataFiles(t, cat, ident)
	if len(referenced)-len(current) < 3 {
		t.Fatalf("%d files outside the current snapshot, want at least 3 (an older snapshot's, the branch's, "+
			"the tag's)", len(referenced)-len(current))
	}
	orphan := writeDataFiles(t, ctx, tbl, kvBatch([]int64{300}, []int64{300}))[0].FilePath()

	createTable(t, ctx, cat, sibling, kvSchema)
	sw, err := iceberg.NewWriter(ctx, cat, sibling, iceberg.WithFlushInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := sw.Write(ctx, kvBatch([]int64{1, 2}, []int64{1, 2})); err != nil {
		t.Fatal(err)
	}
	if err := sw.Close(ctx); err != nil {
		t.Fatal(err)
	}
	stbl := tabletest.Load(t, cat, sibling)
	if !strings.HasPrefix(stbl.Location(), tbl.Location()) {
		t.Fatalf("sibling location %s does not extend %s: the test would not check whole-folder listing",
			stbl.Location(), tbl.Location())
	}
	writeDataFiles(t, ctx, stbl, kvBatch([]int64{3}, []int64{3}))
	files, siblings := dataFiles(t, cat, ident), dataFiles(t, cat, sibling)
	ageFiles(t, 48*time.Hour, slices.Collect(maps.Keys(files))...)
	ageFiles(t, 48*time.Hour, slices.Collect(maps.Keys(siblings))...)

	rep, err := iceberg.RemoveOrphanFiles(ctx, cat, ident, iceberg.OrphanDryRun())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Orphans, []string{orphan}) || len(rep.Deleted) > 0 {
		t.Fatalf("dry run reported %+v, want only %s found, nothing deleted", rep, orphan)
	}
	sameFiles(t, "after a dry run", dataFiles(t, cat, ident), files)
	// Listing the whole table location finds the same: the metadata folder is skipped, and the sibling's
	// location, whose name extends this one's, is not under it.
	rep, err = iceberg.RemoveOrphanFiles(ctx, cat, ident, iceberg.OrphanDryRun(), iceberg.OrphanLocation(tbl.Location()))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Orphans, []string{orphan}) || rep.Listed != len(files) {
		t.Fatalf("dry run on the table location reported %+v, want only %s found among %d files", rep, orphan, len(files))
	}
	rep, err = iceberg.RemoveOrphanFiles(ctx, cat, ident)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Deleted, []string{orphan}) {
		t.Fatalf("RemoveOrphanFiles deleted %v, want only %s", rep.Deleted, orphan)
	}
	delete(files, orphan)
	sameFiles(t, "after RemoveOrphanFiles", dataFiles(t, cat, ident), files)
	sameFiles(t, "the sibling table", dataFiles(t, cat, sibling), siblings)

	compareKV(t, readKV(t, cat, ident), model)
	compareKV(t, readKV(t, cat, sibling), kvModel{1: {1}, 2: {2}})
	for _, s := range tbl.Metadata().Snapshots() {
		snapshotRows(t, ctx, cat, ident, s.SnapshotID)
	}
	if n := snapshotRows(t, ctx, cat, ident, branchHead); n != int64(len(model))+1 {
		t.Fatalf("branch audit holds %d rows, want %d", n, len(model)+1)
	}
	if n := snapshotRows(t, ctx, cat, ident, tagged); n != int64(len(model))+1 {
		t.Fatalf("tag v1 holds %d rows, want %d", n, len(model)+1)
	}
}

// TestOrphanFilesRefusals: a negative window is an option error; a data location outside the table's location
// (where other tables may keep files) is listed only when OrphanLocation names it.
func TestOrphanFilesRefusals(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"ns", "shared"}
	shared := "file://" + t.TempDir() + "/shared-data"
	createTable(t, ctx, cat, ident, kvSchema, iceberg.TableProperties(map[string]string{table.WriteDataPathKey: shared}))
	if _, err := iceberg.RemoveOrphanFiles(ctx, cat, ident, iceberg.OrphanOlderThan(-time.Hour)); err == nil ||
		!strings.Contains(err.Error(), "OrphanOlderThan") {
		t.Fatalf("a negative window: %v, want an error naming OrphanOlderThan", err)
	}
	if _, err := iceberg.RemoveOrphanFiles(ctx, cat, ident); err == nil || !strings.Contains(err.Error(), "OrphanLocation") {
		t.Fatalf("a data location outside the table: %v, want a refusal naming OrphanLocation", err)
	}
	rep, err := iceberg.RemoveOrphanFiles(ctx, cat, ident, iceberg.OrphanLocation(shared))
	if err != nil || rep.Location != shared || rep.Listed != 0 {
		t.Fatalf("OrphanLocation(%s): %+v, %v", shared, rep, err)
	}
}
