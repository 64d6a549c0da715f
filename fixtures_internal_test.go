package iceberg

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/icewriter/iceberg/catalog"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// The fixtures the internal tests share: a keyed table of ids and names, written and read back.

// idNameSchema is the internal tests' table: a key and a name.
var idNameSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// idNameRows makes n rows, ids ascending from from, with names of varying length.
func idNameRows(from, n int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, idNameSchema)
	defer b.Release()
	for i := from; i < from+n; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.StringBuilder).Append("n" + strings.Repeat("x", i%7))
	}
	return b.NewRecordBatch()
}

// openTestCatalog opens an embedded catalog in the test's temporary directory, closed with the test.
func openTestCatalog(t testing.TB) icecatalog.Catalog {
	t.Helper()
	cat, err := catalog.Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cat.(icecatalog.Closer).Close() })
	return cat
}

// idNameWriter writes files of perFile rows each, ids ascending, and returns the writer.
func idNameWriter(t testing.TB, files, perFile int, opts ...Option) *Writer {
	t.Helper()
	ctx := context.Background()
	w, err := NewWriter(ctx, openTestCatalog(t), table.Identifier{"b", "t"}, append([]Option{
		WithFlushInterval(0), WithSmallFileCompactionEvery(0)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close(ctx) })
	for f := 0; f < files; f++ {
		if err := w.Write(ctx, idNameRows(f*perFile, perFile)); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// namedRows makes idNameSchema rows of the ids given, all with the same name.
func namedRows(ids []int64, name string) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, idNameSchema)
	defer b.Release()
	for _, id := range ids {
		b.Field(0).(*array.Int64Builder).Append(id)
		b.Field(1).(*array.StringBuilder).Append(name)
	}
	return b.NewRecordBatch()
}

// readNamed reads a writer's idNameSchema table back: per id, its names, sorted.
func readNamed(t *testing.T, w *Writer) map[int64][]string {
	t.Helper()
	return readNamedTable(t, w.Table())
}

// readNamedTable reads an idNameSchema table back: per id, its names, sorted.
func readNamedTable(t *testing.T, tbl *table.Table) map[int64][]string {
	t.Helper()
	_, recs, err := tbl.Scan().ToArrowRecords(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64][]string{}
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		ids, names := rec.Column(0).(*array.Int64), rec.Column(1).(*array.String)
		for i := 0; i < int(rec.NumRows()); i++ {
			got[ids.Value(i)] = append(got[ids.Value(i)], names.Value(i))
		}
		rec.Release()
	}
	for _, v := range got {
		slices.Sort(v)
	}
	return got
}

// requireIndexedModel requires a table of idNameRows/namedRows rows to hold model (names by id) exactly, with
// the upserts and deletes made after a bulk phase as deletion vectors, never equality deletes: the key index
// covered the bulk files.
func requireIndexedModel(t *testing.T, tbl *table.Table, model map[int64][]string) {
	t.Helper()
	got := readNamedTable(t, tbl)
	if len(got) != len(model) {
		t.Fatalf("table has %d ids, model %d", len(got), len(model))
	}
	for id, names := range model {
		if !slices.Equal(got[id], names) {
			t.Fatalf("id %d: %v, model %v", id, got[id], names)
		}
	}
	var dvs int
	for _, task := range dataFiles(t, tbl) {
		if len(task.EqualityDeleteFiles) > 0 {
			t.Fatalf("equality deletes on %s: the key index did not cover the bulk file", task.File.FilePath())
		}
		dvs += len(task.DeletionVectorFiles)
	}
	if dvs == 0 {
		t.Fatal("no deletion vector after upserts and deletes of bulk rows")
	}
}

// checkRowIDs compares the _row_id of each key after an upsert with before: kept keys have the same, fresh keys
// one no row had before, any other key its own, and no two rows share one.
func checkRowIDs(t *testing.T, before, after map[int64]int64, kept, fresh []int64) {
	t.Helper()
	old := map[int64]bool{}
	for _, rid := range before {
		old[rid] = true
	}
	seen := map[int64]int64{}
	for id, rid := range after {
		if other, dup := seen[rid]; dup {
			t.Errorf("keys %d and %d share _row_id %d", id, other, rid)
		}
		seen[rid] = id
		switch {
		case slices.Contains(kept, id):
			if rid != before[id] {
				t.Errorf("key %d has _row_id %d, want %d (the replaced row's)", id, rid, before[id])
			}
		case slices.Contains(fresh, id):
			if old[rid] {
				t.Errorf("key %d has _row_id %d, an id the table gave before; want a new one", id, rid)
			}
		case rid != before[id]:
			t.Errorf("key %d has _row_id %d, want %d (unchanged)", id, rid, before[id])
		}
	}
	for _, id := range append(slices.Clone(kept), fresh...) {
		if _, ok := after[id]; !ok {
			t.Errorf("key %d missing after the upsert", id)
		}
	}
}

