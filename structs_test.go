package iceberg_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// address is a nested struct of everyType, alone and in a list.
type address struct {
	City string
	Zip  *int32
}

// everyType has a field of every Go type WriteStructs supports.
type everyType struct {
	ID       int64 `iceberg:"id,required"`
	Flag     bool
	Small    int32
	Ratio    float32
	Score    float64
	Name     string
	Blob     []byte
	UID      uuid.UUID
	At       time.Time
	Price    decimal128.Num `iceberg:"price,decimal(10,2)"`
	Opt      *string
	NullInt  sql.NullInt64
	Tags     []string
	Attrs    map[string]int64
	Home     address
	Previous []address
}

// TestStructRoundTrip writes every supported Go type through WriteStructs into a table created from the
// struct (WithCreateFor), reads it back with iceberg-go's scanner, and compares the values.
func TestStructRoundTrip(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"rt", "all"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreateFor[everyType](iceberg.IdentifierFields("id")))
	if err != nil {
		t.Fatal(err)
	}
	zip := int32(75001)
	s := "x"
	at := time.Date(2026, 3, 4, 5, 6, 7, 891011000, time.UTC)
	rows := []everyType{
		{ID: 1, Flag: true, Small: -7, Ratio: 1.5, Score: 2.25, Name: "ada", Blob: []byte{0, 1, 2}, UID: uuid.MustParse("6ba7b810-9dad-11d1-80b4-00c04fd430c8"),
			At: at, Price: decimal128.FromI64(12345), Opt: &s, NullInt: sql.NullInt64{Int64: 9, Valid: true},
			Tags: []string{"a", "b"}, Attrs: map[string]int64{"k": 1}, Home: address{City: "Paris", Zip: &zip},
			Previous: []address{{City: "Lyon"}}},
		{ID: 2, Name: "nulls"},
	}
	if err := iceberg.WriteStructs(ctx, w, rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	tbl := tabletest.Load(t, cat, ident)
	sc, it := tabletest.Records(t, tbl)
	got := map[int64]map[string]string{}
	for rec := range it {
		for r := 0; r < int(rec.NumRows()); r++ {
			row := map[string]string{}
			for c, f := range sc.Fields() {
				row[f.Name] = rec.Column(c).ValueStr(r)
				if rec.Column(c).IsNull(r) {
					row[f.Name] = "(null)"
				}
			}
			got[rec.Column(sc.FieldIndices("id")[0]).(*array.Int64).Value(r)] = row
		}
	}
	want := map[string]string{
		"flag": "true", "small": "-7", "ratio": "1.5", "score": "2.25", "name": "ada",
		"at": "2026-03-04T05:06:07.891011Z", "opt": "x", "null_int": "9", "price": "123.45",
		"uid":  "6ba7b810-9dad-11d1-80b4-00c04fd430c8",
		"tags": `["a","b"]`, "attrs": `[{"key":"k","value":1}]`, "home": `{"city":"Paris","zip":75001}`,
		"previous": `[{"city":"Lyon","zip":null}]`, "blob": "AAEC",
	}
	for k, v := range want {
		if got[1][k] != v {
			t.Errorf("row 1 column %s = %q, want %q", k, got[1][k], v)
		}
	}
	for _, k := range []string{"opt", "null_int"} {
		if got[2][k] != "(null)" {
			t.Errorf("row 2 column %s = %q, want null", k, got[2][k])
		}
	}
	if len(got) != 2 {
		t.Fatalf("read %d rows", len(got))
	}
}
