package iceberg_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// Nested values in these tests are Go trees: nil for a null, map[string]any for a struct (by field name),
// []any for a list, []kv for a map (entries in order), int64, float64, string or bool for a primitive (in the
// table's terms: an int32 input column still holds int64 values here).

// kv is one map entry.
type kv struct{ K, V any }

// nestedRecord builds a batch of schema from rows of column values (a missing column is null).
func nestedRecord(t testing.TB, schema *arrow.Schema, rows []map[string]any) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(memory.NewGoAllocator(), schema)
	defer b.Release()
	for _, row := range rows {
		for i, f := range schema.Fields() {
			appendNested(t, b.Field(i), row[f.Name])
		}
	}
	return b.NewRecordBatch()
}

// appendNested appends one value to a builder of any nested type, converting to the builder's type.
func appendNested(t testing.TB, b array.Builder, v any) {
	t.Helper()
	if v == nil {
		b.AppendNull()
		return
	}
	switch b := b.(type) {
	case *array.StructBuilder:
		m := v.(map[string]any)
		b.Append(true)
		for i, f := range b.Type().(*arrow.StructType).Fields() {
			appendNested(t, b.FieldBuilder(i), m[f.Name])
		}
	case *array.MapBuilder:
		b.Append(true)
		for _, e := range v.([]kv) {
			appendNested(t, b.KeyBuilder(), e.K)
			appendNested(t, b.ItemBuilder(), e.V)
		}
	case *array.ListBuilder:
		b.Append(true)
		for _, e := range v.([]any) {
			appendNested(t, b.ValueBuilder(), e)
		}
	case *array.LargeListBuilder:
		b.Append(true)
		for _, e := range v.([]any) {
			appendNested(t, b.ValueBuilder(), e)
		}
	case *array.FixedSizeListBuilder:
		b.Append(true)
		for _, e := range v.([]any) {
			appendNested(t, b.ValueBuilder(), e)
		}
	case *array.Int64Builder:
		b.Append(v.(int64))
	case *array.Int32Builder:
		b.Append(int32(v.(int64)))
	case *array.Uint64Builder:
		b.Append(v.(uint64))
	case *array.Float64Builder:
		b.Append(v.(float64))
	case *array.Float32Builder:
		b.Append(float32(v.(float64)))
	case *array.StringBuilder:
		b.Append(v.(string))
	case *array.LargeStringBuilder:
		b.Append(v.(string))
	case *array.BooleanBuilder:
		b.Append(v.(bool))
	default:
		t.Fatalf("appendNested: no case for %T", b)
	}
}

// nestedValue reads one value of an array of any nested type as a Go tree.
func nestedValue(a arrow.Array, i int) any {
	if a.IsNull(i) {
		return nil
	}
	switch a := a.(type) {
	case *array.Struct:
		m := map[string]any{}
		for j, f := range a.DataType().(*arrow.StructType).Fields() {
			m[f.Name] = nestedValue(a.Field(j), i)
		}
		return m
	case *array.Map:
		start, end := a.ValueOffsets(i)
		ents := a.ListValues().(*array.Struct)
		out := make([]kv, 0, end-start)
		for k := start; k < end; k++ {
			out = append(out, kv{nestedValue(ents.Field(0), int(k)), nestedValue(ents.Field(1), int(k))})
		}
		return out
	case array.ListLike:
		start, end := a.ValueOffsets(i)
		out := make([]any, 0, end-start)
		for k := start; k < end; k++ {
			out = append(out, nestedValue(a.ListValues(), int(k)))
		}
		return out
	case *array.Int64:
		return a.Value(i)
	case *array.Int32:
		return int64(a.Value(i))
	case *array.Float64:
		return a.Value(i)
	case *array.Float32:
		return float64(a.Value(i))
	case *array.String:
		return a.Value(i)
	case *array.LargeString:
		return a.Value(i)
	case *array.Boolean:
		return a.Value(i)
	}
	return a.ValueStr(i)
}

