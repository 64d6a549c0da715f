package iceberg

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table/dv"
	"github.com/icewriter/iceberg/internal/keyindex/posdelete"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// TestPositionDeleteFileLayout: a position delete file holds its data file's path in every row, dictionary-
// encoded from one entry, and the positions plain (no dictionary of distinct values), under Iceberg's field ids
// and column types, so that iceberg-go reads it back as written.
func TestPositionDeleteFileLayout(t *testing.T) {
	e := newStageEnv(t, 2)
	k := e.stage(false)
	e.do(k, opInsert, ids(0, 10), "a")
	tasks := tabletest.LiveDataFiles(t, e.tbl)
	if len(tasks) != 1 {
		t.Fatalf("plan: %d tasks", len(tasks))
	}
	df := tasks[0].File
	want := []int64{1, 5, 7, 9}
	bm := dv.NewRoaringPositionBitmap()
	for _, p := range want {
		bm.Set(uint64(p))
	}
	path := filepath.Join(t.TempDir(), "pos.parquet")
	if _, err := posdelete.Write(e.ctx, iceio.LocalFS{}, e.tbl.Metadata(), df, bm, path); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pr, err := file.NewParquetReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	for c, dict := range []bool{true, false} {
		col := pr.MetaData().Schema.Column(c)
		if id, want := col.SchemaNode().FieldID(), []int{posdelete.PathID, posdelete.PosID}[c]; int(id) != want {
			t.Fatalf("column %s has field id %d, want %d", col.Name(), id, want)
		}
		cc, err := pr.MetaData().RowGroup(0).ColumnChunk(c)
		if err != nil {
			t.Fatal(err)
		}
		if cc.HasDictionaryPage() != dict {
			t.Fatalf("column %s: dictionary page %v, want %v", col.Name(), cc.HasDictionaryPage(), dict)
		}
	}
	if got := pr.MetaData().Schema.Column(0).PhysicalType(); got != parquet.Types.ByteArray {
		t.Fatalf("file_path is %v", got)
	}
	fr, err := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	rdr := array.NewTableReader(tbl, -1)
	defer rdr.Release()
	var paths []string
	var positions []int64
	for rdr.Next() {
		rec := rdr.RecordBatch()
		for i := range int(rec.NumRows()) {
			paths = append(paths, rec.Column(0).(*array.String).Value(i))
			positions = append(positions, rec.Column(1).(*array.Int64).Value(i))
		}
	}
	if !slices.Equal(positions, want) {
		t.Fatalf("positions %v, want %v", positions, want)
	}
	for _, p := range paths {
		if p != df.FilePath() {
			t.Fatalf("path %q, want %q", p, df.FilePath())
		}
	}
}
