package shred

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/variant"
	"github.com/google/uuid"
)

// Variant values from JSON text and Go values: read back through arrow-go's
// VariantArray (which validates each value) and compared by meaning with
// what was written.

// canonJSON is JSON text with every number as an exact rational (a number
// with an exponent or more than 38 digits as the double it parses to, as
// AppendVariantJSON stores it), keys sorted: 1.50 and 1.5 compare equal, 1
// and 1.1 do not.
func canonJSON(t *testing.T, b []byte) string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	out, err := json.Marshal(canonNumbers(v))
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func canonNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		digits := strings.TrimLeft(strings.NewReplacer("-", "", ".", "").Replace(string(x)), "0")
		if strings.ContainsAny(string(x), "eE") || len(digits) > 38 {
			f, _ := x.Float64()
			return new(big.Rat).SetFloat64(f).RatString()
		}
		r, _ := new(big.Rat).SetString(string(x))
		return r.RatString()
	case map[string]any:
		for k, e := range x {
			x[k] = canonNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = canonNumbers(e)
		}
	}
	return v
}

// variantGo is a variant value as the Go tree canonJSON makes of its JSON:
// numbers as exact rationals, other primitives as their JSON.
func variantGo(t *testing.T, v variant.Value) any {
	t.Helper()
	switch x := v.Value().(type) {
	case variant.ObjectValue:
		m := map[string]any{}
		for k, e := range x.Values() {
			m[k] = variantGo(t, e)
		}
		return m
	case variant.ArrayValue:
		a := []any{}
		for e := range x.Values() {
			a = append(a, variantGo(t, e))
		}
		return a
	case float64:
		return new(big.Rat).SetFloat64(x).RatString()
	case float32:
		return new(big.Rat).SetFloat64(float64(x)).RatString()
	case int8, int16, int32, int64:
		r, _ := new(big.Rat).SetString(fmt.Sprint(x))
		return r.RatString()
	}
	j, err := v.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	switch v.Type() {
	case variant.Decimal4, variant.Decimal8, variant.Decimal16:
		r, ok := new(big.Rat).SetString(string(j))
		if !ok {
			t.Fatalf("decimal %s", j)
		}
		return r.RatString()
	}
	var g any
	if err := json.Unmarshal(j, &g); err != nil {
		t.Fatalf("%s: %v", j, err)
	}
	return g
}

// variantCells reads a variant array, each value validated by
// variant.New: each row's canonical JSON, "SQL NULL" for a null row (a
// variant null reads "null").
func variantCells(t *testing.T, a arrow.Array) []string {
	t.Helper()
	va, ok := a.(*extensions.VariantArray)
	if !ok {
		t.Fatalf("column is %T, not a variant array", a)
	}
	out := make([]string, va.Len())
	for i := range out {
		if va.Storage().IsNull(i) {
			out[i] = "SQL NULL"
			continue
		}
		v, err := va.Value(i)
		if err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
		meta := va.Metadata().Value(i)
		if _, err := variant.New(meta, v.Bytes()); err != nil {
			t.Fatalf("row %d: invalid variant: %v", i, err)
		}
		j, err := json.Marshal(variantGo(t, v))
		if err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
		out[i] = string(j)
	}
	return out
}

// canonAll canonicalizes the JSON texts of want, leaving "SQL NULL".
func canonAll(t *testing.T, want []string) []string {
	out := make([]string, len(want))
	for i, w := range want {
		out[i] = w
		if w != "SQL NULL" {
			out[i] = canonJSON(t, []byte(w))
		}
	}
	return out
}

func newVariantBuilder(mem memory.Allocator) *extensions.VariantBuilder {
	return extensions.NewVariantBuilder(mem, extensions.NewDefaultVariantType())
}