// expectNested is v as the table of type t reads it back: every struct field present (null when the value
// has none), empty lists and maps as empty, not nil.
func expectNested(t arrow.DataType, v any) any {
	if v == nil {
		return nil
	}
	switch tt := t.(type) {
	case *arrow.StructType:
		m := v.(map[string]any)
		out := make(map[string]any, tt.NumFields())
		for _, f := range tt.Fields() {
			out[f.Name] = expectNested(f.Type, m[f.Name])
		}
		return out
	case *arrow.MapType:
		in := v.([]kv)
		out := make([]kv, 0, len(in))
		for _, e := range in {
			out = append(out, kv{expectNested(tt.KeyType(), e.K), expectNested(tt.ItemType(), e.V)})
		}
		return out
	case *arrow.ListType:
		in := v.([]any)
		out := make([]any, 0, len(in))
		for _, e := range in {
			out = append(out, expectNested(tt.Elem(), e))
		}
		return out
	}
	return v
}

// readNested scans the table and returns each row's column values by id.
func readNested(t testing.TB, cat icecatalog.Catalog, ident table.Identifier) map[int64]map[string]any {
	t.Helper()
	rows := map[int64]map[string]any{}
	sc, it := tabletest.Records(t, tabletest.Load(t, cat, ident))
	for rec := range it {
		for r := 0; r < int(rec.NumRows()); r++ {
			row := map[string]any{}
			for c, f := range sc.Fields() {
				row[f.Name] = nestedValue(rec.Column(c), r)
			}
			id := row["id"].(int64)
			if _, dup := rows[id]; dup {
				t.Errorf("id %d read twice", id)
			}
			rows[id] = row
		}
	}
	return rows
}

// compareNested checks that the table holds exactly the rows of want (by id), in the table schema target.
func compareNested(t testing.TB, target *arrow.Schema, got map[int64]map[string]any, want map[int64]map[string]any) (wrong int) {
	t.Helper()
	for id, w := range want {
		g, ok := got[id]
		if !ok {
			t.Errorf("id %d accepted but not in the table", id)
			wrong++
			continue
		}
		for _, f := range target.Fields() {
			if ev := expectNested(f.Type, w[f.Name]); !reflect.DeepEqual(g[f.Name], ev) {
				t.Errorf("id %d column %s: read %s, wrote %s", id, f.Name, show(g[f.Name]), show(ev))
				wrong++
			}
		}
	}
	for id := range got {
		if _, ok := want[id]; !ok {
			t.Errorf("id %d in the table was never accepted", id)
			wrong++
		}
	}
	return wrong
}

func show(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + ":" + show(v[k])
		}
		return "{" + strings.Join(parts, " ") + "}"
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = show(e)
		}
		return "[" + strings.Join(parts, " ") + "]"
	case []kv:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = show(e.K) + "=" + show(e.V)
		}
		return "map[" + strings.Join(parts, " ") + "]"
	case string:
		return fmt.Sprintf("%q", v)
	}
	return fmt.Sprint(v)
}

// nullable returns t with every nested field nullable (map keys excepted: Arrow forbids nullable keys), the
// shape a caller's builder has when it allows nulls anywhere.
func nullable(t arrow.DataType) arrow.DataType {
	switch tt := t.(type) {
	case *arrow.StructType:
		fs := slices.Clone(tt.Fields())
		for i := range fs {
			fs[i].Nullable, fs[i].Type, fs[i].Metadata = true, nullable(fs[i].Type), arrow.Metadata{}
		}
		return arrow.StructOf(fs...)
	case *arrow.ListType:
		return arrow.ListOfField(arrow.Field{Name: "element", Type: nullable(tt.Elem()), Nullable: true})
	case *arrow.LargeListType:
		return arrow.LargeListOfField(arrow.Field{Name: "element", Type: nullable(tt.Elem()), Nullable: true})
	case *arrow.FixedSizeListType:
		return arrow.FixedSizeListOfField(tt.Len(), arrow.Field{Name: "element", Type: nullable(tt.Elem()), Nullable: true})
	case *arrow.MapType:
		return arrow.MapOfFields(arrow.Field{Name: "key", Type: nullable(tt.KeyType())},
			arrow.Field{Name: "value", Type: nullable(tt.ItemType()), Nullable: true})
	}
	return t
}

