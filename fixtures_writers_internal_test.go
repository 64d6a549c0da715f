package iceberg

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/icewriter/iceberg/internal/encode"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// Catalogs, writers and stages the internal tests set up: an id-name table written in files, wide files
// encoded without a commit, and a key stage on a format-v3 table.

// idNameWriter writes files of perFile rows each, ids ascending, and returns the writer.
func idNameWriter(t testing.TB, files, perFile int, opts ...Option) *Writer {
	t.Helper()
	ctx := context.Background()
	w, err := NewWriter(ctx, tabletest.TempCatalog(t), table.Identifier{"b", "t"}, append([]Option{
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

// wideFiles writes files data files of a table of cols columns partitioned by identity (widePartitioned, a file
// per partition) through the writer's file encoder, without committing them, and returns the table, its Arrow
// schema and the files' metadata as iceberg-go built it.
func wideFiles(t *testing.T, cols, files int) (*table.Table, *arrow.Schema, []ice.DataFile) {
	t.Helper()
	ctx := context.Background()
	rec := widePartitioned(cols, 2*files)
	defer rec.Release()
	w, err := NewWriter(ctx, tabletest.TempCatalog(t), table.Identifier{"b", "t"},
		WithCreate(rec.Schema(), PartitionBy("identity(p)")), WithFlushInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close(ctx) })
	tbl, conf := w.view.get()
	rec.Retain() // writeRecord releases it
	built, err := encode.WriteRecord(
		ctx, tbl, conf.target, rec, []table.WriteRecordOption{table.WithClusteredWrite()})
	if err != nil {
		t.Fatal(err)
	}
	if len(built) != files {
		t.Fatalf("%d files, want %d", len(built), files)
	}
	return tbl, conf.target, built
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
