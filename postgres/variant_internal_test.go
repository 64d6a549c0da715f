package postgres

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/table"

	"github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/tabletest"
	"github.com/icewriter/iceberg/shred"
)

// TestJSONPolicyFollowsTheTable: a json or jsonb column is a variant on a v3 table and a string on v2, by the
// table's own format version when it exists (a string column it already has stays one) and by the create
// options' when it does not.
func TestJSONPolicyFollowsTheTable(t *testing.T) {
	ctx := context.Background()
	cat := tabletest.TempCatalog(t)
	// A v2 table with a string column s; a v3 table with s and a variant column v.
	create := func(name string, version int) table.Identifier {
		ident := table.Identifier{"pg", name}
		fields := []arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true}}
		if version == 3 {
			fields = append(fields, arrow.Field{Name: "v", Type: extensions.NewDefaultVariantType(), Nullable: true})
		}
		w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(arrow.NewSchema(fields, nil), iceberg.FormatVersion(version)))
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		return ident
	}
	v2, v3 := create("two", 2), create("three", 3)
	for _, c := range []struct {
		create  []iceberg.CreateOption
		ident   table.Identifier
		column  string
		variant bool
	}{
		{nil, v3, "s", false}, {nil, v3, "v", true}, {nil, v3, "new", true},
		{[]iceberg.CreateOption{iceberg.FormatVersion(3)}, v2, "s", false},
		{[]iceberg.CreateOption{iceberg.FormatVersion(3)}, v2, "new", false},
		{nil, table.Identifier{"pg", "missing"}, "j", false},
		{[]iceberg.CreateOption{iceberg.FormatVersion(3)}, table.Identifier{"pg", "missing"}, "j", true},
	} {
		got, err := newJSONPolicy(cat, c.create).variant(ctx, c.ident, c.column)
		if err != nil || got != c.variant {
			t.Errorf("create %d, table %v, column %s: variant %v (%v), want %v", iceberg.CreateFormatVersion(c.create...),
				c.ident, c.column, got, err, c.variant)
		}
	}
}

// TestJSONVariantValues: json (its text) and jsonb (a version byte, then its text) values into a variant read
// back as their documents (a key given twice: its last value, as in Postgres); a number no variant holds exactly
// is ErrOutOfRange (wrapping shred.ErrInexactNumber); a jsonb of another format version is an error.
func TestJSONVariantValues(t *testing.T) {
	for _, oid := range []uint32{oidJSON, oidJSONB} {
		ct := variantColType(oid)
		b := ct.arrow.(*extensions.VariantType).NewBuilder(memory.DefaultAllocator)
		docs := []string{`{"a": 1, "a": [true, null, "x"], "b": 2.50}`, `null`, `[]`,
			`{"o": {"k": 1, "k": {"d": 2}}, "u": "\u00e9 \ud83d\ude00", "n": [-0, 1e-7, 12345678901234567890123456789012345678]}`}
		for _, d := range docs {
			v := []byte(d)
			if oid == oidJSONB {
				v = append([]byte{1}, v...)
			}
			if err := ct.append(b, v); err != nil {
				t.Fatalf("%d %s: %v", oid, d, err)
			}
		}
		arr := b.NewArray()
		for i, d := range docs {
			if got, want := tabletest.Variant(t, arr, i), tabletest.JSONValue(t, []byte(d)); !reflect.DeepEqual(got, want) {
				t.Errorf("%d %s: reads back %#v", oid, d, got)
			}
		}
		arr.Release()
		for _, bad := range []string{`{"n": 1e400}`, `[123456789012345678901234567890123456789012]`} {
			v := []byte(bad)
			if oid == oidJSONB {
				v = append([]byte{1}, v...)
			}
			if err := ct.append(b, v); !errors.Is(err, ErrOutOfRange) || !errors.Is(err, shred.ErrInexactNumber) {
				t.Errorf("%d: %s: %v, want ErrOutOfRange and shred.ErrInexactNumber", oid, bad, err)
			}
		}
		b.Release()
	}
	b := variantColType(oidJSONB).arrow.(*extensions.VariantType).NewBuilder(memory.DefaultAllocator)
	defer b.Release()
	if err := appendJSONBVariant(b, []byte(`2{}`)); err == nil {
		t.Error("jsonb of format version 2: no error")
	}
}