func nullableSchema(s *arrow.Schema) *arrow.Schema {
	fs := slices.Clone(s.Fields())
	for i := range fs {
		fs[i].Nullable, fs[i].Type, fs[i].Metadata = true, nullable(fs[i].Type), arrow.Metadata{}
	}
	return arrow.NewSchema(fs, nil)
}

// withField returns s with the named top-level field's type replaced (or the field added).
func withField(s *arrow.Schema, name string, t arrow.DataType) *arrow.Schema {
	fs := slices.Clone(s.Fields())
	for i := range fs {
		if fs[i].Name == name {
			fs[i].Type = t
			return arrow.NewSchema(fs, nil)
		}
	}
	return arrow.NewSchema(append(fs, arrow.Field{Name: name, Type: t, Nullable: true}), nil)
}

var (
	i64 = arrow.PrimitiveTypes.Int64
	i32 = arrow.PrimitiveTypes.Int32
	f64 = arrow.PrimitiveTypes.Float64
	str = arrow.BinaryTypes.String
)

func req(name string, t arrow.DataType) arrow.Field { return arrow.Field{Name: name, Type: t} }
func opt(name string, t arrow.DataType) arrow.Field {
	return arrow.Field{Name: name, Type: t, Nullable: true}
}

// nestedSchema is the table the validation and round-trip tests write to: every nested kind, required fields
// at each level.
var nestedSchema = arrow.NewSchema([]arrow.Field{
	req("id", i64),
	opt("tags", arrow.MapOfFields(req("key", str), req("value", i64))),
	opt("items", arrow.ListOfField(req("element", arrow.StructOf(opt("name", str), req("price", f64))))),
	opt("a", arrow.StructOf(opt("b", arrow.StructOf(req("c", i64), opt("d", str))))),
	opt("nums", arrow.ListOfField(req("element", i64))),
	opt("mm", arrow.MapOfFields(req("key", str), opt("value", arrow.ListOfField(req("element", i64))))),
	opt("s", arrow.StructOf(req("l", arrow.ListOfField(opt("element",
		arrow.MapOfFields(req("key", str), req("value", i64))))), opt("n", i64))),
}, nil)