func TestAppendVariantJSON(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer check(t, mem)
	docs := []string{
		`{}`, `[]`, `null`, `true`, `false`, `0`, `-0`, `"s"`, `""`,
		` {"a": 1, "b": [1, 2.5, "x", null, {"c": false}], "d": {"e": {"f": [[]]}}} `,
		`{"esc\"aped": "line\nbreak \u00e9 \ud83d\ude00", "k\u0041": "\/"}`,
		`[127, 128, 32767, 32768, 2147483647, 2147483648, 9223372036854775807, -9223372036854775808]`,
		`[9223372036854775808, 123456789012345678901234567890, 1.5, 0.001, -12.345, 12345678901.25, 1e5, 1.5E-3]`,
		`{"` + strings.Repeat("k", 300) + `": "` + strings.Repeat("v", 300) + `"}`,
		`[` + strings.Repeat(`{"x":`, 200) + `1` + strings.Repeat(`}`, 200) + `]`,
	}
	r := rand.New(rand.NewPCG(5, 6))
	for range 500 {
		docs = append(docs, string(variantDoc(nil, r, 0)))
	}
	vb := newVariantBuilder(mem)
	defer vb.Release()
	for _, d := range docs {
		if err := AppendVariantJSON(vb, []byte(d)); err != nil {
			t.Fatalf("%s: %v", d, err)
		}
	}
	arr := vb.NewArray()
	defer arr.Release()
	got := variantCells(t, arr)
	for i, d := range docs {
		if w := canonJSON(t, []byte(d)); got[i] != w {
			t.Errorf("doc %d: read back %s, want %s", i, got[i], d)
		}
	}
	if got[2] != "null" {
		t.Errorf("JSON null reads %s, want the variant null", got[2])
	}
}

func TestAppendVariantJSONNumberTypes(t *testing.T) {
	for doc, want := range map[string]variant.Type{
		`1`: variant.Int8, `-129`: variant.Int16, `40000`: variant.Int32, `3000000000`: variant.Int64,
		`9223372036854775808`: variant.Decimal16, `1.5`: variant.Decimal4, `0.000000001`: variant.Decimal4,
		`0.0000000001`: variant.Decimal8, `12345678901.5`: variant.Decimal8,
		`1234567890123456789.5`: variant.Decimal16, `1e5`: variant.Double, `2.5E-1`: variant.Double,
		`1234567890123456789012345678901234567890.5`: variant.Double,
	} {
		vb := newVariantBuilder(memory.DefaultAllocator)
		if err := AppendVariantJSON(vb, []byte(doc)); err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		arr := vb.NewArray().(*extensions.VariantArray)
		v, err := arr.Value(0)
		if err != nil {
			t.Fatal(err)
		}
		if v.Type() != want {
			t.Errorf("%s: type %v, want %v", doc, v.Type(), want)
		}
		if v.Type() != variant.Double {
			if j, _ := json.Marshal(variantGo(t, v)); string(j) != canonJSON(t, []byte(doc)) {
				t.Errorf("%s reads back %s", doc, j)
			}
		}
		arr.Release()
		vb.Release()
	}
}

func TestAppendVariantJSONErrors(t *testing.T) {
	vb := newVariantBuilder(memory.DefaultAllocator)
	defer vb.Release()
	for _, doc := range []string{``, ` `, `{`, `{"a":}`, `[1,]`, `{"a":1}x`, `{"a":1} {"b":2}`, `nul`, `nope`,
		`"\x"`, `01`, `{"a":1,"a":2}`, `{"a":1,}`, `[1 2]`, `{"a"}`, "\"\xff\"",
		strings.Repeat("[", 1100) + strings.Repeat("]", 1100)} {
		err := AppendVariantJSON(vb, []byte(doc))
		if !errors.Is(err, ErrInvalidJSON) {
			t.Errorf("%q: err = %v, want ErrInvalidJSON", doc, err)
		}
		if doc == `{"a":1,"a":2}` {
			continue
		}
		err = AppendVariantJSONWithOptions(vb, []byte(doc), VariantJSONOptions{LastKeyWins: true, ExactNumbers: true})
		if !errors.Is(err, ErrInvalidJSON) {
			t.Errorf("%q with options: err = %v, want ErrInvalidJSON", doc, err)
		}
	}
	if err := AppendVariantJSON(vb, []byte(`1e400`)); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("1e400: err = %v, want ErrOutOfRange", err)
	}
	if vb.Len() != 0 {
		t.Errorf("%d values appended by failed calls", vb.Len())
	}
}

