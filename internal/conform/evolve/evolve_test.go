package evolve

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	ice "github.com/apache/iceberg-go"
	"github.com/icewriter/iceberg/internal/conform"
)

// TestPlan: a batch's schema against a table's plans the missing columns and nested fields (optional), the
// promotions the spec allows, and nothing for a type the conformer casts; a required column is relaxed unless
// it is a key (WithKeys or identifier field).
func TestPlan(t *testing.T) {
	sc := ice.NewSchemaWithIdentifiers(0, []int{1},
		ice.NestedField{ID: 1, Name: "id", Type: ice.PrimitiveTypes.Int32, Required: true},
		ice.NestedField{ID: 2, Name: "v", Type: ice.PrimitiveTypes.Float32, Required: true},
		ice.NestedField{ID: 3, Name: "s", Type: &ice.StructType{FieldList: []ice.NestedField{
			{ID: 4, Name: "a", Type: ice.PrimitiveTypes.String}}}},
		ice.NestedField{ID: 5, Name: "k", Type: ice.PrimitiveTypes.String, Required: true},
	)
	in := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "v", Type: arrow.PrimitiveTypes.Float64},
		{Name: "s", Type: arrow.StructOf(arrow.Field{Name: "a", Type: arrow.BinaryTypes.String},
			arrow.Field{Name: "b", Type: arrow.PrimitiveTypes.Int32})},
		{Name: "k", Type: arrow.PrimitiveTypes.Int64},
		{Name: "new", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)},
	}, nil)
	got, err := For(in, sc, Options{Version: 2})
	if err != nil {
		t.Fatal(err)
	}
	want := "[promote id to long promote v to double add s.b int add new list<long>]"
	if fmt.Sprint(got) != want {
		t.Fatalf("plan %v\nwant %s", got, want)
	}
	if add := got[3].Add.(*ice.ListType); add.ElementRequired {
		t.Fatal("an added list's elements are required")
	}
	if c := Relax(sc, []string{"v"}, nil); fmt.Sprint(c) != "[make v optional]" {
		t.Fatalf("relax v: %v", c)
	}
	for _, c := range []struct {
		col  string
		keys []string
	}{{"id", nil}, {"k", []string{"k"}}, {"s", nil}} {
		if ch := Relax(sc, []string{c.col}, c.keys); ch != nil {
			t.Fatalf("relax %s (keys %v): %v, want nothing", c.col, c.keys, ch)
		}
	}
	bad := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.FixedWidthTypes.MonthInterval}}, nil)
	if _, err := For(bad, sc, Options{Version: 2}); !errors.Is(err, conform.ErrTypeMismatch) {
		t.Fatalf("a column of no Iceberg type: %v, want ErrTypeMismatch", err)
	}
	if _, err := DefaultValue(ice.PrimitiveTypes.Int64, ice.NewLiteral(int64(1)<<60)); err == nil {
		t.Fatal("a long default beyond 2^53 was taken")
	}
	if _, err := DefaultValue(ice.PrimitiveTypes.Int32, ice.NewLiteral(int64(1)<<40)); err == nil {
		t.Fatal("an int default beyond its range was taken")
	}
}

// TestPlanVersions: a nanosecond timestamp column (or one inside a map or list) is added as timestamp_ns
// (timestamptz_ns with a UTC zone) on format version 3, as microseconds below; a variant column (nested too) is added on 3 and refused below with a
// *ColumnError naming its path wrapping ErrNotSupported; a default of Options.Defaults goes with its column.
func TestPlanVersions(t *testing.T) {
	sc := ice.NewSchema(0, ice.NestedField{ID: 1, Name: "id", Type: ice.PrimitiveTypes.Int64, Required: true})
	in := arrow.NewSchema([]arrow.Field{
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Nanosecond}},
		{Name: "tz", Type: &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}},
		{Name: "c", Type: arrow.PrimitiveTypes.Int32},
		{Name: "m", Type: arrow.MapOf(&arrow.TimestampType{Unit: arrow.Nanosecond},
			arrow.ListOf(&arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}))},
	}, nil)
	defaults := map[string]ice.Literal{"c": ice.NewLiteral(int32(7))}
	for v, want := range map[int]string{
		2: "[add ts timestamp add tz timestamptz add c int default 7 add m map<timestamp, list<timestamptz>>]",
		3: "[add ts timestamp_ns add tz timestamptz_ns add c int default 7 add m map<timestamp_ns, list<timestamptz_ns>>]"} {
		got, err := For(in, sc, Options{Version: v, Defaults: defaults})
		if err != nil || fmt.Sprint(got) != want {
			t.Fatalf("v%d: plan %v, %v\nwant %s", v, got, err, want)
		}
	}
	variant := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.StructOf(
		arrow.Field{Name: "v", Type: extensions.NewDefaultVariantType(), Nullable: true})}}, nil)
	if got, err := For(variant, sc, Options{Version: 3}); err != nil || fmt.Sprint(got) != "[add s struct<2: v: optional variant>]" {
		t.Fatalf("v3: plan %v, %v", got, err)
	}
	_, err := For(variant, sc, Options{Version: 2})
	var ce *conform.ColumnError
	if !errors.As(err, &ce) || ce.Column != "s.v" || !errors.Is(err, conform.ErrNotSupported) {
		t.Fatalf("v2: a nested variant: %v, want a *ColumnError naming s.v wrapping ErrNotSupported", err)
	}
}