// seqIDs returns 0, 1, ..., n-1.
func seqIDs(n int) []int64 {
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i)
	}
	return ids
}

// lineageStage opens a key stage on a format-v3 stageEnv table holding keys 0..99 and returns the rows' _row_id
// by key.
func lineageStage(t *testing.T) (*stageEnv, *keyStage, map[int64]int64) {
	t.Helper()
	cat, _ := tabletest.CountedCatalog(t) // the tests count the reads of the batches' files
	e := newStageEnvOn(t, cat, 3)
	k := e.stage(false)
	e.do(k, opInsert, seqIDs(100), "a")
	return e, k, tabletest.RowIDs(t, e.tbl)
}

// countingAllocator is a writer's allocator (options.mem) that counts the bytes allocated through it, freed or
// not, over a checked allocator that tells what is still held.
type countingAllocator struct {
	*memory.CheckedAllocator
	allocated atomic.Int64
}

func newCountingAllocator() *countingAllocator {
	return &countingAllocator{CheckedAllocator: memory.NewCheckedAllocator(memory.NewGoAllocator())}
}

func (a *countingAllocator) Allocate(size int) []byte {
	a.allocated.Add(int64(size))
	return a.CheckedAllocator.Allocate(size)
}

func (a *countingAllocator) Reallocate(size int, b []byte) []byte {
	a.allocated.Add(int64(size))
	return a.CheckedAllocator.Reallocate(size, b)
}

// heapInUse is the live heap after two collections.
func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// widePartitioned makes n rows of a table of cols columns (an int64 partition source p, then float64 and
// string columns by turns), two rows a value of p.
func widePartitioned(cols, n int) arrow.RecordBatch {
	fields := []arrow.Field{{Name: "p", Type: arrow.PrimitiveTypes.Int64}}
	for c := 1; c < cols; c++ {
		if c%2 == 0 {
			fields = append(fields, arrow.Field{Name: fmt.Sprint("s", c), Type: arrow.BinaryTypes.String, Nullable: true})
		} else {
			fields = append(fields, arrow.Field{Name: fmt.Sprint("f", c), Type: arrow.PrimitiveTypes.Float64, Nullable: true})
		}
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema(fields, nil))
	defer b.Release()
	for i := range n {
		b.Field(0).(*array.Int64Builder).Append(int64(i / 2))
		for c := 1; c < cols; c++ {
			if c%2 == 0 {
				b.Field(c).(*array.StringBuilder).Append(fmt.Sprintf("value-%040d", i))
			} else {
				b.Field(c).(*array.Float64Builder).Append(float64(i))
			}
		}
	}
	return b.NewRecordBatch()
}

// wideFiles writes files data files of a table of cols columns partitioned by identity (widePartitioned, a file
// per partition) through the writer's file encoder, without committing them, and returns the table, its Arrow
// schema and the files' metadata as iceberg-go built it.
func wideFiles(t *testing.T, cols, files int) (*table.Table, *arrow.Schema, []ice.DataFile) {
	t.Helper()
	ctx := context.Background()
	rec := widePartitioned(cols, 2*files)
	defer rec.Release()
	w, err := NewWriter(ctx, openTestCatalog(t), table.Identifier{"b", "t"},
		WithCreate(rec.Schema(), PartitionBy("identity(p)")), WithFlushInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close(ctx) })
	tbl, conf := w.view.get()
	rec.Retain() // writeRecord releases it
	built, err := (&fileEncoder{mem: memory.DefaultAllocator, rowGroupRows: DefaultRowGroupRows}).writeRecord(
		ctx, tbl, conf.target, rec, []table.WriteRecordOption{table.WithClusteredWrite()})
	if err != nil {
		t.Fatal(err)
	}
	if len(built) != files {
		t.Fatalf("%d files, want %d", len(built), files)
	}
	return tbl, conf.target, built
}
