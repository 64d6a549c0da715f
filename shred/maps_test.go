package shred

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func TestInferSchemaRules(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer check(t, mem)
	data := []byte(`{"id": 9007199254740993, "big": 123456789012345678901234567890, "x": 1, "obj": {"a": 1}, "arr": [1, 2], "n": null}
{"id": 1, "x": 2.5, "obj": {"b": "s"}, "arr": [], "s": "str", "ok": true}
`)
	rec, err := JSONLines(mem, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	got := map[string]string{}
	for _, f := range rec.Schema().Fields() {
		got[f.Name] = f.Type.String()
		if !f.Nullable {
			t.Errorf("%s not nullable", f.Name)
		}
	}
	want := map[string]string{
		"id": "int64", "big": "decimal(38, 0)", "x": "float64", "obj": "struct<a: int64, b: utf8>",
		"arr": "list<element: int64, nullable>", "n": "utf8", "s": "utf8", "ok": "bool",
	}
	for k, v := range want {
		if !strings.HasPrefix(strings.ReplaceAll(got[k], " nullable", ""), strings.ReplaceAll(v, " nullable", "")) {
			t.Errorf("%s: %s, want %s", k, got[k], v)
		}
	}
	if v := col(t, rec, "id").(*array.Int64).Value(0); v != 9007199254740993 {
		t.Errorf("id = %d (precision lost)", v)
	}
	big, _ := decimal128.FromString("123456789012345678901234567890", 38, 0)
	if v := col(t, rec, "big").(*array.Decimal128).Value(0); v != big {
		t.Errorf("big = %v", v.ToString(0))
	}
	if col(t, rec, "x").(*array.Float64).Value(1) != 2.5 || !col(t, rec, "n").IsNull(0) {
		t.Error("x/n values")
	}
}

func TestInferConflicts(t *testing.T) {
	cases := map[string]string{
		`{"a": 9007199254740993}` + "\n" + `{"a": 1.5}`: "a",
		`{"a": 1}` + "\n" + `{"a": "x"}`:                "a",
		`{"o": {"b": true}}` + "\n" + `{"o": {"b": 1}}`: "o.b",
		`{"a": 1e400}`: "a",
		`{"a": 123456789012345678901234567890123456789012}`: "a",
		`{"a": 18446744073709551616}` + "\n" + `{"a": 0.5}`: "a",
	}
	for in, colName := range cases {
		_, err := JSONLines(nil, []byte(in), nil)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Column != colName {
			t.Errorf("%s: err = %v, want column %s", in, err, colName)
		}
	}
	// Small ints widen to float64 exactly.
	s, err := InferSchema([]map[string]any{{"a": 1}, {"a": 2.5}})
	if err != nil || s.Field(0).Type.ID() != arrow.FLOAT64 {
		t.Errorf("widen: %v %v", s, err)
	}
}

func TestMapsTargetConversion(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer check(t, mem)
	target := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int32},
		{Name: "ts", Type: TimestampType, Nullable: true},
		{Name: "d", Type: &arrow.Decimal128Type{Precision: 10, Scale: 2}, Nullable: true},
		{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
		{Name: "addr", Type: arrow.StructOf(arrow.Field{Name: "city", Type: arrow.BinaryTypes.String, Nullable: true}), Nullable: true},
	}, nil)
	rows := []map[string]any{
		{"id": 1, "ts": "2024-01-02T03:04:05.123456Z", "d": json.Number("12.34"), "tags": []any{"a"}, "addr": map[string]any{"city": "x"}},
		{"id": int64(math.MaxInt32) + 1},
		{"id": 3, "ts": int64(1700000000000), "d": "1.005"},
		{"id": 4, "zzz": 1},
		{"ts": 1},
		{"id": 6, "ts": time.Unix(5, 0)},
	}
	var bad []int
	var errs []error
	rec, err := MapsWithOptions(mem, rows, target, MapOptions{EpochUnit: arrow.Millisecond, OnRowError: func(row int, err error) {
		bad = append(bad, row)
		errs = append(errs, err)
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	if rec.NumRows() != 2 || len(bad) != 4 {
		t.Fatalf("rows = %d, bad = %v %v", rec.NumRows(), bad, errs)
	}
	wantCols := []string{"id", "d", "zzz", "id"}
	for i, e := range errs {
		var fe *FieldError
		if !errors.As(e, &fe) || fe.Column != wantCols[i] || fe.Row != bad[i] {
			t.Errorf("row error %d: %v", i, e)
		}
	}
	ts := rec.Column(1).(*array.Timestamp)
	if ts.Value(0) != arrow.Timestamp(time.Date(2024, 1, 2, 3, 4, 5, 123456000, time.UTC).UnixMicro()) || ts.Value(1) != 5e6 {
		t.Errorf("ts = %v", ts)
	}
	if rec.Column(2).(*array.Decimal128).Value(0) != decimal128.FromI64(1234) {
		t.Errorf("d = %v", rec.Column(2))
	}
	// Without OnRowError, the first bad row fails the call.
	if _, err := Maps(mem, rows, target); err == nil || !strings.Contains(err.Error(), `column "id" (row 1)`) {
		t.Errorf("err = %v", err)
	}
}

func TestJSONLinesTarget(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer check(t, mem)
	target := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "bin", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond}, Nullable: true},
		{Name: "o", Type: arrow.StructOf(arrow.Field{Name: "k", Type: arrow.PrimitiveTypes.Int64, Nullable: true}), Nullable: true},
		{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
	}, nil)
	data := []byte(`{"id": 9223372036854775807, "s": "a\"\u00e9\ud83d\ude00", "f": 1e3, "b": true, "bin": "AQI=", "ts": "2024-01-01T00:00:00Z", "o": {"k": 5}, "l": [1, null, 3]}

{"id": 2, "s": null}
{"id": 1.5}
{"id": 3, "ts": 1}
{"id": 4, "l": [1e20]}
{"id": 5, "s": 1}
{"id": 6, "f": 1} trailing
{"id": 7, "nope": 1}
{"s": "x"}
{"id": 8, "id": 9}
`)
	var bad []int
	rec, err := JSONLines(mem, data, target, MapOptions{OnRowError: func(row int, err error) { bad = append(bad, row) }})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	if rec.NumRows() != 3 {
		t.Fatalf("rows = %d; bad = %v", rec.NumRows(), bad)
	}
	if want := []int{3, 5, 6, 7, 8, 9, 10}; len(bad) != len(want) {
		t.Errorf("bad rows = %v, want %v", bad, want)
	}
	if v := rec.Column(0).(*array.Int64).Value(0); v != math.MaxInt64 {
		t.Errorf("id = %d", v)
	}
	if v := rec.Column(1).(*array.String).Value(0); v != "a\"é😀" {
		t.Errorf("s = %q", v)
	}
	if !rec.Column(1).IsNull(1) || rec.Column(2).(*array.Float64).Value(0) != 1000 || !rec.Column(3).(*array.Boolean).Value(0) {
		t.Error("values")
	}
	if v := rec.Column(4).(*array.Binary).Value(0); string(v) != "\x01\x02" {
		t.Errorf("bin = %v", v)
	}
	if v := rec.Column(5).(*array.Timestamp).Value(2); v != 1e6 {
		t.Errorf("epoch ts = %v", v)
	}
	if s := rec.Column(6).String(); s != "{[5 (null) (null)]}" {
		t.Errorf("o = %s", s)
	}
	if s := rec.Column(7).String(); s != "[[1 (null) 3] (null) (null)]" {
		t.Errorf("l = %s", s)
	}
	_, err = JSONLines(mem, data, target)
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Column != "id" || fe.Row != 3 {
		t.Errorf("err = %v", err)
	}
}

func TestJSONLinesMatchesInferredPath(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer check(t, mem)
	data := seedJSONLines(100)
	inferred, err := JSONLines(mem, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer inferred.Release()
	target, _ := SchemaOf[SeedEvent]()
	direct, err := JSONLines(mem, data, target)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Release()
	want, err := Structs(mem, seedEvents(100), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer want.Release()
	if !array.RecordEqual(direct, want) {
		t.Errorf("direct JSON path differs from structs:\n%v\n%v", direct, want)
	}
	if inferred.NumRows() != 100 || inferred.NumCols() != 6 {
		t.Errorf("inferred: %v", inferred.Schema())
	}
}
