package pipeline

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/icewriter/iceberg/internal/arrowx"
	"github.com/icewriter/iceberg/internal/encode"
)

// TestGatherCopiesEveryType gathers slices of a record holding every gatherable type (nulls, nested nulls and
// empty lists included) and compares the result with the same rows concatenated by arrow-go.
func TestGatherCopiesEveryType(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	entry := arrow.StructOf(arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		arrow.Field{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true})
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "i8", Type: arrow.PrimitiveTypes.Int8, Nullable: true},
		{Name: "i16", Type: arrow.PrimitiveTypes.Int16, Nullable: true},
		{Name: "i32", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "i64", Type: arrow.PrimitiveTypes.Int64},
		{Name: "u8", Type: arrow.PrimitiveTypes.Uint8, Nullable: true},
		{Name: "u16", Type: arrow.PrimitiveTypes.Uint16, Nullable: true},
		{Name: "u32", Type: arrow.PrimitiveTypes.Uint32, Nullable: true},
		{Name: "u64", Type: arrow.PrimitiveTypes.Uint64, Nullable: true},
		{Name: "f32", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "d32", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
		{Name: "d64", Type: arrow.FixedWidthTypes.Date64, Nullable: true},
		{Name: "t32", Type: arrow.FixedWidthTypes.Time32ms, Nullable: true},
		{Name: "t64", Type: arrow.FixedWidthTypes.Time64us, Nullable: true},
		{Name: "ts", Type: arrow.FixedWidthTypes.Timestamp_us, Nullable: true},
		{Name: "dec", Type: &arrow.Decimal128Type{Precision: 10, Scale: 2}, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "ls", Type: arrow.BinaryTypes.LargeString, Nullable: true},
		{Name: "bin", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "lbin", Type: arrow.BinaryTypes.LargeBinary, Nullable: true},
		{Name: "fixed", Type: &arrow.FixedSizeBinaryType{ByteWidth: 3}, Nullable: true},
		{Name: "st", Type: entry, Nullable: true},
		{Name: "list", Type: arrow.ListOf(entry), Nullable: true},
		{Name: "llist", Type: arrow.LargeListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
		{Name: "m", Type: arrow.MapOf(arrow.BinaryTypes.String, entry), Nullable: true},
	}, nil)
	if !Gatherable(schema) {
		t.Fatal("every type of the schema should be gatherable")
	}
	const rows = 40
	// Rows from JSON: nulls every fifth row, empty lists every seventh, nested nulls in between.
	var js []byte
	js = append(js, '[')
	for i := range rows {
		if i > 0 {
			js = append(js, ',')
		}
		js = append(js, rowJSON(i)...)
	}
	js = append(js, ']')
	rec, _, err := array.RecordFromJSON(mem, schema, bytes.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	g := newGather(mem, Record{Rec: rec})
	var parts []arrow.RecordBatch
	for lo := int64(0); lo < rows; {
		hi := min(rows, lo+1+lo%4)
		part := rec.NewSlice(lo, hi)
		g.add(Record{Rec: part, Size: recordViewSize(part)})
		parts = append(parts, part)
		lo = hi
	}
	got := g.finish()
	defer got.Rec.Release()
	want, err := encode.ConcatRecords(mem, schema, parts)
	if err != nil {
		t.Fatal(err)
	}
	defer want.Release()
	for _, p := range parts {
		p.Release()
	}
	for i := range schema.NumFields() {
		if !array.Equal(got.Rec.Column(i), want.Column(i)) {
			t.Errorf("column %s: gathered %v, want %v", schema.Field(i).Name, got.Rec.Column(i), want.Column(i))
		}
	}
	var wantSize int64
	for _, c := range want.Columns() {
		wantSize += arrowx.ArraySize(c.Data())
	}
	// The count is an estimate made slice by slice (offsets and validity of each): within 2x of the bytes held.
	if got.Size <= wantSize/2 || got.Size > 2*wantSize {
		t.Errorf("gathered rows counted as %d bytes; concatenated they hold %d", got.Size, wantSize)
	}
}

// rowJSON is row i of TestGatherCopiesEveryType's record.
func rowJSON(i int) string {
	if i%5 == 0 {
		return fmt.Sprintf(`{"i64": %d}`, i)
	}
	tags := `["a", null, "c"]`
	if i%7 == 0 {
		tags = `[]`
	}
	entry := fmt.Sprintf(`{"x": %d, "tags": %s}`, i, tags)
	if i%3 == 0 {
		entry = `{"x": null, "tags": null}`
	}
	return fmt.Sprintf(`{"b": %t, "i8": %d, "i16": %d, "i32": %d, "i64": %d, "u8": %d, "u16": %d, "u32": %d, "u64": %d,
		"f32": %d.5, "f64": %d.25, "d32": "2024-01-%02d", "d64": "2024-02-%02d", "t32": "12:00:%02d.000",
		"t64": "13:00:%02d.000001", "ts": "2024-03-04T05:06:%02d.000007Z", "dec": "%d.25", "s": "s%d",
		"ls": "ls%d", "bin": "AQI=", "lbin": "AwQ=", "fixed": "AQID", "st": %s, "list": [%s, null, %s],
		"llist": [%d, null], "m": [{"key": "k", "value": %s}]}`,
		i%2 == 0, i, i, i, i, i, i, i, i, i, i, 1+i%28, 1+i%28, i%60, i%60, i%60, i, i, i, entry, entry, entry,
		i, entry)
}
