package encode

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// stringRows is a record of n rows: an int64 id and a string s of width bytes.
func stringRows(n, width int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.NewGoAllocator(), arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "s", Type: arrow.BinaryTypes.String},
	}, nil))
	defer b.Release()
	v := strings.Repeat("x", width)
	for i := range n {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.StringBuilder).Append(v)
	}
	return b.NewRecordBatch()
}

// TestWriteBatchRows: the write batch keeps the widest column within half a page (the table's page size), and
// is left to iceberg-go when the table sets it, when its default already does, and for records no larger
// than the batch picked.
func TestWriteBatchRows(t *testing.T) {
	wide := stringRows(16_384, 92) // 96 B a row in its widest column with the offsets
	defer wide.Release()
	narrow := stringRows(16_384, 8)
	defer narrow.Release()
	small := stringRows(1000, 92)
	defer small.Release()
	huge := stringRows(1000, 100_000)
	defer huge.Release()
	for _, c := range []struct {
		name  string
		props ice.Properties
		recs  []arrow.RecordBatch
		// half a page over the widest column's bytes a row: 96 to 98 (validity bitmaps, buffer padding)
		least, most int
	}{
		{"wide", nil, []arrow.RecordBatch{wide}, (1 << 19) / 98, (1 << 19) / 96},
		{"wide and small", nil, []arrow.RecordBatch{small, wide}, (1 << 19) / 98, (1 << 19) / 96},
		{"page size", ice.Properties{table.ParquetPageSizeBytesKey: "262144"}, []arrow.RecordBatch{wide}, (1 << 17) / 98, (1 << 17) / 96},
		{"table sets it", ice.Properties{table.ParquetPageRowLimitKey: "20000"}, []arrow.RecordBatch{wide}, 0, 0},
		{"narrow", nil, []arrow.RecordBatch{narrow}, 0, 0},
		{"small records", nil, []arrow.RecordBatch{small, small}, 0, 0},
		{"at least the minimum", nil, []arrow.RecordBatch{huge}, writeBatchMinRows, writeBatchMinRows},
		{"none", nil, nil, 0, 0},
	} {
		if got := WriteBatchRows(c.props, c.recs); got < c.least || got > c.most {
			t.Errorf("%s: write batch %d, want %d to %d", c.name, got, c.least, c.most)
		}
	}
}