// TestPlanNestedDefaults: Options.Defaults names fields inside structs by dotted path: a field added to an
// existing struct gets its default on the change, a struct column added whole carries its fields' defaults in
// its type (two levels down too); a default under a list is a *ColumnError wrapping ErrNotSupported naming it.
func TestPlanNestedDefaults(t *testing.T) {
	sc := ice.NewSchema(0,
		ice.NestedField{ID: 1, Name: "id", Type: ice.PrimitiveTypes.Int64, Required: true},
		ice.NestedField{ID: 2, Name: "st", Type: &ice.StructType{FieldList: []ice.NestedField{{ID: 3, Name: "x", Type: ice.PrimitiveTypes.Int32}}}})
	i32 := arrow.Field{Name: "y", Type: arrow.PrimitiveTypes.Int32, Nullable: true}
	in := arrow.NewSchema([]arrow.Field{
		{Name: "st", Type: arrow.StructOf(arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int32, Nullable: true}, i32), Nullable: true},
		{Name: "n", Type: arrow.StructOf(i32, arrow.Field{Name: "in", Type: arrow.StructOf(i32)}), Nullable: true},
	}, nil)
	o := Options{Version: 3, Defaults: map[string]ice.Literal{"st.y": ice.NewLiteral(int32(5)), "n.in.y": ice.NewLiteral(int32(6))}}
	got, err := For(in, sc, o)
	if err != nil || fmt.Sprint(got) != "[add st.y int default 5 add n struct<2: y: optional int, 3: in: optional struct<4: y: optional int>>]" {
		t.Fatalf("plan %v, %v", got, err)
	}
	inner := got[1].Add.(*ice.StructType).FieldList[1].Type.(*ice.StructType).FieldList[0]
	if inner.InitialDefault != int32(6) || inner.WriteDefault != int32(6) {
		t.Fatalf("n.in.y: initial-default %v, write-default %v, want 6", inner.InitialDefault, inner.WriteDefault)
	}
	list := arrow.NewSchema([]arrow.Field{{Name: "l", Type: arrow.ListOf(arrow.StructOf(i32)), Nullable: true}}, nil)
	_, err = For(list, sc, Options{Version: 3, Defaults: map[string]ice.Literal{"l.element.y": ice.NewLiteral(int32(1))}})
	var ce *conform.ColumnError
	if !errors.As(err, &ce) || ce.Column != "l.element.y" || !errors.Is(err, conform.ErrNotSupported) {
		t.Fatalf("a default inside a list = %v, want a *ColumnError naming l.element.y wrapping ErrNotSupported", err)
	}
}

// TestNanosDefaultRoundTrip pins why a nanosecond timestamp default is refused (errNanosDefault): iceberg-go
// writes it to the table metadata as a JSON number, not the spec's ISO-8601 string, and reads it back as a
// float64, which loses the nanoseconds of a present-day instant. If this test fails, iceberg-go keeps them
// now, and DefaultValue could take such defaults.
func TestNanosDefaultRoundTrip(t *testing.T) {
	const ns = 1_700_000_000_123_456_789
	b, err := json.Marshal(ice.NestedField{ID: 1, Name: "ts", Type: ice.PrimitiveTypes.TimestampNs,
		InitialDefault: ice.TimestampNano(ns), WriteDefault: ice.TimestampNano(ns)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"initial-default":1700000000123456789`) {
		t.Fatalf("metadata %s: the default is no longer a JSON number", b)
	}
	var back ice.NestedField
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if f, ok := back.InitialDefault.(float64); !ok || int64(f) == ns {
		t.Fatalf("read back %v (%T): iceberg-go now keeps the nanoseconds", back.InitialDefault, back.InitialDefault)
	}
	for _, typ := range []ice.Type{ice.PrimitiveTypes.TimestampNs, ice.PrimitiveTypes.TimestampTzNs} {
		for _, lit := range []ice.Literal{ice.NewLiteral(ice.TimestampNano(ns)), ice.NewLiteral(ice.Timestamp(0))} {
			if _, err := DefaultValue(typ, lit); !errors.Is(err, errNanosDefault) {
				t.Fatalf("DefaultValue(%s, %v) = %v, want errNanosDefault", typ, lit, err)
			}
		}
	}
}
