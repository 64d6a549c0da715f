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
	ctx := context.Background()
	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		t.Fatalf("load table: %v", err)
	}
	rows := map[int64]map[string]any{}
	if tbl.CurrentSnapshot() == nil {
		return rows
	}
	sc, it, err := tbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	idIdx := sc.FieldIndices("id")[0]
	for rec, err := range it {
		if err != nil {
			t.Fatalf("scan: %v", err)
		}
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
		_ = idIdx
		rec.Release()
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
	// Still usable: valid rows in the same shapes (the fixed-size and large lists converted) are accepted.
	for i, sc := range []*arrow.Schema{in, fixed, large} {
		row := with(int64(100+i), nil)
		rec := nestedRecord(t, sc, []map[string]any{row})
		if err := w.Write(ctx, rec); err != nil {
			t.Fatalf("valid row through %s: %v", sc, err)
		}
		rec.Release()
		want[row["id"].(int64)] = row
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if wrong := compareNested(t, w.Schema(), readNested(t, cat, ident), want); wrong > 0 {
		t.Fatalf("%d wrong values", wrong)
	}
}
