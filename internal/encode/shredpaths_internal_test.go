package encode

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/variant"
	ice "github.com/apache/iceberg-go"
)

// TestShredChosenPaths: Shred stores a chosen path's values of the chosen type typed and everything else in the
// residual (another type, an integer the type cannot hold, a missing path, the variant null), keeps SQL null, and
// each value reads back as written.
func TestShredChosenPaths(t *testing.T) {
	paths, err := ParseShredProperty(" a:int, n.b : STRING ")
	if err != nil {
		t.Fatal(err)
	}
	layout := ShredLayout{"v": paths}
	sc := arrow.NewSchema([]arrow.Field{{Name: "v", Type: extensions.NewDefaultVariantType(), Nullable: true}}, nil)
	docs := []string{`{"a": 5, "n": {"b": "x"}}`, `{"a": 3000000000}`, `{"a": "five", "n": {"b": 7}}`, `{"c": 1}`, `null`, ""}
	typed := []bool{true, false, false, false, false, false} // $.a typed
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	b := array.NewRecordBuilder(mem, sc)
	vb := b.Field(0).(*extensions.VariantBuilder)
	for _, d := range docs {
		if d == "" {
			vb.AppendNull()
			continue
		}
		v, err := variant.ParseJSON(d, false)
		if err != nil {
			t.Fatal(err)
		}
		vb.Append(v)
	}
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	shredded := layout.Schema(sc)
	out, err := Shred(rec, shredded, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	col := out.Column(0).(*extensions.VariantArray)
	want := "struct<metadata: binary, value: binary nullable, typed_value: struct<a: struct<value: binary nullable, typed_value: int32 nullable>, " +
		"n: struct<value: binary nullable, typed_value: struct<b: struct<value: binary nullable, typed_value: utf8 nullable>> nullable>> nullable>"
	if got := col.VariantType().StorageType().String(); got != want {
		t.Fatalf("storage %s, want %s", got, want)
	}
	a := col.Shredded().(*array.Struct).Field(0).(*array.Struct).Field(1).(*array.Int32)
	for i, d := range docs {
		if d == "" {
			if !col.Storage().IsNull(i) {
				t.Fatalf("row %d: SQL null not kept", i)
			}
			continue
		}
		v, err := col.Value(i)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := v.MarshalJSON()
		w, _ := variant.ParseJSON(d, false)
		wj, _ := w.MarshalJSON()
		if string(got) != string(wj) {
			t.Errorf("row %d: read %s, wrote %s", i, got, wj)
		}
		if a.IsValid(i) != typed[i] {
			t.Errorf("row %d (%s): $.a typed %v, want %v", i, d, a.IsValid(i), typed[i])
		}
	}
	for _, bad := range []string{"a", "a:decimal", ":long", "a[0]:long", ""} {
		if _, err := ParseShredProperty(bad); err == nil {
			t.Errorf("ParseShredProperty(%q) accepted", bad)
		}
	}
	sch := ice.NewSchema(0, ice.NestedField{ID: 1, Name: "v", Type: ice.VariantType{}})
	for _, bad := range [][]ShredPath{
		{{Fields: []string{"a"}, Type: ice.PrimitiveTypes.Int64}, {Fields: []string{"a"}, Type: ice.PrimitiveTypes.String}},
		{{Fields: []string{"a", "b"}, Type: ice.PrimitiveTypes.Int64}, {Fields: []string{"a"}, Type: ice.PrimitiveTypes.String}},
		{{Fields: []string{"a"}, Type: ice.PrimitiveTypes.UUID}},
	} {
		if err := CheckColumn(sch, "v", bad); err == nil {
			t.Errorf("CheckColumn(%v) accepted", bad)
		}
	}
}