// TestAppendVariantJSONLastKeyWins: with LastKeyWins a key given twice keeps
// its last value, at any depth, and the document reads back as encoding/json
// reads it; without, it is an error (also right after a call with the option:
// pooled encoders forget it).
func TestAppendVariantJSONLastKeyWins(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer check(t, mem)
	docs := []string{
		`{"b":1,"a":{"y":[1,2],"x":null},"a":{"z":"last"}}`,
		`{"k":1,"k":2,"k":3}`,
		`{"o":{"k":1,"k":{"deep":true}},"k":[{"k":1,"k":"two"}],"o":{"k":[1,{"k":1,"k":0.5}],"k":"x"}}`,
		`{"a\u0062":1,"ab":2}`, // the same key, escaped once
		`{"` + strings.Repeat("k", 300) + `":1,"z":2,"` + strings.Repeat("k", 300) + `":"long"}`,
		`{"a":1,"b":2}`, `[]`, `"s"`,
	}
	// An object of 300 keys (the large object encoding), each given twice.
	var big strings.Builder
	big.WriteString("{")
	for i := range 600 {
		fmt.Fprintf(&big, `"k%03d":%d,`, i%300, i)
	}
	big.WriteString(`"end":null}`)
	docs = append(docs, big.String())
	vb := newVariantBuilder(mem)
	defer vb.Release()
	for _, d := range docs {
		if err := AppendVariantJSONWithOptions(vb, []byte(d), VariantJSONOptions{LastKeyWins: true}); err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		if err := AppendVariantJSON(newVariantBuilder(memory.DefaultAllocator), []byte(`{"a":1,"a":2}`)); !errors.Is(err, ErrInvalidJSON) {
			t.Fatalf("AppendVariantJSON after a LastKeyWins call: %v, want ErrInvalidJSON", err)
		}
	}
	arr := vb.NewArray()
	defer arr.Release()
	got := variantCells(t, arr)
	for i, d := range docs {
		if want := canonJSON(t, []byte(d)); got[i] != want {
			t.Errorf("%.80s: reads back %.200s, want %.200s", d, got[i], want)
		}
	}
}

// TestAppendVariantJSONExactNumbers: with ExactNumbers every number accepted
// reads back as the same number, and the others wrap ErrInexactNumber and
// append nothing; without, they are the nearest double (past a double's
// range ErrOutOfRange either way).
func TestAppendVariantJSONExactNumbers(t *testing.T) {
	exact := VariantJSONOptions{ExactNumbers: true}
	kept := []string{"0", "-0", "-0.0", "-0e5", "0e999", "42", "-9223372036854775808",
		"9223372036854775807", "9223372036854775808", "12345678901234567890123456789012345678",
		"-12345678901234567890123456789012345678", "0.1", "-12.50", "1e-7", "1.0e-5", "1E+2", "1e20", "1.5e300",
		"0.00000000000000000000000000000000000001", "3.141592653589793", "1.7976931348623157e308", "5e-324",
		"100000000000000000000000000000000000000000", "0.000000000000000000000000000000000000000001",
		"1.000000000000000000000000000000000000000", "15000000000000000000000000000000000000000000e-3"}
	for _, s := range kept {
		vb := newVariantBuilder(memory.DefaultAllocator)
		if err := AppendVariantJSONWithOptions(vb, []byte(s), exact); err != nil {
			t.Errorf("%s: %v", s, err)
			vb.Release()
			continue
		}
		arr := vb.NewArray().(*extensions.VariantArray)
		v, err := arr.Value(0)
		if err != nil {
			t.Fatal(err)
		}
		b, err := v.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		got, _ := new(big.Rat).SetString(string(b))
		want, _ := new(big.Rat).SetString(s)
		if got == nil || got.Cmp(want) != 0 {
			t.Errorf("%s reads back as %s", s, b)
		}
		arr.Release()
		vb.Release()
	}
	vb := newVariantBuilder(memory.DefaultAllocator)
	defer vb.Release()
	for _, s := range []string{"1e400", "-1e400", "1e-400", "1e-99999999999999999999", "4e-324", "123456789012345678901234567890123456789012",
		"0.0000000000000000000000000000000000000000011000000000000000001", "100000000000000000000000000000000000000000000.5",
		"1.00000000000000000001e0", `{"a": [1, 0.1234567890123456789012345678901234567890123]}`, `{"x\\": 1e400}`} {
		err := AppendVariantJSONWithOptions(vb, []byte(s), exact)
		if !errors.Is(err, ErrInexactNumber) {
			t.Errorf("%s: %v, want ErrInexactNumber", s, err)
		}
		err = AppendVariantJSON(vb, []byte(s))
		if outside := strings.Contains(s, "e400"); outside != errors.Is(err, ErrOutOfRange) || !outside && err != nil {
			t.Errorf("%s without ExactNumbers: %v", s, err)
		}
	}
	if vb.Len() != 8 {
		t.Errorf("%d values appended, want the 8 accepted without ExactNumbers", vb.Len())
	}
}