// TestNestedValidation: a null in a required field at any depth (map key or value, list element, a field of a
// list's struct, a struct inside a struct), a wrong nested type, an unknown or missing nested field, and an
// empty batch with an unknown column or a wrong type each return a *ColumnError naming the nested path with
// the right sentinel. Nothing of the call is accepted, the writer stays usable and earlier rows are kept.
func TestNestedValidation(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"nested", "validate"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(nestedSchema), iceberg.WithFlushInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	in := nullableSchema(nestedSchema)
	good := map[string]any{
		"tags":  []kv{{"x", int64(1)}},
		"items": []any{map[string]any{"name": "pen", "price": 1.5}},
		"a":     map[string]any{"b": map[string]any{"c": int64(3), "d": "d"}},
		"nums":  []any{int64(1), int64(2)},
		"mm":    []kv{{"m", []any{int64(4)}}, {"n", nil}},
		"s":     map[string]any{"l": []any{[]kv{{"q", int64(5)}}, nil}, "n": int64(6)},
	}
	// with returns a row of id whose columns are good's except the ones given.
	with := func(id int64, cols map[string]any) map[string]any {
		row := map[string]any{"id": id}
		for k, v := range good {
			row[k] = v
		}
		for k, v := range cols {
			row[k] = v
		}
		return row
	}
	want := map[int64]map[string]any{}
	first := []map[string]any{with(1, nil), with(2, map[string]any{"tags": nil, "items": []any{}, "a": nil})}
	rec := nestedRecord(t, in, first)
	if err := w.Write(ctx, rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	for _, r := range first {
		want[r["id"].(int64)] = r
	}

	fixed := withField(in, "nums", arrow.FixedSizeListOfField(2, opt("element", i64)))
	large := withField(in, "nums", arrow.LargeListOfField(opt("element", i64)))
	strTags := withField(in, "tags", arrow.MapOfFields(req("key", str), opt("value", str)))
	uTags := withField(in, "tags", arrow.MapOfFields(req("key", str), opt("value", arrow.PrimitiveTypes.Uint64)))
	extraB := withField(in, "a", arrow.StructOf(opt("b", arrow.StructOf(opt("c", i64), opt("d", str), opt("x", str)))))
	noC := withField(in, "a", arrow.StructOf(opt("b", arrow.StructOf(opt("d", str)))))
	colour := withField(in, "colour", str)
	wrongNums := withField(in, "nums", str)
	cases := []struct {
		name, path string
		want       error
		schema     *arrow.Schema
		rows       []map[string]any
	}{
		{"null map value", "tags.value", iceberg.ErrNullInRequired, in,
			[]map[string]any{with(10, nil), with(11, map[string]any{"tags": []kv{{"x", int64(1)}, {"y", nil}}})}},
		{"null field in a list's struct", "items.element.price", iceberg.ErrNullInRequired, in,
			[]map[string]any{with(10, map[string]any{"items": []any{
				map[string]any{"name": "a", "price": 1.0}, map[string]any{"name": "b"}}})}},
		{"null list element", "items.element", iceberg.ErrNullInRequired, in,
			[]map[string]any{with(10, map[string]any{"items": []any{nil}})}},
		{"null in a struct in a struct", "a.b.c", iceberg.ErrNullInRequired, in,
			[]map[string]any{with(10, map[string]any{"a": map[string]any{"b": map[string]any{"d": "x"}}})}},
		{"null element of a primitive list", "nums.element", iceberg.ErrNullInRequired, in,
			[]map[string]any{with(10, map[string]any{"nums": []any{int64(1), nil}})}},
		{"null element of a list in a map value", "mm.value.element", iceberg.ErrNullInRequired, in,
			[]map[string]any{with(10, map[string]any{"mm": []kv{{"k", []any{nil}}}})}},
		{"null required list in a struct", "s.l", iceberg.ErrNullInRequired, in,
			[]map[string]any{with(10, map[string]any{"s": map[string]any{"n": int64(1)}})}},
		{"null map value in a list in a struct", "s.l.element.value", iceberg.ErrNullInRequired, in,
			[]map[string]any{with(10, map[string]any{"s": map[string]any{"l": []any{[]kv{{"k", nil}}}}})}},
		{"null element of a large list", "nums.element", iceberg.ErrNullInRequired, large,
			[]map[string]any{with(10, map[string]any{"nums": []any{nil}})}},
		{"null element of a fixed-size list", "nums.element", iceberg.ErrNullInRequired, fixed,
			[]map[string]any{with(10, map[string]any{"nums": []any{int64(1), nil}})}},
		{"wrong map value type", "tags.value", iceberg.ErrTypeMismatch, strTags,
			[]map[string]any{with(10, map[string]any{"tags": []kv{{"x", "1"}}})}},
		{"map value out of range", "tags.value", iceberg.ErrTypeMismatch, uTags,
			[]map[string]any{with(10, map[string]any{"tags": []kv{{"x", uint64(1) << 63}}})}},
		{"unknown nested field", "a.b.x", iceberg.ErrUnknownColumn, extraB,
			[]map[string]any{with(10, nil)}},
		{"missing required nested field", "a.b.c", iceberg.ErrMissingColumn, noC,
			[]map[string]any{with(10, nil)}},
		{"empty batch, unknown column", "colour", iceberg.ErrUnknownColumn, colour, nil},
		{"empty batch, wrong type", "nums", iceberg.ErrTypeMismatch, wrongNums, nil},
		{"empty batch, unknown nested field", "a.b.x", iceberg.ErrUnknownColumn, extraB, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := nestedRecord(t, c.schema, c.rows)
			defer rec.Release()
			err := w.Write(ctx, rec)
			var ce *iceberg.ColumnError
			if !errors.As(err, &ce) || ce.Column != c.path || !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.path) {
				t.Fatalf("got %v, want a ColumnError on %q wrapping %v", err, c.path, c.want)
			}
		})
	}
	// Still usable: valid rows in the same shapes (the fixed-size and large lists converted; a null fixed-size
	// list covers elements, which must not reach the file) are accepted.
	for i, sc := range []*arrow.Schema{in, fixed, large} {
		rows := []map[string]any{with(int64(100+2*i), nil), with(int64(101+2*i), map[string]any{"nums": nil})}
		rec := nestedRecord(t, sc, rows)
		if err := w.Write(ctx, rec); err != nil {
			t.Fatalf("valid rows through %s: %v", sc, err)
		}
		rec.Release()
		for _, r := range rows {
			want[r["id"].(int64)] = r
		}
	}
	closeAndCompare(t, w, cat, ident, want)
}

