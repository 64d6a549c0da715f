package iceberg_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/seed"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// bulkRouter opens a router whose tables start in their bulk phase, under a 16 MiB memory limit, with files
// rolled at target bytes.
func bulkRouter(t testing.TB, cat icecatalog.Catalog, target int64, opts ...iceberg.Option) *iceberg.Router {
	t.Helper()
	r, err := iceberg.NewRouter(cat, iceberg.WithBulkTargetFileSize(target),
		iceberg.WithWriterOptions(append([]iceberg.Option{iceberg.WithMemoryLimit(16 << 20)}, opts...)...),
		iceberg.WithTableConfig(func(context.Context, table.Identifier, *arrow.Schema) (iceberg.TableConfig, error) {
			return iceberg.TableConfig{Phase: iceberg.PhaseBulk}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRouterBulkFilesSpanBatches loads 100 MB of Arrow rows into a table in its bulk phase under a 16 MiB memory
// limit, which seals batches of a few MiB: the files still reach the bulk target size (each batch's rows are
// appended to a file kept open across batches), so the table has about size/target files, every one but the
// ones open at the end (one per encoding at once) at least the target, far fewer than the batches sealed; the
// rows read back exactly. Under the race detector the load and the target are an eighth of that (12.5 MB, 2 MiB
// files) under half the memory limit (8 MiB): about as many files and batches (three and a dozen or more), in
// an eighth of the time.
func TestRouterBulkFilesSpanBatches(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"db", "load"}
	target, load, limit := int64(16<<20), int64(100<<20), int64(16<<20)
	if raceDetector {
		target, load, limit = target/8, load/8, limit/2
	}
	r := bulkRouter(t, cat, target, iceberg.WithMemoryLimit(limit))
	g := seed.New(0, 1)
	var rows, bytes int64
	for bytes < load {
		rec := g.Batch(8192)
		rows += rec.NumRows()
		for _, c := range rec.Columns() {
			bytes += int64(c.Data().SizeInBytes())
		}
		if err := r.Write(ctx, ident, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	st := r.Stats()
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	tbl := tabletest.Load(t, cat, ident)
	var sizes []int64
	var written int64
	for _, task := range tabletest.LiveDataFiles(t, tbl) {
		sizes = append(sizes, task.File.FileSizeBytes())
		written += task.File.FileSizeBytes()
	}
	slices.Sort(sizes)
	want := (written + target - 1) / target
	t.Logf("%d rows, %d Arrow bytes in %d batches: %d files of %d bytes in all (sizes %v)", rows, bytes,
		st.Total.Batches, len(sizes), written, sizes)
	// The flush closes the files still open: one per encoding at once at most (DefaultMaxInFlight).
	part := iceberg.DefaultMaxInFlight
	if int64(len(sizes)) > want+int64(part) || len(sizes) <= part {
		t.Fatalf("%d files of %d bytes, want about %d at a target of %d", len(sizes), written, want, target)
	}
	for _, s := range sizes[part:] {
		if s < target {
			t.Fatalf("%d files under the target %d, at most %d (the files open at the flush): sizes %v",
				len(sizes)-len(sizes[part:])+1, target, part, sizes)
		}
	}
	if st.Total.Batches < 2*int64(len(sizes)) {
		t.Fatalf("%d batches for %d files: the memory limit should seal several batches per file", st.Total.Batches, len(sizes))
	}
	counts, _ := readRows(t, cat, ident)
	assertIDs(t, counts, 0, rows)
}

// TestRouterBulkKilledResumesExactlyOnce: a process loads a table through a router in its bulk phase (files of
// 1 MiB that span batches, a source position after every 8,192 rows, WithCheckpoints) and is killed (SIGKILL)
// after its second commit, with files open. A new router with the same writer ID resumes from the table's
// position and loads the rest: every row is in the table exactly once, and the files the killed process left
// open (never committed) are gone once the new writer's orphan sweep ran.
func TestRouterBulkKilledResumesExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process")
	}
	t.Parallel() // a long test that mostly waits: see TestMain
	dir := t.TempDir()
	ctx := context.Background()
	cat := openCatalogAt(t, filepath.Join(dir, "catalog.db"))
	ident := table.Identifier{"procs", "load"}

	child := childProcess(t, dir, "TestRouterBulkChild")
	stdout, out := startChild(t, child)
	commits := 0
	for lines := bufio.NewScanner(stdout); commits < 2 && lines.Scan(); {
		if strings.HasPrefix(lines.Text(), "committed") {
			commits++
		}
	}
	killChild(t, child)
	if commits < 2 {
		t.Fatalf("the child ended before its second commit:\n%s", out.String())
	}
	files := dataFiles(t, cat, ident)
	ageFiles(t, 2*time.Hour, slices.Collect(maps.Keys(files))...) // older than the sweep's window

	r := bulkRouter(t, cat, 1<<20, iceberg.WithWriterID("load"), iceberg.WithCheckpoints(), iceberg.WithFlushInterval(0))
	if err := r.Open(ctx, ident); err != nil {
		t.Fatal(err)
	}
	w, _ := r.Writer(ident)
	waitSweep(t, w)
	left := dataFiles(t, cat, ident)
	rp, err := r.Source("load/0").Resume(ctx)
	if err != nil {
		t.Fatal(err)
	}
	from, _ := strconv.ParseInt(rp.Position, 10, 64)
	if rp.FromStart || from <= 0 {
		t.Fatalf("resume point %+v: the killed process committed positions", rp)
	}
	// The rest of the load: a 1 MiB file spanning batches and a smaller one (ICEWRITER_SOAK=1: a few more).
	total := from + int64(iceberg.SoakForTest(t, 30_000, 100_000))
	t.Logf("killed after %d commits: %d files on disk, %d after the sweep; resuming after row %d", commits,
		len(files), len(left), from)
	bulkLoad(t, r, ident, from+1, total)
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	counts, _ := readRows(t, cat, ident)
	assertIDs(t, counts, 0, total)
	tbl := tabletest.Load(t, cat, ident)
	referenced := map[string]bool{}
	for _, task := range tabletest.LiveDataFiles(t, tbl) {
		referenced[strings.TrimPrefix(task.File.FilePath(), "file://")] = true
	}
	for f := range left {
		if !referenced[strings.TrimPrefix(f, "file://")] {
			t.Fatalf("file %s left by the killed process is still there after the sweep", f)
		}
	}
}

// bulkLoad writes the seed rows with ids from..to-1 through partition "load/0", a position (the last id) after
// every 8,192 rows and at the end.
func bulkLoad(t testing.TB, r *iceberg.Router, ident table.Identifier, from, to int64) {
	ctx := context.Background()
	src := r.Source("load/0")
	g := seed.New(from, uint64(from))
	for at := from; at < to; {
		n := min(8192, to-at)
		rec := g.Batch(int(n))
		if err := src.Write(ctx, ident, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		at += n
		if err := src.Checkpoint(ctx, strconv.FormatInt(at-1, 10)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRouterBulkChild is the process TestRouterBulkKilledResumesExactlyOnce starts and kills: it loads rows
// without end, saying "committed" after each commit.
func TestRouterBulkChild(t *testing.T) {
	dir := os.Getenv("ICEWRITER_CHILD_DIR")
	if dir == "" {
		t.Skip("run by TestRouterBulkKilledResumesExactlyOnce")
	}
	cat := openCatalogAt(t, filepath.Join(dir, "catalog.db"))
	r := bulkRouter(t, cat, 1<<20, iceberg.WithWriterID("load"), iceberg.WithCheckpoints(),
		iceberg.WithFlushInterval(0), iceberg.WithOnCommit(func(iceberg.CommitInfo) { fmt.Println("committed") }))
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin) // the parent ended
		os.Exit(1)
	}()
	bulkLoad(t, r, table.Identifier{"procs", "load"}, 0, 1<<40)
}
