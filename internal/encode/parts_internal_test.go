package encode

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/icewriter/iceberg/internal/arrowx"
)

// TestCutRecords: cutting records into runs keeps every row once, in order, in runs of about equal rows, and
// leaves nothing allocated once the runs are released.
func TestCutRecords(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64}}, nil)
	var recs []arrow.RecordBatch
	next := int64(0)
	for _, n := range []int{5, 7, 3} {
		b := array.NewInt64Builder(mem)
		for range n {
			b.Append(next)
			next++
		}
		col := b.NewArray()
		b.Release()
		recs = append(recs, array.NewRecordBatch(schema, []arrow.Array{col}, int64(n)))
		col.Release()
	}
	for _, parts := range []int{1, 2, 3} {
		for _, r := range recs {
			r.Retain()
		}
		runs := cutRecords(recs, next, parts)
		if len(runs) != parts {
			t.Fatalf("%d parts: %d runs", parts, len(runs))
		}
		var got []int64
		for _, run := range runs {
			var n int64
			for _, r := range run {
				n += r.NumRows()
				got = append(got, r.Column(0).(*array.Int64).Int64Values()...)
			}
			if per := (next + int64(parts) - 1) / int64(parts); n != per && n != next-per*int64(parts-1) {
				t.Errorf("%d parts: a run of %d rows", parts, n)
			}
			arrowx.ReleaseRecords(run...)
		}
		for i, v := range got {
			if v != int64(i) || len(got) != int(next) {
				t.Fatalf("%d parts: rows %v, want 0 to %d in order", parts, got, next-1)
			}
		}
	}
	arrowx.ReleaseRecords(recs...)
}
