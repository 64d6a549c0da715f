package iceberg_test

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
)

// TestReview3KeyIndexSanitizedKeyName: iceberg-go writes Parquet column names sanitized the way Java Iceberg
// sanitizes Avro names ("user-id" is stored as "user_x2Did"), while the table schema keeps the name. The key
// index reads the key columns of the files it writes back by name: a v3 merge-on-read writer keyed on such a
// column must still write, upsert and reopen.
func TestReview3KeyIndexSanitizedKeyName(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"mor", "sanitized3"}
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "user-id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	batch := func(ids, vs []int64) arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.NewGoAllocator(), sc)
		defer b.Release()
		b.Field(0).(*array.Int64Builder).AppendValues(ids, nil)
		b.Field(1).(*array.Int64Builder).AppendValues(vs, nil)
		return b.NewRecordBatch()
	}
	open := func() *iceberg.Writer {
		w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(sc, iceberg.IdentifierFields("user-id"),
			iceberg.FormatVersion(3)), iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompaction(0))
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	w := open()
	if err := w.Write(ctx, batch([]int64{1, 2, 3}, []int64{1, 2, 3})); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Upsert(ctx, batch([]int64{2}, []int64{20})); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	w = open()
	if err := w.Upsert(ctx, batch([]int64{3}, []int64{30})); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	_, it, err := tbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64][]int64{}
	for rec, err := range it {
		if err != nil {
			t.Fatal(err)
		}
		ids, vs := rec.Column(0).(*array.Int64), rec.Column(1).(*array.Int64)
		for r := 0; r < int(rec.NumRows()); r++ {
			got[ids.Value(r)] = append(got[ids.Value(r)], vs.Value(r))
		}
		rec.Release()
	}
	if len(got) != 3 || len(got[1]) != 1 || got[2][0] != 20 || len(got[2]) != 1 || got[3][0] != 30 || len(got[3]) != 1 {
		t.Fatalf("read back %v, want map[1:[1] 2:[20] 3:[30]]", got)
	}
	if eq, _ := deleteFileKinds(t, cat, ident); eq != 0 {
		t.Fatalf("%d equality delete files: want deletion vectors only", eq)
	}
}
