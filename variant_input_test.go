package iceberg_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	ice "github.com/apache/iceberg-go"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/tabletest"
	"github.com/icewriter/iceberg/shred"
)

// Go values and JSON lines into the v3 types variant and timestamptz_ns: written through the Writer, read back
// with iceberg-go's scanner, each value compared with what was written (variants by meaning; a null row apart
// from the variant null; timestamps to the nanosecond).

// variantEvent is a row with a nanosecond timestamp and variant fields of several Go types.
type variantEvent struct {
	ID    int64           `iceberg:"id,required"`
	At    time.Time       `iceberg:"at,ns"`
	Doc   any             `iceberg:"doc"`
	Raw   json.RawMessage `iceberg:"raw"`
	Attrs map[string]any  `iceberg:"attrs"`
}

// variantCell is one variant cell read back: "SQL NULL" for a null row, else the value's JSON (variantAt's).
func variantCell(t *testing.T, a arrow.Array, i int) string {
	t.Helper()
	va, ok := a.(*extensions.VariantArray)
	if !ok {
		t.Fatalf("read a %T, not a variant array", a)
	}
	if js := variantAt(t, va, i); js != "" {
		return js
	}
	return "SQL NULL"
}

// sameJSON compares two JSON texts by meaning ("SQL NULL" only equals itself).
func sameJSON(t *testing.T, got, want string) bool {
	t.Helper()
	if got == "SQL NULL" || want == "SQL NULL" {
		return got == want
	}
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("read back %q: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want %q: %v", want, err)
	}
	return reflect.DeepEqual(g, w)
}

// inputRow is a row read back: the timestamp in nanoseconds and each variant column's cell.
type inputRow struct {
	at   int64
	cols map[string]string
}

// readV3Rows reads the table back by id.
func readV3Rows(t *testing.T, cat icecatalog.Catalog, ident table.Identifier, variants ...string) map[int64]inputRow {
	t.Helper()
	out := map[int64]inputRow{}
	sc, recs := tabletest.Records(t, tabletest.Load(t, cat, ident))
	id, at := sc.FieldIndices("id")[0], sc.FieldIndices("at")[0]
	if got := sc.Field(at).Type; !arrow.TypeEqual(got, &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}) {
		t.Errorf("column at reads as %v, want timestamp[ns, tz=UTC]", got)
	}
	for rec := range recs {
		ids := rec.Column(id).(*array.Int64)
		ats := rec.Column(at).(*array.Timestamp)
		for r := range int(rec.NumRows()) {
			row := inputRow{at: int64(ats.Value(r)), cols: map[string]string{}}
			for _, name := range variants {
				row.cols[name] = variantCell(t, rec.Column(sc.FieldIndices(name)[0]), r)
			}
			if _, dup := out[ids.Value(r)]; dup {
				t.Fatalf("id %d read twice", ids.Value(r))
			}
			out[ids.Value(r)] = row
		}
	}
	return out
}

func checkV3Rows(t *testing.T, got, want map[int64]inputRow) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("read %d rows, want %d", len(got), len(want))
	}
	for id, w := range want {
		g, ok := got[id]
		if !ok {
			t.Errorf("id %d missing", id)
			continue
		}
		if g.at != w.at {
			t.Errorf("id %d: at = %d ns, want %d", id, g.at, w.at)
		}
		for name, wv := range w.cols {
			if !sameJSON(t, g.cols[name], wv) {
				t.Errorf("id %d: %s = %s, want %s", id, name, g.cols[name], wv)
			}
		}
	}
}

