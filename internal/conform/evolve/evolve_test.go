package evolve

import (
	"errors"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
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
	got, err := For(in, sc, nil)
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
	if _, err := For(bad, sc, nil); !errors.Is(err, conform.ErrTypeMismatch) {
		t.Fatalf("a column of no Iceberg type: %v, want ErrTypeMismatch", err)
	}
	if _, err := DefaultValue(ice.PrimitiveTypes.Int64, ice.NewLiteral(int64(1)<<60)); err == nil {
		t.Fatal("a long default beyond 2^53 was taken")
	}
}
