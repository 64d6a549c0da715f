package conform

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/icewriter/iceberg/internal/arrowx"
)

// RowTaker copies chosen rows of arrays into arrays of their own, allocated from mem and sized exactly, for
// the layouts change streams carry most: fixed-width values (integers, floats, timestamps, dates, decimals)
// and strings or binaries; any other layout goes through compute.Take. An Apply call copies the rows it keeps
// this way: compute.Take ran each column on goroutines of its own and grew its output buffers as it went, and
// in BenchmarkApply its takes were about half of the calls' time.
type RowTaker struct {
	ctx context.Context // carries mem, for compute.Take
	mem memory.Allocator
}

// NewRowTaker makes a taker that allocates from mem.
func NewRowTaker(ctx context.Context, mem memory.Allocator) RowTaker {
	return RowTaker{ctx: compute.WithAllocator(ctx, mem), mem: mem}
}

// Record takes the rows of rec at rows, in that order.
func (t RowTaker) Record(rec arrow.RecordBatch, rows []int32) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, rec.NumCols())
	defer arrowx.ReleaseArrays(cols)
	for i, c := range rec.Columns() {
		col, err := t.Array(c, rows)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", rec.ColumnName(i), err)
		}
		cols[i] = col
	}
	return array.NewRecordBatch(rec.Schema(), cols, int64(len(rows))), nil
}

// Array takes the values of a at rows, in that order (every row within a).
func (t RowTaker) Array(a arrow.Array, rows []int32) (arrow.Array, error) {
	if out := takeDirect(t.mem, a, rows); out != nil {
		return out, nil
	}
	idx := arrowx.Int32Array(t.mem, rows)
	defer idx.Release()
	return compute.TakeArray(t.ctx, a, idx)
}

// takeDirect is RowTaker.array for the layouts it copies itself; nil for any other.
func takeDirect(mem memory.Allocator, a arrow.Array, rows []int32) arrow.Array {
	if len(rows) == 0 {
		return nil // compute.Take copes with empty arrays and their missing buffers
	}
	return takeDirectChunks(mem, []arrow.Array{a}, [][]int32{rows})
}

// takeDirectChunks takes, into one array, the values of chunks[0] at rows[0], then those of chunks[1] at
// rows[1], and so on (chunks of one type, every row within its chunk), for the layouts takeDirect copies
// itself; nil for any other, or for no rows at all.
func takeDirectChunks(mem memory.Allocator, chunks []arrow.Array, rows [][]int32) arrow.Array {
	n := 0
	for _, rs := range rows {
		n += len(rs)
	}
	if n == 0 {
		return nil
	}
	dt := chunks[0].DataType()
	for _, a := range chunks {
		d := a.Data()
		if dt.ID() == arrow.DICTIONARY || len(d.Children()) > 0 || len(d.Buffers()) < 2 || d.Buffers()[1] == nil {
			return nil
		}
	}
	var values []*memory.Buffer
	switch id := dt.ID(); {
	case id == arrow.STRING || id == arrow.BINARY:
		values = takeVarBinary[int32](mem, chunks, rows, n)
	case id == arrow.LARGE_STRING || id == arrow.LARGE_BINARY:
		values = takeVarBinary[int64](mem, chunks, rows, n)
	case id != arrow.BOOL && id != arrow.EXTENSION && id != arrow.STRING_VIEW && id != arrow.BINARY_VIEW:
		fw, ok := dt.(arrow.FixedWidthDataType)
		if !ok || fw.BitWidth()%8 != 0 {
			return nil
		}
		for _, a := range chunks {
			if len(a.Data().Buffers()) != 2 {
				return nil
			}
		}
		values = []*memory.Buffer{takeFixed(mem, chunks, fw.BitWidth()/8, rows, n)}
	default:
		return nil
	}
	validity, nulls := takeValidity(mem, chunks, rows, n)
	bufs := append([]*memory.Buffer{validity}, values...)
	out := array.NewData(dt, n, bufs, nil, nulls, 0)
	for _, b := range bufs {
		if b != nil {
			b.Release()
		}
	}
	defer out.Release()
	return array.MakeFromData(out)
}

