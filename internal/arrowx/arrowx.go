// Package arrowx holds small helpers on Arrow values that the writer's stages share.
package arrowx

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// RecordRows is how many rows the records the stages build hold at most: small calls' rows gathered, the rows
// a selection keeps, small records coalesced before encoding. Parquet writes each record's columns in one call,
// so many small records cost a column write each.
const RecordRows = 16 << 10

// ReleaseRecords releases each record that is not nil.
func ReleaseRecords(recs ...arrow.RecordBatch) {
	for _, r := range recs {
		if r != nil {
			r.Release()
		}
	}
}

// ReleaseArrays releases each array that is not nil.
func ReleaseArrays(cols []arrow.Array) {
	for _, c := range cols {
		if c != nil {
			c.Release()
		}
	}
}

// Int32Array makes an Int32 array of vs.
func Int32Array(mem memory.Allocator, vs []int32) arrow.Array {
	b := array.NewInt32Builder(mem)
	defer b.Release()
	b.AppendValues(vs, nil)
	return b.NewArray()
}

// ArraySize is the bytes an array's buffers hold, children included.
func ArraySize(d arrow.ArrayData) int64 {
	var n int64
	for _, b := range d.Buffers() {
		if b != nil {
			n += int64(b.Len())
		}
	}
	for _, ch := range d.Children() {
		n += ArraySize(ch)
	}
	return n
}

// Concat returns the chunks of c as one array: the chunk itself (retained) when there is one.
func Concat(c *arrow.Chunked) (arrow.Array, error) {
	if len(c.Chunks()) == 1 {
		a := c.Chunk(0)
		a.Retain()
		return a, nil
	}
	return array.Concatenate(c.Chunks(), memory.DefaultAllocator)
}

// ViewSize is the bytes a copy of the array's rows holds (validity counted as if present). A view of a few
// rows of a larger batch shares that batch's buffers, which ArraySize would count whole.
func ViewSize(a arrow.Array) int64 {
	n := int64(a.Len())
	if n == 0 {
		return 0
	}
	size := (n + 7) / 8
	switch a := a.(type) {
	case *array.Struct:
		for f := range a.NumField() {
			size += ViewSize(a.Field(f))
		}
	case array.ListLike:
		size += (n + 1) * 8
		start, _ := a.ValueOffsets(0)
		_, end := a.ValueOffsets(int(n - 1))
		vals := array.NewSlice(a.ListValues(), start, end)
		size += ViewSize(vals)
		vals.Release()
	case *array.String:
		size += offsetsSize(n, 4, a.ValueOffsets())
	case *array.Binary:
		size += offsetsSize(n, 4, a.ValueOffsets())
	case *array.LargeString:
		size += offsetsSize(n, 8, a.ValueOffsets())
	case *array.LargeBinary:
		size += offsetsSize(n, 8, a.ValueOffsets())
	default:
		if fw, ok := a.DataType().(arrow.FixedWidthDataType); ok {
			size += (n*int64(fw.BitWidth()) + 7) / 8
		} else {
			size += ArraySize(a.Data())
		}
	}
	return size
}

// offsetsSize is the bytes of n variable-length values: their offsets and the data they span.
func offsetsSize[T int32 | int64](n, width int64, offs []T) int64 {
	return (n+1)*width + int64(offs[n]-offs[0])
}