type variantInner struct {
	Name string
	When time.Time `json:"when"`
	skip int
}

func TestAppendVariantGoValues(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer check(t, mem)
	nested, err := variant.ParseJSON(`{"p": [1, {"q": "r"}]}`, false)
	if err != nil {
		t.Fatal(err)
	}
	when := time.Date(2024, 2, 3, 4, 5, 6, 7000, time.FixedZone("X", 3600))
	whenNs := time.Date(1969, 12, 31, 23, 59, 59, 999999999, time.UTC)
	values := []any{
		map[string]any{"a": 1, "b": []any{true, nil, "x", 2.5}, "c": map[string]any{}},
		[]any{int8(-1), uint16(7), uint64(math.MaxUint64), float32(0.5), json.Number("1.25")},
		json.RawMessage(`{"raw": [1, 2]}`),
		map[string]any{"raw": json.RawMessage(`null`), "v": nested},
		variantInner{Name: "n", When: when},
		map[int]string{3: "three"},
		[]byte{1, 2, 3},
		uuid.MustParse("0b7e8d3c-2f4b-4b8a-9a7e-1c2d3e4f5a6b"),
		map[string]any{"t": whenNs},
		nil,
		(*int)(nil),
		map[string]any(nil),
		json.RawMessage(`null`),
		variant.Value{},
	}
	want := []string{
		`{"a":1,"b":[true,null,"x",2.5],"c":{}}`,
		`[-1,7,18446744073709551615,0.5,1.25]`,
		`{"raw":[1,2]}`,
		`{"raw":null,"v":{"p":[1,{"q":"r"}]}}`,
		`{"name":"n","when":"2024-02-03 03:05:06.000007Z"}`,
		`{"3":"three"}`,
		`"AQID"`,
		`"0b7e8d3c-2f4b-4b8a-9a7e-1c2d3e4f5a6b"`,
		`{"t":"1969-12-31 23:59:59.999999999Z"}`,
		"SQL NULL", "SQL NULL", "SQL NULL", "null", "SQL NULL",
	}
	vb := newVariantBuilder(mem)
	defer vb.Release()
	for _, v := range values {
		if err := AppendVariant(vb, v); err != nil {
			t.Fatalf("%#v: %v", v, err)
		}
	}
	arr := vb.NewArray()
	defer arr.Release()
	got := variantCells(t, arr)
	want = canonAll(t, want)
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("value %d: read back %s, want %s", i, got[i], want[i])
		}
	}
	va := arr.(*extensions.VariantArray)
	if v, _ := va.Value(8); v.Value().(variant.ObjectValue).NumElements() != 1 {
		t.Error("value 8 is not a one-field object")
	}
	if f, _ := func() (variant.ObjectField, error) {
		v, _ := va.Value(8)
		return v.Value().(variant.ObjectValue).ValueByKey("t")
	}(); f.Value.Type() != variant.TimestampNanos {
		t.Errorf("a time with nanoseconds has type %v, want TimestampNanos", f.Value.Type())
	}
	if f, _ := func() (variant.ObjectField, error) {
		v, _ := va.Value(4)
		return v.Value().(variant.ObjectValue).ValueByKey("when")
	}(); f.Value.Type() != variant.TimestampMicros {
		t.Errorf("a time in whole microseconds has type %v, want TimestampMicros", f.Value.Type())
	}

	n := vb.Len()
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	for i, bad := range []any{
		map[string]any{"a": []any{1, complex(1, 2)}},
		map[string]any{"f": func() {}},
		json.RawMessage(`{"a":`),
		map[string]any{"t": time.Date(2300, 1, 1, 0, 0, 0, 1, time.UTC)},
		cyclic,
	} {
		err := AppendVariant(vb, bad)
		if err == nil {
			t.Errorf("bad value %d: no error", i)
		}
		if i == 0 && (!errors.Is(err, ErrUnsupportedType) || !strings.Contains(err.Error(), "a[1]")) {
			t.Errorf("complex value: err = %v, want ErrUnsupportedType naming a[1]", err)
		}
	}
	if vb.Len() != n {
		t.Errorf("failed calls appended %d values", vb.Len()-n)
	}
}