// takeValidity returns the validity bitmap of the n rows taken (nil when none is null) and their nulls.
func takeValidity(mem memory.Allocator, chunks []arrow.Array, rows [][]int32, n int) (*memory.Buffer, int) {
	hasNulls := false
	for j, a := range chunks {
		hasNulls = hasNulls || (a.NullN() > 0 && len(rows[j]) > 0)
	}
	if !hasNulls {
		return nil, 0
	}
	buf := memory.NewResizableBuffer(mem)
	buf.Resize(int(bitutil.BytesForBits(int64(n))))
	bits := buf.Bytes()
	clear(bits)
	nulls, i := 0, 0
	for j, a := range chunks {
		if a.NullN() == 0 {
			bitutil.SetBitsTo(bits, int64(i), int64(len(rows[j])), true)
			i += len(rows[j])
			continue
		}
		for _, r := range rows[j] {
			if a.IsValid(int(r)) {
				bitutil.SetBit(bits, i)
			} else {
				nulls++
			}
			i++
		}
	}
	return buf, nulls
}

// takeFixed copies the width-byte values of the n rows taken.
func takeFixed(mem memory.Allocator, chunks []arrow.Array, width int, rows [][]int32, n int) *memory.Buffer {
	buf := memory.NewResizableBuffer(mem)
	buf.Resize(n * width)
	dst := buf.Bytes()
	for j, a := range chunks {
		d := a.Data()
		src := d.Buffers()[1].Bytes()[d.Offset()*width:]
		if width == 8 {
			dst64, src64 := arrow.Uint64Traits.CastFromBytes(dst), arrow.Uint64Traits.CastFromBytes(src)
			for i, r := range rows[j] {
				dst64[i] = src64[r]
			}
		} else {
			for i, r := range rows[j] {
				copy(dst[i*width:(i+1)*width], src[int(r)*width:])
			}
		}
		dst = dst[len(rows[j])*width:]
	}
	return buf
}

// takeVarBinary copies the strings or binaries (offsets of type O) of the n rows taken: the offsets, then the
// bytes.
func takeVarBinary[O int32 | int64](mem memory.Allocator, chunks []arrow.Array, rows [][]int32, n int) []*memory.Buffer {
	offBuf := memory.NewResizableBuffer(mem)
	offBuf.Resize((n + 1) * int(unsafe.Sizeof(O(0))))
	offs := offsetsOf[O](offBuf.Bytes())
	var size O
	offs[0] = 0
	i := 0
	for j, a := range chunks {
		d := a.Data()
		srcOffs := offsetsOf[O](d.Buffers()[1].Bytes())[d.Offset() : d.Offset()+d.Len()+1]
		for _, r := range rows[j] {
			size += srcOffs[r+1] - srcOffs[r]
			i++
			offs[i] = size
		}
	}
	valBuf := memory.NewResizableBuffer(mem)
	valBuf.Resize(int(size))
	// Runs of consecutive rows are one copy each: an Apply call keeps most of its rows, and a copy per value was
	// most of the time taken for a column of short strings.
	dst := valBuf.Bytes()
	at := 0 // the first output row of chunk j
	for j, a := range chunks {
		d := a.Data()
		srcOffs := offsetsOf[O](d.Buffers()[1].Bytes())[d.Offset() : d.Offset()+d.Len()+1]
		var src []byte
		if b := d.Buffers()[2]; b != nil {
			src = b.Bytes()
		}
		rs, o := rows[j], offs[at:]
		for i := 0; i < len(rs); {
			k := i + 1
			for k < len(rs) && rs[k] == rs[k-1]+1 {
				k++
			}
			copy(dst[o[i]:o[k]], src[srcOffs[rs[i]]:srcOffs[rs[k-1]+1]])
			i = k
		}
		at += len(rs)
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
