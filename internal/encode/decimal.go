package encode

import (
	"encoding/binary"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// writeRowGroup writes rec (the file's schema, at most a row group's rows) as one row group of fw, as fw.Write
// does, except that its top-level decimal columns are handed to arrow-go as fixed-size binary arrays of their
// Parquet width (big-endian two's complement, the bytes Parquet stores): arrow-go v18.9.0 converts a decimal
// column through a scratch buffer of 128 bytes per value (its bit width taken for bytes) and a slice header per
// value, both allocated and zeroed on every call, which made decimal columns the largest cost of a bulk file
// outside the encoders themselves. The file is the same byte for byte (the column's Parquet type and statistics
// come from the file's schema). The row group stays open until the next one starts or the file closes, so its
// last column is flushed then: pending is what that column holds so far (0 when fw.Write wrote the record).
func writeRowGroup(fw *pqarrow.FileWriter, rec arrow.RecordBatch, maxRows int64, mem memory.Allocator) (pending int64, err error) {
	fast := rec.NumRows() > 0 && rec.NumRows() <= maxRows
	if fast {
		fast = false
		for _, f := range rec.Schema().Fields() {
			if f.Type.ID() == arrow.DECIMAL128 {
				fast = true
				break
			}
		}
	}
	if !fast {
		return 0, fw.Write(rec)
	}
	if err := fw.NewRowGroupChecked(); err != nil {
		return 0, err
	}
	for _, col := range rec.Columns() {
		if dt, ok := col.DataType().(*arrow.Decimal128Type); ok {
			fixed := decimalBytes(col.(*array.Decimal128), int(pqarrow.DecimalSize(dt.Precision)), mem)
			err = fw.WriteColumnData(fixed)
			fixed.Release()
		} else {
			err = fw.WriteColumnData(col)
		}
		if err != nil {
			return 0, err
		}
	}
	return max(0, fw.RowGroupTotalCompressedBytes()-fw.RowGroupTotalBytesWritten()), nil
}

// decimalBytes is a decimal array as a fixed-size binary array of width bytes per value: each value's
// big-endian two's complement, its last width bytes (the value fits them: its precision says so). Nulls keep
// the array's validity bitmap (and offset).
func decimalBytes(arr *array.Decimal128, width int, mem memory.Allocator) arrow.Array {
	off, n := arr.Data().Offset(), arr.Len()
	buf := memory.NewResizableBuffer(mem)
	buf.Resize((off + n) * width)
	out := buf.Bytes()
	var be [16]byte
	for i, v := range arr.Values() {
		if arr.IsNull(i) {
			continue
		}
		binary.BigEndian.PutUint64(be[:8], uint64(v.HighBits()))
		binary.BigEndian.PutUint64(be[8:], v.LowBits())
		copy(out[(off+i)*width:], be[16-width:])
	}
	data := array.NewData(&arrow.FixedSizeBinaryType{ByteWidth: width}, n,
		[]*memory.Buffer{arr.Data().Buffers()[0], buf}, nil, arr.NullN(), off)
	buf.Release()
	defer data.Release()
	return array.MakeFromData(data)
}
