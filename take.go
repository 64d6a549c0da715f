package iceberg

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// rowTaker copies chosen rows of arrays into arrays of their own, allocated from mem and sized exactly, for
// the layouts change streams carry most: fixed-width values (integers, floats, timestamps, dates, decimals)
// and strings or binaries; any other layout goes through compute.Take. An Apply call copies the rows it keeps
// this way: compute.Take ran each column on goroutines of its own and grew its output buffers as it went, and
// in BenchmarkApply its takes were about half of the calls' time.
type rowTaker struct {
	ctx context.Context // carries mem, for compute.Take
	mem memory.Allocator
}

func newRowTaker(ctx context.Context, mem memory.Allocator) rowTaker {
	return rowTaker{ctx: compute.WithAllocator(ctx, mem), mem: mem}
}

// record takes the rows of rec at rows, in that order.
func (t rowTaker) record(rec arrow.RecordBatch, rows []int32) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, rec.NumCols())
	defer releaseArrays(cols)
	for i, c := range rec.Columns() {
		col, err := t.array(c, rows)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", rec.ColumnName(i), err)
		}
		cols[i] = col
	}
	return array.NewRecordBatch(rec.Schema(), cols, int64(len(rows))), nil
}

// array takes the values of a at rows, in that order (every row within a).
func (t rowTaker) array(a arrow.Array, rows []int32) (arrow.Array, error) {
	if out := takeDirect(t.mem, a, rows); out != nil {
		return out, nil
	}
	idx := int32Array(t.mem, rows)
	defer idx.Release()
	return compute.TakeArray(t.ctx, a, idx)
}

// takeDirect is rowTaker.array for the layouts it copies itself; nil for any other.
func takeDirect(mem memory.Allocator, a arrow.Array, rows []int32) arrow.Array {
	d, dt := a.Data(), a.DataType()
	if len(rows) == 0 || dt.ID() == arrow.DICTIONARY || len(d.Children()) > 0 || len(d.Buffers()) < 2 || d.Buffers()[1] == nil {
		return nil // compute.Take copes with empty arrays and their missing buffers
	}
	var values []*memory.Buffer
	switch id := dt.ID(); {
	case id == arrow.STRING || id == arrow.BINARY:
		values = takeVarBinary[int32](mem, d, rows)
	case id == arrow.LARGE_STRING || id == arrow.LARGE_BINARY:
		values = takeVarBinary[int64](mem, d, rows)
	case id != arrow.BOOL && id != arrow.EXTENSION && id != arrow.STRING_VIEW && id != arrow.BINARY_VIEW:
		fw, ok := dt.(arrow.FixedWidthDataType)
		if !ok || fw.BitWidth()%8 != 0 || len(d.Buffers()) != 2 {
			return nil
		}
		values = []*memory.Buffer{takeFixed(mem, d, fw.BitWidth()/8, rows)}
	default:
		return nil
	}
	validity, nulls := takeValidity(mem, a, rows)
	bufs := append([]*memory.Buffer{validity}, values...)
	out := array.NewData(dt, len(rows), bufs, nil, nulls, 0)
	for _, b := range bufs {
		if b != nil {
			b.Release()
		}
	}
	defer out.Release()
	return array.MakeFromData(out)
}

// takeValidity returns the validity bitmap of a's rows (nil when none is null) and their nulls.
func takeValidity(mem memory.Allocator, a arrow.Array, rows []int32) (*memory.Buffer, int) {
	if a.NullN() == 0 {
		return nil, 0
	}
	buf := memory.NewResizableBuffer(mem)
	buf.Resize(int(bitutil.BytesForBits(int64(len(rows)))))
	bits := buf.Bytes()
	clear(bits)
	nulls := 0
	for i, r := range rows {
		if a.IsValid(int(r)) {
			bitutil.SetBit(bits, i)
		} else {
			nulls++
		}
	}
	return buf, nulls
}

// takeFixed copies the width-byte values of d at rows.
func takeFixed(mem memory.Allocator, d arrow.ArrayData, width int, rows []int32) *memory.Buffer {
	buf := memory.NewResizableBuffer(mem)
	buf.Resize(len(rows) * width)
	dst := buf.Bytes()
	src := d.Buffers()[1].Bytes()[d.Offset()*width:]
	if width == 8 {
		dst64, src64 := arrow.Uint64Traits.CastFromBytes(dst), arrow.Uint64Traits.CastFromBytes(src)
		for i, r := range rows {
			dst64[i] = src64[r]
		}
		return buf
	}
	for i, r := range rows {
		copy(dst[i*width:(i+1)*width], src[int(r)*width:])
	}
	return buf
}

// takeVarBinary copies the strings or binaries (offsets of type O) of d at rows: the offsets, then the bytes.
func takeVarBinary[O int32 | int64](mem memory.Allocator, d arrow.ArrayData, rows []int32) []*memory.Buffer {
	srcOffs := offsetsOf[O](d.Buffers()[1].Bytes())[d.Offset() : d.Offset()+d.Len()+1]
	var src []byte
	if b := d.Buffers()[2]; b != nil {
		src = b.Bytes()
	}
	offBuf := memory.NewResizableBuffer(mem)
	offBuf.Resize((len(rows) + 1) * int(unsafe.Sizeof(O(0))))
	offs := offsetsOf[O](offBuf.Bytes())
	var size O
	offs[0] = 0
	for i, r := range rows {
		size += srcOffs[r+1] - srcOffs[r]
		offs[i+1] = size
	}
	valBuf := memory.NewResizableBuffer(mem)
	valBuf.Resize(int(size))
	// Runs of consecutive rows are one copy each: an Apply call keeps most of its rows, and a copy per value was
	// most of the time taken for a column of short strings.
	dst := valBuf.Bytes()
	for i := 0; i < len(rows); {
		j := i + 1
		for j < len(rows) && rows[j] == rows[j-1]+1 {
			j++
		}
		copy(dst[offs[i]:offs[j]], src[srcOffs[rows[i]]:srcOffs[rows[j-1]+1]])
		i = j
	}
	return []*memory.Buffer{offBuf, valBuf}
}

// offsetsOf views an offsets buffer as its offsets.
func offsetsOf[O int32 | int64](b []byte) []O {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*O)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/int(unsafe.Sizeof(O(0))))
}