// variantRow has a variant field of each Go type that writes into one.
type variantRow struct {
	ID  int64
	Any any
	Map map[string]any
	Arr []any
	Raw json.RawMessage
	Val variant.Value
	PR  *json.RawMessage
}

func TestSchemaOfVariantFields(t *testing.T) {
	type ts struct {
		At   time.Time   `iceberg:"at,ns"`
		PAt  *time.Time  `iceberg:",ns"`
		Many []time.Time `iceberg:"many,ns"`
		Opt  time.Time   `iceberg:"opt"`
	}
	s, err := SchemaOf[variantRow]()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"any", "map", "arr", "raw", "val", "pr"} {
		f, _ := s.FieldsByName(name)
		if len(f) != 1 || f[0].Type.ID() != arrow.EXTENSION || f[0].Type.(arrow.ExtensionType).ExtensionName() != extensions.NewDefaultVariantType().ExtensionName() {
			t.Errorf("column %s: %v, want variant", name, f)
		}
	}
	s, err = SchemaOf[ts]()
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"timestamp[ns, tz=UTC]", "timestamp[ns, tz=UTC]", "list<element: timestamp[ns, tz=UTC], nullable>", "timestamp[us, tz=UTC]"} {
		if got := s.Field(i).Type.String(); got != want {
			t.Errorf("field %s: %s, want %s", s.Field(i).Name, got, want)
		}
	}
	type bad struct {
		N int64 `iceberg:"n,ns"`
	}
	var fe *FieldError
	if _, err := SchemaOf[bad](); !errors.As(err, &fe) || fe.Column != "n" {
		t.Errorf("ns on an int64 field: err = %v, want a FieldError naming n", err)
	}
}

func TestStructsIntoVariant(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer check(t, mem)
	nested, _ := variant.ParseJSON(`{"z": [1, 2]}`, false)
	raw := json.RawMessage(`{"p": "q"}`)
	rows := []variantRow{
		{ID: 1, Any: map[string]any{"k": []any{1, "two"}}, Map: map[string]any{"m": 1.5}, Arr: []any{"a", nil},
			Raw: json.RawMessage(` [1, {"x": null}] `), Val: nested, PR: &raw},
		{ID: 2, Any: 42, Raw: json.RawMessage(`null`), Map: map[string]any{}, Arr: []any{}},
		{ID: 3},
	}
	target, err := SchemaOf[variantRow]()
	if err != nil {
		t.Fatal(err)
	}
	rec, err := Structs(mem, rows, target)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	want := map[string][]string{
		"any": {`{"k":[1,"two"]}`, `42`, "SQL NULL"},
		"map": {`{"m":1.5}`, `{}`, "SQL NULL"},
		"arr": {`["a",null]`, `[]`, "SQL NULL"},
		"raw": {`[1,{"x":null}]`, `null`, "SQL NULL"},
		"val": {`{"z":[1,2]}`, "SQL NULL", "SQL NULL"},
		"pr":  {`{"p":"q"}`, "SQL NULL", "SQL NULL"},
	}
	for name, w := range want {
		if got := variantCells(t, col(t, rec, name)); !reflect.DeepEqual(got, canonAll(t, w)) {
			t.Errorf("column %s = %q, want %q", name, got, w)
		}
	}

	// Bad values name the column and the row; the converter stays usable.
	c, err := NewConverter[variantRow](target)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	for _, bad := range []struct {
		row  variantRow
		col  string
		want error
	}{
		{variantRow{Raw: json.RawMessage(`{"a": tru}`)}, "raw", ErrInvalidJSON},
		{variantRow{Any: map[string]any{"c": make(chan int)}}, "any", ErrUnsupportedType},
		{variantRow{Arr: []any{time.Date(1500, 1, 1, 0, 0, 0, 1, time.UTC)}}, "arr", ErrOutOfRange},
	} {
		_, err := c.Convert(mem, []variantRow{{ID: 9}, bad.row})
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Column != bad.col || fe.Row != 1 || !errors.Is(err, bad.want) {
			t.Errorf("%s: err = %v, want a FieldError for column %s row 1 wrapping %v", bad.col, err, bad.col, bad.want)
		}
	}
	rec2, err := c.Convert(mem, rows[:1])
	if err != nil {
		t.Fatalf("converter after errors: %v", err)
	}
	rec2.Release()

	// A null row in a required variant column.
	req := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "any", Type: extensions.NewDefaultVariantType()}}, nil)
	type two struct {
		ID  int64
		Any any
	}
	_, err = Structs(mem, []two{{ID: 1, Any: "x"}, {ID: 2}}, req)
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Column != "any" || fe.Row != 1 || !errors.Is(err, ErrNull) {
		t.Errorf("nil into a required variant column: err = %v", err)
	}
}

