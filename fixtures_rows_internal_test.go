package iceberg

import (
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Batches the internal tests write: a keyed table of ids and names, and wide partitioned rows.

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

// seqIDs returns 0, 1, ..., n-1.
func seqIDs(n int) []int64 {
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i)
	}
	return ids
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
