package encode

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	ice "github.com/apache/iceberg-go"
)

// TestDecimalRowGroupsAreThoseOfArrowGo: bulk files whose decimal columns writeRowGroup hands to arrow-go as
// fixed-size binary are byte for byte those fw.Write makes (values, nulls, statistics, dictionaries), for
// decimals of each Parquet width (4, 8, 16 bytes), negative values, the extremes of each precision, and records
// that are slices (an offset into their buffers).
func TestDecimalRowGroupsAreThoseOfArrowGo(t *testing.T) {
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "d9", Type: &arrow.Decimal128Type{Precision: 9, Scale: 2}, Nullable: true},
		{Name: "d18", Type: &arrow.Decimal128Type{Precision: 18, Scale: 4}},
		{Name: "d38", Type: &arrow.Decimal128Type{Precision: 38, Scale: 10}, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	nines := func(digits int32) decimal128.Num {
		return decimal128.GetScaleMultiplier(int(digits)).Sub(decimal128.FromU64(1))
	}
	record := func(rows, seed int) arrow.RecordBatch {
		b := array.NewRecordBuilder(mem, sc)
		defer b.Release()
		for i := range rows {
			v := int64(i*7919+seed) % 1000
			b.Field(0).(*array.Int64Builder).Append(int64(i + seed))
			d9 := b.Field(1).(*array.Decimal128Builder)
			switch {
			case i%5 == 0:
				d9.AppendNull()
			case i == 1:
				d9.Append(nines(9))
			case i == 2:
				d9.Append(nines(9).Negate())
			default:
				d9.Append(decimal128.FromI64(v - 500))
			}
			d18 := b.Field(2).(*array.Decimal128Builder)
			switch i {
			case 3:
				d18.Append(nines(18))
			case 4:
				d18.Append(nines(18).Negate())
			default:
				d18.Append(decimal128.FromI64((v - 500) * 1_000_003))
			}
			d38 := b.Field(3).(*array.Decimal128Builder)
			switch {
			case i%7 == 0:
				d38.AppendNull()
			case i == 5:
				d38.Append(nines(38))
			case i == 6:
				d38.Append(nines(38).Negate())
			default:
				d38.Append(decimal128.FromI64(v - 500).Mul(decimal128.FromU64(1 << 62)))
			}
			if i%3 == 0 {
				b.Field(4).AppendNull()
			} else {
				b.Field(4).(*array.StringBuilder).Append(fmt.Sprint("s", v%13))
			}
		}
		return b.NewRecordBatch()
	}
	write := func(fast bool) []byte {
		var out bytes.Buffer
		arrProps := pqarrow.NewArrowWriterProperties(pqarrow.WithAllocator(mem), pqarrow.WithStoreSchema())
		props, err := bulkWriterProps(ice.Properties{}, 1000, 0, sc, arrProps)
		if err != nil {
			t.Fatal(err)
		}
		fw, err := pqarrow.NewFileWriter(sc, &out, props, arrProps)
		if err != nil {
			t.Fatal(err)
		}
		whole := record(1000, 0)
		defer whole.Release()
		sliced := whole.NewSlice(13, 990) // an offset into every buffer
		defer sliced.Release()
		other := record(300, 5)
		defer other.Release()
		for _, rec := range []arrow.RecordBatch{whole, sliced, other} {
			if fast {
				_, err = writeRowGroup(fw, rec, 1000, mem)
			} else {
				err = fw.Write(rec)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := fw.Close(); err != nil {
			t.Fatal(err)
		}
		return out.Bytes()
	}
	want, got := write(false), write(true)
	if !bytes.Equal(got, want) {
		t.Fatalf("writeRowGroup's file (%d bytes) differs from fw.Write's (%d bytes)", len(got), len(want))
	}
}
