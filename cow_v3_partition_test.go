package iceberg_test

import (
	"context"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
)

var tsSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
	{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
}, nil)

func tsBatch(ids []int64, v int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, tsSchema)
	defer b.Release()
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for _, id := range ids {
		b.Field(0).(*array.Int64Builder).Append(id)
		b.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(base.Add(time.Duration(id%5) * 24 * time.Hour).UnixMicro()))
		b.Field(2).(*array.Int64Builder).Append(v)
	}
	return b.NewRecordBatch()
}

// TestCopyOnWriteV3DayPartitions: on a v3 table partitioned by day(ts) (a date-typed partition value the
// rewritten files' metadata must carry over), copy-on-write upserts and deletes read back as the model, with
// the untouched rows' _row_id kept.
func TestCopyOnWriteV3DayPartitions(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"cow", "days"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(tsSchema, iceberg.IdentifierFields("id", "ts"),
		iceberg.PartitionBy("day(ts)"), iceberg.FormatVersion(3)), iceberg.WithMode(iceberg.CopyOnWrite),
		iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompactionEvery(0))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	var ids []int64
	for i := int64(0); i < 100; i++ {
		ids = append(ids, i)
	}
	if err := w.Write(ctx, tsBatch(ids, 0)); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	before := readRowIDs(t, cat, ident)
	if err := w.Upsert(ctx, tsBatch([]int64{3, 4, 50}, 7)); err != nil {
		t.Fatal(err)
	}
	del := tsBatch([]int64{10, 11}, 0)
	if err := w.Delete(ctx, del); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// A second round on rewritten files: their partition values (dates) must prune and match as before.
	if err := w.Upsert(ctx, tsBatch([]int64{3, 8}, 7)); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	after := readRowIDs(t, cat, ident)
	if len(after) != 98 {
		t.Fatalf("%d rows, want 98", len(after))
	}
	seen := map[int64]bool{}
	for id, r := range after {
		if seen[r.RowID] {
			t.Fatalf("_row_id %d twice", r.RowID)
		}
		seen[r.RowID] = true
		switch id {
		case 3, 4, 8, 50:
			if r.V != 7 {
				t.Fatalf("id %d: v=%d, want 7", id, r.V)
			}
		case 10, 11:
			t.Fatalf("deleted id %d still there", id)
		default:
			if r.V != 0 || r.RowID != before[id].RowID {
				t.Fatalf("untouched id %d: v=%d _row_id %d, was %d", id, r.V, r.RowID, before[id].RowID)
			}
		}
	}
}