func TestMapsIntoVariant(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer check(t, mem)
	target := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "doc", Type: extensions.NewDefaultVariantType(), Nullable: true},
		{Name: "s", Type: arrow.StructOf(arrow.Field{Name: "inner", Type: extensions.NewDefaultVariantType(), Nullable: true}), Nullable: true},
	}, nil)
	rows := []map[string]any{
		{"id": int64(1), "doc": map[string]any{"a": []any{json.Number("1.10"), "b"}}, "s": map[string]any{"inner": 5}},
		{"id": int64(2), "doc": json.RawMessage(`null`)},
		{"id": int64(3)},
	}
	rec, err := Maps(mem, rows, target)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	if got, want := variantCells(t, col(t, rec, "doc")), canonAll(t, []string{`{"a":[1.10,"b"]}`, `null`, "SQL NULL"}); !reflect.DeepEqual(got, want) {
		t.Errorf("doc = %q, want %q", got, want)
	}
	inner := col(t, rec, "s").(*array.Struct).Field(0)
	if got := variantCells(t, inner); got[0] != canonJSON(t, []byte(`5`)) {
		t.Errorf("s.inner[0] = %s, want 5", got[0])
	}
	_, err = Maps(mem, []map[string]any{{"id": int64(1), "doc": map[string]any{"x": complex(1, 1)}}}, target)
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Column != "doc" || !errors.Is(err, ErrUnsupportedType) {
		t.Errorf("complex in a variant column: err = %v", err)
	}
}