// nestedRows are rows of nestedSchema with nulls at every level where one is allowed.
func nestedRows(id int64) []map[string]any {
	return []map[string]any{
		{"id": id, "tags": []kv{{"x", int64(1)}, {"y", int64(-2)}},
			"items": []any{map[string]any{"name": "pen", "price": 1.5}, map[string]any{"price": 2.25}},
			"a":     map[string]any{"b": map[string]any{"c": int64(3), "d": "d"}},
			"nums":  []any{int64(1), int64(2)},
			"mm":    []kv{{"m", []any{int64(4), int64(5)}}, {"n", nil}, {"o", []any{}}},
			"s":     map[string]any{"l": []any{[]kv{{"q", int64(5)}}, nil, []kv{}}, "n": int64(6)}},
		{"id": id + 1, "items": []any{}, "a": map[string]any{}, "mm": []kv{{"k", nil}}},
		{"id": id + 2, "tags": []kv{}, "items": []any{map[string]any{"price": 0.0}}, "nums": []any{},
			"s": map[string]any{"l": []any{}}},
		{"id": id + 3, "a": map[string]any{"b": map[string]any{"c": int64(-7)}},
			"s": map[string]any{"l": []any{nil, []kv{{"a", int64(1)}, {"b", int64(2)}}}}},
	}
}

// badNestedRows are rows of nestedSchema, each with one null in a required nested field.
func badNestedRows(id int64) []map[string]any {
	return []map[string]any{
		{"id": id, "tags": []kv{{"x", nil}}},
		{"id": id + 1, "items": []any{map[string]any{"name": "no price"}}},
		{"id": id + 2, "nums": []any{nil}},
		{"id": id + 3, "a": map[string]any{"b": map[string]any{"d": "no c"}}},
		{"id": id + 4, "s": map[string]any{"l": []any{[]kv{{"k", nil}}}}},
	}
}