func TestStructsIntoVariantAndNanosV3(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"db", "events"}
	// A v2 table cannot hold these types: creating one is refused, naming the columns.
	var ce *iceberg.ColumnError
	if _, err := iceberg.NewWriter(ctx, cat, table.Identifier{"db", "v2"}, iceberg.WithCreateFor[variantEvent]()); !errors.As(err, &ce) ||
		ce.Column != "at" || !errors.Is(err, iceberg.ErrNotSupported) {
		t.Errorf("creating a v2 table with variant and timestamptz_ns columns: err = %v, want a *ColumnError naming at", err)
	}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreateFor[variantEvent](iceberg.FormatVersion(3)))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	sc := loadSchema(t, cat, ident)
	for name, want := range map[string]ice.Type{"doc": ice.VariantType{}, "raw": ice.VariantType{},
		"attrs": ice.VariantType{}, "at": ice.PrimitiveTypes.TimestampTzNs} {
		if got := fieldOf(t, sc, name).Type; !got.Equals(want) {
			t.Errorf("created column %s is %v, want %v", name, got, want)
		}
	}

	base := time.Date(2026, 12, 3, 10, 11, 12, 123456789, time.UTC)
	rows := []variantEvent{
		{ID: 1, At: base, Doc: map[string]any{"user": map[string]any{"id": 7, "tags": []any{"a", "b"}}, "n": nil},
			Raw: json.RawMessage(`{"k": [1, 2.5, "three", true, null]}`), Attrs: map[string]any{"x": 1.25}},
		{ID: 2, At: time.Unix(0, -1), Doc: []any{1, "two", map[string]any{"three": 3}}, Raw: json.RawMessage(`null`)},
		{ID: 3, At: time.Unix(0, 1).In(time.FixedZone("X", 3600)), Doc: "just a string"},
		{ID: 4, At: base.Add(-70 * 365 * 24 * time.Hour), Doc: nil, Raw: json.RawMessage(`"s"`)},
		{ID: 5, At: base, Doc: json.RawMessage(`{"nested": {"deep": [[1], [2, [3]]]}}`), Raw: json.RawMessage(`12345678901234567890`)},
	}
	if err := iceberg.WriteStructs(ctx, w, rows); err != nil {
		t.Fatal(err)
	}

	// Bad values: a *ColumnError naming the column; nothing of the call is accepted, the writer stays usable.
	for _, bad := range []struct {
		row variantEvent
		col string
	}{
		{variantEvent{ID: 90, At: base, Raw: json.RawMessage(`{"a": `)}, "raw"},
		{variantEvent{ID: 91, At: time.Date(2263, 1, 1, 0, 0, 0, 0, time.UTC)}, "at"},
		{variantEvent{ID: 92, At: base, Doc: map[string]any{"c": complex(1, 2)}}, "doc"},
	} {
		err := iceberg.WriteStructs(ctx, w, []variantEvent{{ID: 89, At: base}, bad.row})
		var ce *iceberg.ColumnError
		if !errors.As(err, &ce) || ce.Column != bad.col {
			t.Errorf("bad %s: err = %v, want a *ColumnError naming %s", bad.col, err, bad.col)
		}
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	want := map[int64]inputRow{
		1: {base.UnixNano(), map[string]string{"doc": `{"n": null, "user": {"id": 7, "tags": ["a", "b"]}}`,
			"raw": `{"k": [1, 2.5, "three", true, null]}`, "attrs": `{"x": 1.25}`}},
		2: {-1, map[string]string{"doc": `[1, "two", {"three": 3}]`, "raw": `null`, "attrs": "SQL NULL"}},
		3: {1, map[string]string{"doc": `"just a string"`, "raw": "SQL NULL", "attrs": "SQL NULL"}},
		4: {base.Add(-70 * 365 * 24 * time.Hour).UnixNano(), map[string]string{"doc": "SQL NULL", "raw": `"s"`}},
		5: {base.UnixNano(), map[string]string{"doc": `{"nested": {"deep": [[1], [2, [3]]]}}`, "raw": `12345678901234567890`}},
	}
	checkV3Rows(t, readV3Rows(t, cat, ident, "doc", "raw", "attrs"), want)
}