func TestJSONLinesIntoVariant(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer check(t, mem)
	data := []byte(`{"id": 1, "payload": {"a": [1, 2.50, {"b": "c"}], "d": null}}
{"id": 2, "payload": null}
{"id": 3}

{"payload": "text", "id": 4}
{"id": 5, "payload": [true, false, -7]}
`)
	rec, err := JSONLines(mem, data, variantSchema)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	want := []string{`{"a":[1,2.50,{"b":"c"}],"d":null}`, `null`, "SQL NULL", `"text"`, `[true,false,-7]`}
	if got := variantCells(t, col(t, rec, "payload")); !reflect.DeepEqual(got, canonAll(t, want)) {
		t.Errorf("payload = %q, want %q", got, want)
	}
	if ids := col(t, rec, "id").(*array.Int64).Int64Values(); !reflect.DeepEqual(ids, []int64{1, 2, 3, 4, 5}) {
		t.Errorf("id = %v", ids)
	}

	// Invalid JSON in the variant column names it and the line; with
	// OnRowError the other lines go on.
	bad := []byte("{\"id\": 1, \"payload\": {\"a\": 1}}\n{\"id\": 2, \"payload\": {\"a\": }}\n{\"id\": 3, \"payload\": {\"a\":1,\"a\":2}}\n{\"id\": 4, \"payload\": [1]}\n")
	_, err = JSONLines(mem, bad, variantSchema)
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Column != "payload" || fe.Row != 1 || !errors.Is(err, ErrInvalidJSON) {
		t.Errorf("invalid JSON: err = %v, want a FieldError for payload on line 1", err)
	}
	var skipped []int
	rec2, err := JSONLines(mem, bad, variantSchema, MapOptions{OnRowError: func(row int, err error) {
		if errors.As(err, &fe) && fe.Column == "payload" {
			skipped = append(skipped, row)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer rec2.Release()
	if !reflect.DeepEqual(skipped, []int{1, 2}) {
		t.Errorf("skipped lines %v, want [1 2]", skipped)
	}
	if got := variantCells(t, col(t, rec2, "payload")); !reflect.DeepEqual(got, canonAll(t, []string{`{"a":1}`, `[1]`})) {
		t.Errorf("payload after skips = %q", got)
	}
}

func TestNanosecondTimestamps(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer check(t, mem)
	target := arrow.NewSchema([]arrow.Field{
		{Name: "ns", Type: TimestampNsType, Nullable: true},
		{Name: "us", Type: TimestampType, Nullable: true},
	}, nil)
	type row struct {
		NS time.Time
		US time.Time
	}
	times := []time.Time{
		time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.FixedZone("X", -7200)),
		time.Unix(0, 1), time.Unix(0, -1), time.Unix(-1, 999), time.Unix(0, math.MinInt64), time.Unix(0, math.MaxInt64),
	}
	var rows []row
	var lines bytes.Buffer
	for _, ts := range times {
		rows = append(rows, row{NS: ts, US: ts})
		fmt.Fprintf(&lines, `{"ns": %q, "us": %q}`+"\n", ts.Format(time.RFC3339Nano), ts.Format(time.RFC3339Nano))
	}
	fromStructs, err := Structs(mem, rows, target)
	if err != nil {
		t.Fatal(err)
	}
	defer fromStructs.Release()
	fromJSON, err := JSONLines(mem, lines.Bytes(), target)
	if err != nil {
		t.Fatal(err)
	}
	defer fromJSON.Release()
	for name, rec := range map[string]arrow.RecordBatch{"structs": fromStructs, "json": fromJSON} {
		ns := col(t, rec, "ns").(*array.Timestamp)
		us := col(t, rec, "us").(*array.Timestamp)
		for i, ts := range times {
			if got := int64(ns.Value(i)); got != ts.UnixNano() {
				t.Errorf("%s: ns[%d] = %d, want %d", name, i, got, ts.UnixNano())
			}
			// A microsecond column truncates toward the past, as its type says.
			if got := int64(us.Value(i)); got != ts.UnixMicro() {
				t.Errorf("%s: us[%d] = %d, want %d", name, i, got, ts.UnixMicro())
			}
		}
	}

	// Outside int64 nanoseconds: an error naming the column, never a wrap-around.
	for _, ts := range []time.Time{time.Date(1677, 9, 21, 0, 12, 43, 145224191, time.UTC), time.Date(2262, 4, 11, 23, 47, 16, 854775808, time.UTC), time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)} {
		var fe *FieldError
		_, err := Structs(mem, []row{{NS: times[0]}, {NS: ts}}, target)
		if !errors.As(err, &fe) || fe.Column != "ns" || fe.Row != 1 || !errors.Is(err, ErrOutOfRange) {
			t.Errorf("struct %v: err = %v", ts, err)
		}
		_, err = JSONLines(mem, fmt.Appendf(nil, `{"ns": %q}`, ts.Format(time.RFC3339Nano)), target)
		if !errors.As(err, &fe) || fe.Column != "ns" || !errors.Is(err, ErrOutOfRange) {
			t.Errorf("json %v: err = %v", ts, err)
		}
		_, err = Maps(mem, []map[string]any{{"ns": ts}}, target)
		if !errors.As(err, &fe) || fe.Column != "ns" || !errors.Is(err, ErrOutOfRange) {
			t.Errorf("map %v: err = %v", ts, err)
		}
	}
	// Microseconds hold years up to 294246: beyond, an error too.
	far := time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC)
	var fe *FieldError
	if _, err := Structs(mem, []row{{NS: times[0], US: far}}, target); !errors.As(err, &fe) || fe.Column != "us" || !errors.Is(err, ErrOutOfRange) {
		t.Errorf("year 300000 into micros: err = %v", err)
	}
}

func TestVariantIntoShreddedColumn(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer check(t, mem)
	shredded := extensions.NewShreddedVariantType(arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int64}))
	target := arrow.NewSchema([]arrow.Field{{Name: "doc", Type: shredded, Nullable: true}}, nil)
	data := []byte("{\"doc\": {\"a\": 1, \"b\": \"x\"}}\n{\"doc\": {\"a\": \"not an int\"}}\n{\"doc\": [1]}\n{}\n")
	rec, err := JSONLines(mem, data, target)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	va := col(t, rec, "doc").(*extensions.VariantArray)
	if !va.IsShredded() {
		t.Fatal("column is not shredded")
	}
	want := []string{`{"a":1,"b":"x"}`, `{"a":"not an int"}`, `[1]`}
	for i, w := range want {
		v, err := va.Value(i)
		if err != nil {
			t.Fatal(err)
		}
		j, _ := json.Marshal(variantGo(t, v))
		if string(j) != canonJSON(t, []byte(w)) {
			t.Errorf("row %d = %s, want %s", i, j, w)
		}
	}
	if !va.Storage().IsNull(3) {
		t.Error("row 3 (no doc key) is not a null row")
	}
}
