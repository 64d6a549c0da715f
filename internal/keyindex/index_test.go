package keyindex

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/icewriter/iceberg/internal/keyindex/keyenc"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// countingPool is a Pool that counts what its indexes hold.
type countingPool struct{ used, limit int64 }

func (p *countingPool) Add(n int64)  { p.used += n }
func (p *countingPool) Over() bool   { return p.used > p.limit }
func (p *countingPool) Limit() int64 { return p.limit }

var idCols = Columns{Names: []string{"id"}, FieldIDs: []int{1}}

// idTable creates a format-version 2 table of one required int64 column "id" (field id 1).
func idTable(t *testing.T) (icecatalog.Catalog, table.Identifier, *table.Table) {
	t.Helper()
	ctx := context.Background()
	cat := tabletest.TempCatalog(t)
	if err := cat.CreateNamespace(ctx, table.Identifier{"db"}, nil); err != nil {
		t.Fatal(err)
	}
	ident := table.Identifier{"db", "t"}
	sc := ice.NewSchema(0, ice.NestedField{ID: 1, Name: "id", Type: ice.PrimitiveTypes.Int64, Required: true})
	tbl, err := cat.CreateTable(ctx, ident, sc, icecatalog.WithProperties(ice.Properties{"format-version": "2"}))
	if err != nil {
		t.Fatal(err)
	}
	return cat, ident, tbl
}

// appendIDs commits one data file of ids to tbl and returns the table after the commit.
func appendIDs(t *testing.T, tbl *table.Table, ids ...int64) *table.Table {
	t.Helper()
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	b.AppendValues(ids, nil)
	col := b.NewArray()
	defer col.Release()
	rec := array.NewRecordBatch(sc, []arrow.Array{col}, int64(len(ids)))
	defer rec.Release()
	at := array.NewTableFromRecords(sc, []arrow.RecordBatch{rec})
	defer at.Release()
	tx := tbl.NewTransaction()
	if err := tx.AppendTable(context.Background(), at, int64(len(ids)), nil); err != nil {
		t.Fatal(err)
	}
	next, err := tx.Commit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return next
}

// placements are where idx places each key: data file name and row position, by key.
func placements(idx *Index) map[string]string {
	out := map[string]string{}
	for k, l := range idx.Store().All() {
		out[string(k)] = fmt.Sprintf("%s#%d", filepath.Base(idx.File(l.File).Path()), l.Pos)
	}
	return out
}

// key is an id key as the index holds it.
func key(id int64) string { return string(keyenc.AppendInt(nil, id)) }

// An index loaded from a table places every live row, counts what it holds (in its pool too), and CatchUp
// brings it to a head another writer moved: its new file's rows are indexed, the base follows. Close gives
// the pool back every byte.
func TestIndexLoadAndCatchUp(t *testing.T) {
	ctx := context.Background()
	_, _, tbl := idTable(t)
	tbl = appendIDs(t, tbl, 1, 2, 3)
	tbl = appendIDs(t, tbl, 4, 5)
	pool := &countingPool{limit: 1 << 30}
	idx := New(Config{Columns: idCols, Pool: pool}, nil)
	if reason, err := idx.Load(ctx, tbl, "main", 2); err != nil || reason != "" {
		t.Fatal(reason, err)
	}
	if got := len(placements(idx)); got != 5 {
		t.Fatalf("loaded %d keys, want 5", got)
	}
	if idx.Base() != tbl.Metadata().CurrentSnapshot().SnapshotID {
		t.Fatalf("base %d, head %d", idx.Base(), tbl.Metadata().CurrentSnapshot().SnapshotID)
	}
	if _, err := idx.Audit(); err != nil {
		t.Fatal(err)
	}
	if pool.used != idx.Bytes() || pool.used <= 0 {
		t.Fatalf("pool counts %d bytes, the index holds %d", pool.used, idx.Bytes())
	}

	tbl = appendIDs(t, tbl, 6, 7)
	if err := idx.CatchUp(ctx, tbl, "main"); err != nil {
		t.Fatal(err)
	}
	got := placements(idx)
	if len(got) != 7 || !strings.HasSuffix(got[key(7)], "#1") || got[key(6)] == got[key(1)] {
		t.Fatalf("after catching up: %v", got)
	}
	if idx.Base() != tbl.Metadata().CurrentSnapshot().SnapshotID || idx.Stale() {
		t.Fatal("catching up did not move the base to the head")
	}
	locs := idx.Remove(nil, []byte(key(6)))
	if len(locs) != 1 {
		t.Fatalf("key 6 at %v", locs)
	}
	idx.Close()
	if pool.used != 0 {
		t.Fatalf("the pool still counts %d bytes after Close", pool.used)
	}
}