// TestNestedRoundTrip: valid nested data (maps, lists of structs, a struct of a list of maps) with nulls at
// every allowed level reads back exactly, written through the table's own Arrow schema, through a caller
// schema that is nullable everywhere, through one that needs lossless casts at every depth (int32 map values
// and list elements, float32 in a list's struct, large strings, large lists), and as slices of records whose
// rows outside the slice hold nulls in required nested fields (the slices are accepted and only their rows are
// written).
func TestNestedRoundTrip(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"nested", "roundtrip"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(nestedSchema), iceberg.WithFlushInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	in := nullableSchema(nestedSchema)
	mapOf := func(k, v arrow.DataType) arrow.DataType { return arrow.MapOfFields(req("key", k), opt("value", v)) }
	ls := arrow.BinaryTypes.LargeString
	cast := arrow.NewSchema([]arrow.Field{
		opt("id", i32),
		opt("tags", mapOf(ls, i32)),
		opt("items", arrow.LargeListOfField(opt("element", arrow.StructOf(
			opt("price", arrow.PrimitiveTypes.Float32), opt("name", ls))))),
		opt("a", arrow.StructOf(opt("b", arrow.StructOf(opt("d", ls), opt("c", i32))))),
		opt("nums", arrow.LargeListOfField(opt("element", i32))),
		opt("mm", mapOf(str, arrow.ListOfField(opt("element", i32)))),
		opt("s", arrow.StructOf(opt("n", i32), opt("l", arrow.LargeListOfField(opt("element", mapOf(ls, i32)))))),
	}, nil)
	want := map[int64]map[string]any{}
	write := func(rec arrow.RecordBatch) {
		t.Helper()
		if err := w.Write(ctx, rec); err != nil {
			t.Fatalf("write %d rows of %s: %v", rec.NumRows(), rec.Schema(), err)
		}
	}
	id := int64(0)
	for _, sc := range []*arrow.Schema{w.Schema(), in, cast} {
		rows := nestedRows(id)
		rec := nestedRecord(t, sc, rows)
		write(rec)
		rec.Release()
		for _, r := range rows {
			want[r["id"].(int64)] = r
		}
		id += 100
	}
	// Slices: bad rows around good ones, in both caller schemas.
	for _, sc := range []*arrow.Schema{in, cast} {
		good := nestedRows(id + 10)
		rows := append(append(badNestedRows(id), good...), badNestedRows(id+20)...)
		rec := nestedRecord(t, sc, rows)
		bad := int64(len(badNestedRows(0)))
		whole := rec.NewSlice(bad, bad+int64(len(good)))
		write(whole)
		for _, r := range good {
			want[r["id"].(int64)] = r
		}
		whole.Release()
		rec.Release()
		id += 100
	}
	for _, sc := range []*arrow.Schema{in, cast} {
		good := nestedRows(id + 10)
		rows := append(append(badNestedRows(id), good...), badNestedRows(id+20)...)
		rec := nestedRecord(t, sc, rows)
		bad := int64(len(badNestedRows(0)))
		// Slices of a slice that starts in the bad rows.
		wide := rec.NewSlice(2, rec.NumRows()-2)
		for _, r := range [][2]int64{{bad, bad + 1}, {bad + 1, bad + 3}, {bad + 3, bad + 4}} {
			part := wide.NewSlice(r[0]-2, r[1]-2)
			write(part)
			part.Release()
			for _, g := range good[r[0]-bad : r[1]-bad] {
				want[g["id"].(int64)] = g
			}
		}
		// A slice holding only bad rows is refused; an empty slice of them is validated and accepted.
		part := rec.NewSlice(bad-1, bad+1)
		if err := w.Write(ctx, part); !errors.Is(err, iceberg.ErrNullInRequired) {
			t.Fatalf("slice with a bad row: got %v", err)
		}
		part.Release()
		empty := rec.NewSlice(1, 1)
		write(empty)
		empty.Release()
		wide.Release()
		rec.Release()
		id += 100
	}
	closeAndCompare(t, w, cat, ident, want)
}