func TestJSONLinesIntoVariantV3(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"db", "docs"}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "at", Type: shred.TimestampNsType, Nullable: true},
		{Name: "payload", Type: extensions.NewDefaultVariantType(), Nullable: true},
	}, nil)
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(schema, iceberg.FormatVersion(3)))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)

	payloads := []string{
		`{"user": {"id": 7, "tags": ["a", "b"]}, "score": 1.50, "ok": true}`,
		`[1, {"k": "v"}, [null, false]]`,
		`null`,
		`"text with \"escapes\" and \u00e9"`,
		`-12.5e3`,
	}
	at := time.Date(1969, 7, 20, 20, 17, 40, 999999999, time.UTC)
	var lines bytes.Buffer
	want := map[int64]inputRow{}
	for i, p := range payloads {
		ts := at.Add(time.Duration(i))
		fmt.Fprintf(&lines, `{"id": %d, "at": %q, "payload": %s}`+"\n", i, ts.Format(time.RFC3339Nano), p)
		want[int64(i)] = inputRow{ts.UnixNano(), map[string]string{"payload": p}}
	}
	fmt.Fprintf(&lines, `{"id": 99, "at": %q}`+"\n", at.Format(time.RFC3339Nano))
	want[99] = inputRow{at.UnixNano(), map[string]string{"payload": "SQL NULL"}}

	rec, err := shred.JSONLines(nil, lines.Bytes(), w.Schema())
	if err != nil {
		t.Fatal(err)
	}
	err = w.Write(ctx, rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}

	// Invalid JSON in the variant column names it and the line.
	_, err = shred.JSONLines(nil, []byte(`{"id": 1, "payload": {"a": [1, }}`), w.Schema())
	var fe *shred.FieldError
	if !errors.As(err, &fe) || fe.Column != "payload" || !errors.Is(err, shred.ErrInvalidJSON) {
		t.Errorf("invalid JSON: err = %v, want a FieldError naming payload", err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	checkV3Rows(t, readV3Rows(t, cat, ident, "payload"), want)
}

// TestWideVariantDocuments: documents with hundreds of distinct keys (a variant metadata dictionary whose
// offsets pass byte 255, which arrow-go v18.8.0's reader could not parse: Write panicked checking them) go in
// through JSON lines and Go maps, top level and nested, and read back as written.
func TestWideVariantDocuments(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"db", "wide"}
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "doc", Type: extensions.NewDefaultVariantType(), Nullable: true}}, nil)
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(sc, iceberg.FormatVersion(3)))
	if err != nil {
		t.Fatal(err)
	}
	wide := func(keys int, nested bool) map[string]any {
		m := map[string]any{}
		for k := range keys {
			m[fmt.Sprintf("a_rather_long_key_name_%04d", k)] = k
		}
		if nested {
			m["inner"] = map[string]any{"list": []any{map[string]any{"x": 1}, "s"}, "more": len(m)}
		}
		return m
	}
	docs := map[int64]map[string]any{1: wide(130, false), 2: wide(300, true), 3: wide(1000, false)}
	var lines bytes.Buffer
	for id, doc := range docs {
		js, err := json.Marshal(map[string]any{"id": id, "doc": doc})
		must(t, err)
		lines.Write(append(js, '\n'))
	}
	rec, err := shred.JSONLines(nil, lines.Bytes(), sc)
	must(t, err)
	must(t, w.Write(ctx, rec))
	rec.Release()
	rows := []map[string]any{{"id": int64(10), "doc": wide(300, true)}}
	docs[10] = rows[0]["doc"].(map[string]any)
	rec, err = shred.Maps(nil, rows, sc)
	must(t, err)
	must(t, w.Write(ctx, rec))
	rec.Release()
	must(t, w.Close(ctx))

	got := map[int64]any{}
	rsc, recs := tabletest.Records(t, tabletest.Load(t, cat, ident))
	for r := range recs {
		ids := r.Column(rsc.FieldIndices("id")[0]).(*array.Int64)
		for i := range int(r.NumRows()) {
			got[ids.Value(i)] = tabletest.Variant(t, r.Column(rsc.FieldIndices("doc")[0]), i)
		}
	}
	if len(got) != len(docs) {
		t.Fatalf("read %d rows, want %d", len(got), len(docs))
	}
	for id, doc := range docs {
		js, err := json.Marshal(doc)
		must(t, err)
		if want := tabletest.JSONValue(t, js); !reflect.DeepEqual(got[id], want) {
			t.Errorf("row %d: read a different document (%d keys written)", id, len(doc))
		}
	}
}