// An index past its own budget spills its keys to local disk and stays on; one whose budget its files alone
// exceed is over.
func TestIndexBudget(t *testing.T) {
	add := func(idx *Index, file string, n int) {
		df, err := ice.NewDataFileBuilder(*ice.UnpartitionedSpec, ice.EntryContentData, file, ice.ParquetFile, nil, nil, nil, int64(n), 1)
		if err != nil {
			t.Fatal(err)
		}
		fk := FileKeys{DF: df.Build()}
		for i := range n {
			fk.Keys.Add(keyenc.AppendInt(nil, int64(i)))
		}
		idx.Add(&fk)
	}
	idx := New(Config{Columns: idCols, Limit: 64 << 10, Dir: t.TempDir()}, nil)
	defer idx.Close()
	add(idx, "a.parquet", 10_000)
	if idx.Store().SpilledBytes() == 0 || idx.Over() || idx.Err() != nil {
		t.Fatalf("spilled %d bytes, over %v, err %v", idx.Store().SpilledBytes(), idx.Over(), idx.Err())
	}
	if _, err := idx.Audit(); err != nil {
		t.Fatal(err)
	}
	tiny := New(Config{Columns: idCols, Limit: 1, Dir: t.TempDir()}, nil)
	defer tiny.Close()
	add(tiny, "b.parquet", 10)
	if !tiny.Over() || !strings.Contains(tiny.Budget(), "memory budget 1 bytes") {
		t.Fatalf("an index over a 1-byte budget: over %v (%s)", tiny.Over(), tiny.Budget())
	}
}

// SupersededBy holds superseded position delete files back until a batch of them waits; RemovedSuperseded
// forgets those a run removed.
func TestSuperseded(t *testing.T) {
	del := func(name string) ice.DataFile {
		b, err := ice.NewDataFileBuilder(*ice.UnpartitionedSpec, ice.EntryContentPosDeletes, name, ice.ParquetFile, nil, nil, nil, 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		return b.Build()
	}
	paths := func(fs []ice.DataFile) []string {
		var out []string
		for _, f := range fs {
			out = append(out, f.FilePath())
		}
		return out
	}
	idx := New(Config{Columns: idCols, Limit: 1 << 20}, nil)
	idx.superseded = []ice.DataFile{del("a"), del("b")}
	if got := idx.SupersededBy([]ice.DataFile{del("c")}, 4); got != nil {
		t.Fatalf("3 of a batch of 4 removed: %v", paths(got))
	}
	if got := paths(idx.SupersededBy([]ice.DataFile{del("c"), del("d")}, 4)); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
		t.Fatalf("a batch of 4 removes %v", got)
	}
	idx.RemovedSuperseded([]ice.DataFile{del("a"), del("x")})
	if got := paths(idx.superseded); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("after removing a: %v", got)
	}
}

// Merge hands each data file's next deletes the positions it held plus the new ones, and names the delete file
// they replace; Committed makes the new file the live one.
func TestMergeAndCommitted(t *testing.T) {
	df, err := ice.NewDataFileBuilder(*ice.UnpartitionedSpec, ice.EntryContentData, "d.parquet", ice.ParquetFile, nil, nil, nil, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	idx := New(Config{Columns: idCols, Limit: 1 << 20}, nil)
	fk := FileKeys{DF: df.Build()}
	for i := range 4 {
		fk.Keys.Add(keyenc.AppendInt(nil, int64(i)))
	}
	idx.Add(&fk)
	vector := func(name string) ice.DataFile {
		b, err := ice.NewDataFileBuilder(*ice.UnpartitionedSpec, ice.EntryContentPosDeletes, name, ice.PuffinFile, nil, nil, nil, 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		return b.ReferencedDataFile("d.parquet").ContentOffset(4).Build()
	}
	merged, removed := idx.Merge(map[int32][]int64{0: {1}})
	if len(removed) != 0 || slices.Collect(merged["d.parquet"].Positions()) == nil {
		t.Fatalf("first merge: %v, removes %d files", merged, len(removed))
	}
	idx.Committed([]ice.DataFile{vector("v1")}, nil, merged)
	merged, removed = idx.Merge(map[int32][]int64{0: {3}})
	if got := slices.Collect(merged["d.parquet"].Positions()); !slices.Equal(got, []uint64{1, 3}) ||
		len(removed) != 1 || removed[0].FilePath() != "v1" {
		t.Fatalf("second merge: positions %v, removes %d files", got, len(removed))
	}
	if _, err := idx.Audit(); err != nil {
		t.Fatal(err)
	}
}
