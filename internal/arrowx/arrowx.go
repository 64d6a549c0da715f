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