// hiddenRecord builds, by hand, four rows (ids from id) whose null parents hide values a builder would never
// leave there: a null list slot covering two null elements of a required-element list, a null map slot
// covering an entry with a null required value, and a null struct over a required field holding a uint64 over
// the int64 range (the cast would refuse it if it were data).
func hiddenRecord(id int64) arrow.RecordBatch {
	mem := memory.NewGoAllocator()
	bits := func(valid ...bool) *memory.Buffer {
		b := make([]byte, 1)
		for i, v := range valid {
			if v {
				b[0] |= 1 << i
			}
		}
		return memory.NewBufferBytes(b)
	}
	offsets := func(o ...int32) *memory.Buffer { return memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(o)) }
	ids := array.NewInt64Builder(mem)
	for i := range int64(4) {
		ids.Append(id + i)
	}
	elems := array.NewInt64Builder(mem)
	elems.AppendValues([]int64{1, 2, 0, 0, 5, 8, 9}, []bool{true, true, false, false, true, true, true})
	numsType := arrow.ListOfField(opt("element", i64))
	nums := array.MakeFromData(array.NewData(numsType, 4, []*memory.Buffer{bits(true, false, true, true), offsets(0, 2, 4, 5, 7)},
		[]arrow.ArrayData{elems.NewArray().Data()}, 1, 0))
	keys := array.NewStringBuilder(mem)
	keys.AppendValues([]string{"a", "b", "c", "d"}, nil)
	vals := array.NewInt64Builder(mem)
	vals.AppendValues([]int64{1, 0, 3, 4}, []bool{true, false, true, true})
	tagsType := arrow.MapOfFields(req("key", str), opt("value", i64))
	ents, err := array.NewStructArray([]arrow.Array{keys.NewArray(), vals.NewArray()}, []string{"key", "value"})
	if err != nil {
		panic(err)
	}
	tags := array.MakeFromData(array.NewData(tagsType, 4, []*memory.Buffer{bits(true, false, true, true), offsets(0, 1, 2, 3, 4)},
		[]arrow.ArrayData{ents.Data()}, 1, 0))
	cs := array.NewUint64Builder(mem)
	cs.AppendValues([]uint64{1, 1 << 63, 3, 4}, nil)
	ds := array.NewStringBuilder(mem)
	ds.AppendValues([]string{"w", "x", "y", "z"}, nil)
	b, err := array.NewStructArray([]arrow.Array{cs.NewArray(), ds.NewArray()}, []string{"c", "d"})
	if err != nil {
		panic(err)
	}
	a, err := array.NewStructArrayWithNulls([]arrow.Array{b}, []string{"b"}, bits(true, false, true, true), 1, 0)
	if err != nil {
		panic(err)
	}
	schema := arrow.NewSchema([]arrow.Field{req("id", i64), opt("nums", numsType), opt("tags", tagsType), opt("a", a.DataType())}, nil)
	return array.NewRecordBatch(schema, []arrow.Array{ids.NewArray(), nums, tags, a}, 4)
}

// TestNestedHiddenValues: what a null parent hides is not data: nulls in required fields and values that do not
// convert are accepted under a null list, map or struct (also in slices), and the null reads back as null.
func TestNestedHiddenValues(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"nested", "hidden"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(nestedSchema), iceberg.WithFlushInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	rowsOf := func(id int64) []map[string]any {
		return []map[string]any{
			{"id": id, "nums": []any{int64(1), int64(2)}, "tags": []kv{{"a", int64(1)}},
				"a": map[string]any{"b": map[string]any{"c": int64(1), "d": "w"}}},
			{"id": id + 1},
			{"id": id + 2, "nums": []any{int64(5)}, "tags": []kv{{"c", int64(3)}},
				"a": map[string]any{"b": map[string]any{"c": int64(3), "d": "y"}}},
			{"id": id + 3, "nums": []any{int64(8), int64(9)}, "tags": []kv{{"d", int64(4)}},
				"a": map[string]any{"b": map[string]any{"c": int64(4), "d": "z"}}},
		}
	}
	want := map[int64]map[string]any{}
	for i, sl := range [][2]int64{{0, 4}, {1, 3}, {1, 2}, {2, 4}} {
		id := int64(100 * i)
		rec := hiddenRecord(id)
		part := rec.NewSlice(sl[0], sl[1])
		if err := w.Write(ctx, part); err != nil {
			t.Fatalf("rows [%d, %d): %v", sl[0], sl[1], err)
		}
		part.Release()
		rec.Release()
		for _, r := range rowsOf(id)[sl[0]:sl[1]] {
			want[r["id"].(int64)] = r
		}
	}
	closeAndCompare(t, w, cat, ident, want)
}

