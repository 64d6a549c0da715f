package tablecreate

import (
	"errors"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/icewriter/iceberg/internal/conform"
)

// TestSchema: identifier fields become required, PartitionBy expressions (bare, with and without a width)
// name their fields as the table shows them, and a bad expression or column is refused, naming the option or
// the column.
func TestSchema(t *testing.T) {
	as := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "ts", Type: arrow.FixedWidthTypes.Timestamp_us, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	sc, spec, err := Schema(as, []string{"id"}, []string{"day(ts)", "bucket( 16 , id )", "s"})
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := sc.FindFieldByName("id"); !f.Required || len(sc.IdentifierFieldIDs) != 1 || sc.IdentifierFieldIDs[0] != f.ID {
		t.Fatalf("id: required %v, identifiers %v", f.Required, sc.IdentifierFieldIDs)
	}
	var names []string
	for _, f := range spec.Fields() {
		names = append(names, f.Name+":"+f.Transform.String())
	}
	if got := fmt.Sprint(names); got != "[ts_day:day id_bucket:bucket[16] s:identity]" {
		t.Fatalf("partition fields %s", got)
	}
	var oe *OptionError
	if _, _, err := Schema(as, nil, []string{"day(ts"}); !errors.As(err, &oe) || oe.Option != "PartitionBy" {
		t.Fatalf("an unparsable expression: %v, want an OptionError on PartitionBy", err)
	}
	for _, c := range []struct{ ids, parts []string }{{[]string{"nope"}, nil}, {nil, []string{"day(nope)"}}} {
		var ce *conform.ColumnError
		if _, _, err := Schema(as, c.ids, c.parts); !errors.As(err, &ce) || ce.Column != "nope" {
			t.Fatalf("identifiers %v, partitions %v: %v, want a ColumnError on nope", c.ids, c.parts, err)
		}
	}
}
