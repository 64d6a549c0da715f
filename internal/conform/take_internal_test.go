package conform

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/icewriter/iceberg/internal/arrowx"
)

// TestRowTakerMatchesTake: RowTaker takes the same values as compute.Take for every layout, the ones it copies
// itself (fixed widths of 1 to 16 bytes, strings and binaries with 32- and 64-bit offsets) and the ones it hands
// to compute.Take (booleans, lists), with and without nulls, from sliced arrays, for rows in any
// order with repeats and runs and for no rows at all, from one array or from several chunks of it; and nothing it allocated is left once its arrays are released.
func TestRowTakerMatchesTake(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	value := func(typ arrow.DataType, i int) string {
		switch typ.ID() {
		case arrow.STRING, arrow.LARGE_STRING:
			return fmt.Sprintf("%q", strings.Repeat("x", rng.IntN(12))+fmt.Sprint(i))
		case arrow.BINARY, arrow.LARGE_BINARY, arrow.FIXED_SIZE_BINARY:
			return `"AAECAw=="` // base64 of 4 bytes: fits the fixed size binary of 4
		case arrow.BOOL:
			return fmt.Sprint(i%3 == 0)
		case arrow.LIST:
			return fmt.Sprintf("[%d, %d]", i, -i)
		case arrow.DECIMAL128:
			return fmt.Sprintf("\"%d.%02d\"", i, i%100)
		case arrow.FLOAT64:
			return fmt.Sprintf("%d.5", i)
		case arrow.INT8:
			return fmt.Sprint(i % 100)
		}
		return fmt.Sprint(i)
	}
	types := []arrow.DataType{
		arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int8,
		arrow.PrimitiveTypes.Float64, arrow.FixedWidthTypes.Date32, arrow.FixedWidthTypes.Timestamp_us,
		&arrow.Decimal128Type{Precision: 20, Scale: 2}, &arrow.FixedSizeBinaryType{ByteWidth: 4},
		arrow.BinaryTypes.String, arrow.BinaryTypes.LargeString, arrow.BinaryTypes.Binary,
		arrow.BinaryTypes.LargeBinary, arrow.FixedWidthTypes.Boolean, arrow.ListOf(arrow.PrimitiveTypes.Int64),
	}
	for _, typ := range types {
		for _, nulls := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/nulls=%v", typ, nulls), func(t *testing.T) {
				mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
				defer mem.AssertSize(t, 0)
				const n = 300
				vals := make([]string, n)
				for i := range vals {
					vals[i] = value(typ, i)
					if nulls && rng.IntN(4) == 0 {
						vals[i] = "null"
					}
				}
				whole, _, err := array.FromJSON(memory.DefaultAllocator, typ, strings.NewReader("["+strings.Join(vals, ",")+"]"))
				if err != nil {
					t.Fatal(err)
				}
				defer whole.Release()
				src := array.NewSlice(whole, 17, n-9) // an offset into the buffers
				defer src.Release()
				if empty, err := NewRowTaker(context.Background(), mem).Array(src, nil); err != nil || empty.Len() != 0 {
					t.Fatalf("no rows: %v, %v", empty, err)
				} else {
					empty.Release()
				}
				rows := make([]int32, 150+rng.IntN(300))
				for i := range rows {
					rows[i] = int32(rng.IntN(src.Len()))
					if i > 0 && rows[i-1]+1 < int32(src.Len()) && rng.IntN(2) == 0 {
						rows[i] = rows[i-1] + 1 // runs of consecutive rows, as an Apply call keeps them
					}
				}
				got, err := NewRowTaker(context.Background(), mem).Array(src, rows)
				if err != nil {
					t.Fatal(err)
				}
				defer got.Release()
				idx := arrowx.Int32Array(memory.DefaultAllocator, rows)
				defer idx.Release()
				want, err := compute.TakeArray(context.Background(), src, idx)
				if err != nil {
					t.Fatal(err)
				}
				defer want.Release()
				if !array.Equal(got, want) {
					t.Fatalf("took\n%v\nwant\n%v", got, want)
				}
				if direct := takeDirect(memory.DefaultAllocator, src, rows); direct != nil {
					direct.Release()
				} else if id := typ.ID(); id != arrow.BOOL && id != arrow.LIST {
					t.Fatalf("%s went through compute.Take", typ)
				}
				// The same rows from src cut into three chunks (the middle one without rows taken): one array.
				cuts := []int{0, src.Len() / 3, src.Len() / 2, src.Len()}
				chunks := make([]arrow.Array, 3)
				local := make([][]int32, 3)
				var order []int32 // rows, chunk by chunk
				for j := range chunks {
					chunks[j] = array.NewSlice(src, int64(cuts[j]), int64(cuts[j+1]))
					defer chunks[j].Release()
					for _, r := range rows {
						if int(r) >= cuts[j] && int(r) < cuts[j+1] && j != 1 {
							local[j] = append(local[j], r-int32(cuts[j]))
							order = append(order, r)
						}
					}
				}
				chunked := takeDirectChunks(mem, chunks, local)
				if chunked == nil {
					return // a layout takeDirect does not copy (checked above)
				}
				defer chunked.Release()
				oidx := arrowx.Int32Array(memory.DefaultAllocator, order)
				defer oidx.Release()
				wantChunked, err := compute.TakeArray(context.Background(), src, oidx)
				if err != nil {
					t.Fatal(err)
				}
				defer wantChunked.Release()
				if !array.Equal(chunked, wantChunked) {
					t.Fatalf("took from chunks\n%v\nwant\n%v", chunked, wantChunked)
				}
			})
		}
	}
}