// TestNestedDeadLetter: with WithDeadLetter, rows with a null in a required nested field are routed one by one
// with a *ColumnError naming the nested path; the other rows of the call are written and read back exactly.
func TestNestedDeadLetter(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"nested", "deadletter"}
	var dl deadLetters
	defer dl.release()
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(nestedSchema), iceberg.WithFlushInterval(0),
		iceberg.WithDeadLetter(dl.fn))
	if err != nil {
		t.Fatal(err)
	}
	paths := []string{"tags.value", "items.element.price", "nums.element", "a.b.c", "s.l.element.value"}
	var rows []map[string]any
	wantBad := map[int64]string{}
	want := map[int64]map[string]any{}
	for i := range 6 {
		good := nestedRows(int64(100 * i))
		bad := badNestedRows(int64(100*i + 50))
		for j, r := range good {
			rows = append(rows, r)
			want[r["id"].(int64)] = r
			if j < len(bad) && (i+j)%2 == 0 {
				rows = append(rows, bad[j])
				wantBad[bad[j]["id"].(int64)] = paths[j]
			}
		}
	}
	rec := nestedRecord(t, nullableSchema(nestedSchema), rows)
	// Write a slice: the first row is left out (it is good and must not be written).
	part := rec.NewSlice(1, rec.NumRows())
	delete(want, rows[0]["id"].(int64))
	if err := w.Write(ctx, part); err != nil {
		t.Fatal(err)
	}
	part.Release()
	rec.Release()
	if len(dl.rows) != len(wantBad) {
		t.Fatalf("%d rows routed, want %d", len(dl.rows), len(wantBad))
	}
	for i, r := range dl.rows {
		one := r.(arrow.RecordBatch)
		id := one.Column(0).(*array.Int64).Value(0)
		var ce *iceberg.ColumnError
		if one.NumRows() != 1 || !errors.As(dl.errs[i], &ce) || ce.Column != wantBad[id] || !errors.Is(ce, iceberg.ErrNullInRequired) {
			t.Fatalf("routed %d row(s), id %d, error %v; want one row on %q", one.NumRows(), id, dl.errs[i], wantBad[id])
		}
	}
	closeAndCompare(t, w, cat, ident, want)
}

// TestNestedEvolveRelax: with schema evolution, a null in a required map value or list element makes that
// nested field optional (named tags.value, nums.element as Iceberg names them) and the row reads back with the
// null; a required field under them stays required where no null arrived.
func TestNestedEvolveRelax(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"nested", "relax"}
	w := newEvolvingWriter(t, cat, ident, nestedSchema)
	rows := []map[string]any{{"id": int64(1), "tags": []kv{{"x", nil}}, "nums": []any{int64(1), nil}}}
	rec := nestedRecord(t, nullableSchema(nestedSchema), rows)
	if err := w.Write(ctx, rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	sc := loadSchema(t, cat, ident)
	if fieldOf(t, sc, "tags.value").Required || fieldOf(t, sc, "nums.element").Required ||
		!fieldOf(t, sc, "tags.key").Required || !fieldOf(t, sc, "items.element.price").Required {
		t.Fatalf("schema after relaxing:\n%s", sc)
	}
	want := map[int64]map[string]any{1: rows[0]}
	if wrong := compareNested(t, w.Schema(), readNested(t, cat, ident), want); wrong > 0 {
		t.Fatalf("%d wrong values", wrong)
	}
}

// closeAndCompare closes the writer and reads the table back against want (rows by id).
func closeAndCompare(t *testing.T, w *iceberg.Writer, cat icecatalog.Catalog, ident table.Identifier, want map[int64]map[string]any) {
	t.Helper()
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if wrong := compareNested(t, w.Schema(), readNested(t, cat, ident), want); wrong > 0 {
		t.Fatalf("%d wrong values", wrong)
	}
}
