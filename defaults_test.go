package iceberg_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	ice "github.com/apache/iceberg-go"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
)

// Column defaults on format version 3 tables: a column's write-default fills the rows written without it, its
// initial-default is what rows of files written before the column existed read; set by another tool, by
// WithCreate (ColumnDefault), or by schema evolution (WithColumnDefaults).

// idRows writes rows id from..to-1 with only the id column.
func idRows(t testing.TB, w *iceberg.Writer, from, to int) {
	t.Helper()
	rows := make([]map[string]any, 0, to-from)
	for id := from; id < to; id++ {
		rows = append(rows, map[string]any{"id": id})
	}
	writeMaps(t, w, []arrow.Field{fID}, rows...)
}

// checkColumn reads the table back and checks column col of every id in [from, to): want.
func checkColumn(t testing.TB, rows map[int64]map[string]any, col string, from, to int, want any) {
	t.Helper()
	bad := 0
	for id := int64(from); id < int64(to); id++ {
		if got := rows[id][col]; got != want {
			if bad++; bad <= 3 {
				t.Errorf("id %d: %s = %v (%T), want %v (%T)", id, col, got, got, want, want)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d rows with %s wrong", bad, to-from, col)
	}
}

// TestDefaultsSetOutside: a v3 table created through iceberg-go's catalog API with write-defaults on top-level
// columns (a required one too) and on a struct's field: the 100 rows written without the column read the
// default back, rows that bring it keep their values, a struct without the field gets its default.
func TestDefaultsSetOutside(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"defaults", "outside"}
	if err := cat.CreateNamespace(ctx, icecatalog.NamespaceFromIdent(ident), nil); err != nil {
		t.Fatal(err)
	}
	sc := ice.NewSchema(0,
		ice.NestedField{ID: 1, Name: "id", Type: ice.PrimitiveTypes.Int64, Required: true},
		ice.NestedField{ID: 2, Name: "c", Type: ice.PrimitiveTypes.Int32, InitialDefault: int32(7), WriteDefault: int32(7)},
		ice.NestedField{ID: 3, Name: "s", Type: ice.PrimitiveTypes.String, WriteDefault: "none"},
		ice.NestedField{ID: 4, Name: "st", Type: &ice.StructType{FieldList: []ice.NestedField{
			{ID: 5, Name: "x", Type: ice.PrimitiveTypes.Int32},
			{ID: 6, Name: "y", Type: ice.PrimitiveTypes.Int32, InitialDefault: int32(5), WriteDefault: int32(5)}}}},
		ice.NestedField{ID: 7, Name: "r", Type: ice.PrimitiveTypes.Int64, Required: true, InitialDefault: int64(9), WriteDefault: int64(9)},
	)
	if _, err := cat.CreateTable(ctx, ident, sc, icecatalog.WithProperties(ice.Properties{"format-version": "3"})); err != nil {
		t.Fatal(err)
	}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithFlushInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	idRows(t, w, 0, 100)
	fC := arrow.Field{Name: "c", Type: arrow.PrimitiveTypes.Int32, Nullable: true}
	writeMaps(t, w, []arrow.Field{fID, fC}, map[string]any{"id": 100, "c": 1}, map[string]any{"id": 101, "c": nil})
	// A struct without its field y: y's write-default fills it.
	fSt := arrow.Field{Name: "st", Type: arrow.StructOf(arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int32, Nullable: true}), Nullable: true}
	writeMaps(t, w, []arrow.Field{fID, fSt}, map[string]any{"id": 102, "st": map[string]any{"x": 1}})
	must(t, w.Flush(ctx))
	_, rows := readRows(t, cat, ident)
	checkColumn(t, rows, "c", 0, 100, int64(7))
	checkColumn(t, rows, "s", 0, 103, "none")
	checkColumn(t, rows, "st", 102, 103, `{"x":1,"y":5}`)
	checkColumn(t, rows, "r", 0, 103, int64(9)) // a required column with a write-default may be left out
	checkColumn(t, rows, "c", 100, 101, int64(1))
	checkColumn(t, rows, "c", 101, 102, nil) // an explicit null stays null
}

// TestCreateColumnDefault: ColumnDefault gives a created v3 table's columns their defaults; rows written without
// them read the defaults. Each misuse fails NewWriter with a *ColumnError naming the column, and creates no
// table.
func TestCreateColumnDefault(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cat := openCatalog(t)
	fC := arrow.Field{Name: "c", Type: arrow.PrimitiveTypes.Int32, Nullable: true}
	fTS := arrow.Field{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true}
	schema := arrow.NewSchema([]arrow.Field{fID, fC, fName, fTS, v3Schema.Field(3)}, nil)
	ident := table.Identifier{"defaults", "created"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithFlushInterval(0), iceberg.WithCreate(schema,
		iceberg.FormatVersion(3), iceberg.ColumnDefault("c", ice.NewLiteral(int32(7))),
		iceberg.ColumnDefault("name", ice.NewLiteral("unnamed")),
		iceberg.ColumnDefault("ts", ice.NewLiteral(ice.Timestamp(1_700_000_000_000_001)))))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	if f := fieldOf(t, loadSchema(t, cat, ident), "c"); f.InitialDefault == nil || f.WriteDefault == nil {
		t.Fatalf("c: initial-default %v, write-default %v", f.InitialDefault, f.WriteDefault)
	}
	idRows(t, w, 0, 100)
	writeMaps(t, w, []arrow.Field{fID, fC, fName}, map[string]any{"id": 100, "c": 3, "name": "x"})
	must(t, w.Flush(ctx))
	_, rows := readRows(t, cat, ident)
	checkColumn(t, rows, "c", 0, 100, int64(7))
	checkColumn(t, rows, "name", 0, 100, "unnamed")
	checkColumn(t, rows, "ts", 0, 101, int64(1_700_000_000_000_001))
	checkColumn(t, rows, "v", 0, 101, nil)
	checkColumn(t, rows, "c", 100, 101, int64(3))

	for i, c := range []struct {
		col     string
		version int
		lit     ice.Literal
		want    error
	}{
		{"c", 2, ice.NewLiteral(int32(7)), iceberg.ErrNotSupported}, // (a v2 table has no variant: the schema leaves v out)
		{"c", 3, ice.NewLiteral("seven"), iceberg.ErrTypeMismatch},
		{"c", 3, ice.NewLiteral(int64(1) << 40), iceberg.ErrTypeMismatch},
		{"v", 3, ice.NewLiteral("x"), iceberg.ErrTypeMismatch},
		{"nope", 3, ice.NewLiteral(int32(1)), iceberg.ErrMissingColumn},
	} {
		ident := table.Identifier{"defaults", fmt.Sprintf("bad%d", i)}
		sc := schema
		if c.version < 3 {
			sc = arrow.NewSchema(schema.Fields()[:4], nil)
		}
		_, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(sc, iceberg.FormatVersion(c.version),
			iceberg.ColumnDefault(c.col, c.lit)))
		var ce *iceberg.ColumnError
		if !errors.As(err, &ce) || ce.Column != c.col || !errors.Is(err, c.want) {
			t.Fatalf("ColumnDefault(%q, %v) on v%d = %v, want a *ColumnError naming it wrapping %v", c.col, c.lit, c.version, err, c.want)
		}
		if _, err := cat.LoadTable(ctx, ident); err == nil {
			t.Fatalf("ColumnDefault(%q, %v) on v%d: the table was created", c.col, c.lit, c.version)
		}
	}
}

// TestEvolveColumnDefaults: a column schema evolution adds gets the default WithColumnDefaults names: the rows
// committed before read it (initial-default), rows written after without the column too (write-default), rows
// with it their values. A default the column's type cannot hold fails the call that brought the column, which
// is not added, and the writer stays usable; on a v2 table NewWriter refuses the option.
func TestEvolveColumnDefaults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"defaults", "evolve"}
	createTable(t, ctx, cat, ident, arrow.NewSchema([]arrow.Field{fID}, nil), iceberg.FormatVersion(3))
	w := newEvolvingWriter(t, cat, ident, nil, iceberg.WithColumnDefaults(map[string]ice.Literal{
		"c": ice.NewLiteral(int32(7)), "bad": ice.NewLiteral("not a number")}))
	defer w.Close(ctx)
	idRows(t, w, 0, 50)
	must(t, w.Flush(ctx)) // committed before the column exists: initial-default
	idRows(t, w, 50, 60)  // buffered when the column is added
	fC := arrow.Field{Name: "c", Type: arrow.PrimitiveTypes.Int32, Nullable: true}
	writeMaps(t, w, []arrow.Field{fID, fC}, map[string]any{"id": 60, "c": 1})
	idRows(t, w, 61, 100) // after, without the column: write-default

	fBad := arrow.Field{Name: "bad", Type: arrow.PrimitiveTypes.Int64, Nullable: true}
	rec := mapsBatch(t, []arrow.Field{fID, fBad}, map[string]any{"id": 1000, "bad": 1})
	err := w.Write(ctx, rec)
	rec.Release()
	var ce *iceberg.ColumnError
	if !errors.As(err, &ce) || ce.Column != "bad" || !errors.Is(err, iceberg.ErrTypeMismatch) {
		t.Fatalf("a column whose default does not fit = %v, want a *ColumnError naming bad wrapping ErrTypeMismatch", err)
	}
	must(t, w.Flush(ctx))
	if _, ok := loadSchema(t, cat, ident).FindFieldByName("bad"); ok {
		t.Fatal("the column with a bad default was added")
	}
	_, rows := readRows(t, cat, ident)
	if len(rows) != 100 {
		t.Fatalf("%d rows, want 100", len(rows))
	}
	checkColumn(t, rows, "c", 0, 60, int64(7))
	checkColumn(t, rows, "c", 60, 61, int64(1))
	checkColumn(t, rows, "c", 61, 100, int64(7))

	v2 := table.Identifier{"defaults", "v2"}
	createTable(t, ctx, cat, v2, arrow.NewSchema([]arrow.Field{fID}, nil))
	_, err = iceberg.NewWriter(ctx, cat, v2, iceberg.WithSchemaEvolution(),
		iceberg.WithColumnDefaults(map[string]ice.Literal{"c": ice.NewLiteral(int32(7))}))
	if !errors.As(err, &ce) || ce.Column != "c" || !errors.Is(err, iceberg.ErrNotSupported) {
		t.Fatalf("WithColumnDefaults on v2 = %v, want a *ColumnError naming c wrapping ErrNotSupported", err)
	}
}

// TestEvolveNestedColumnDefaults: WithColumnDefaults names fields inside structs by dotted path. A field added
// to an existing struct (st.y) reads its default in the rows committed before (initial-default), and rows
// written after with the struct but without the field get it too (write-default); a struct column added with
// a defaulted field (n.a, and n.in.c two levels down) fills it in rows whose struct lacks it. A default the field's
// type cannot hold, or for a field inside a list, fails the call that brought the field with a *ColumnError
// naming its path, and nothing is added.
func TestEvolveNestedColumnDefaults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"defaults", "nested"}
	i32 := func(name string) arrow.Field {
		return arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Int32, Nullable: true}
	}
	structOf := func(name string, fs ...arrow.Field) arrow.Field {
		return arrow.Field{Name: name, Type: arrow.StructOf(fs...), Nullable: true}
	}
	createTable(t, ctx, cat, ident, arrow.NewSchema([]arrow.Field{fID, structOf("st", i32("x"))}, nil), iceberg.FormatVersion(3))
	w := newEvolvingWriter(t, cat, ident, nil, iceberg.WithColumnDefaults(map[string]ice.Literal{
		"st.y": ice.NewLiteral(int32(5)), "n.a": ice.NewLiteral("none"), "n.in.c": ice.NewLiteral(int64(3)),
		"st.bad": ice.NewLiteral("not a number"), "l.element.e": ice.NewLiteral(int32(1))}))
	defer w.Close(ctx)
	fSt := structOf("st", i32("x"))
	fStY := structOf("st", i32("x"), i32("y"))
	for id := 0; id < 20; id++ {
		writeMaps(t, w, []arrow.Field{fID, fSt}, map[string]any{"id": id, "st": map[string]any{"x": id}})
	}
	must(t, w.Flush(ctx)) // committed before st.y exists: its initial-default
	writeMaps(t, w, []arrow.Field{fID, fStY}, map[string]any{"id": 20, "st": map[string]any{"x": 20, "y": 1}})
	writeMaps(t, w, []arrow.Field{fID, fSt}, map[string]any{"id": 21, "st": map[string]any{"x": 21}}) // write-default
	f := fieldOf(t, loadSchema(t, cat, ident), "st.y")
	if f.InitialDefault == nil || f.WriteDefault == nil {
		t.Fatalf("st.y: initial-default %v, write-default %v", f.InitialDefault, f.WriteDefault)
	}

	fN := structOf("n", arrow.Field{Name: "a", Type: arrow.BinaryTypes.String, Nullable: true}, i32("z"),
		structOf("in", arrow.Field{Name: "c", Type: arrow.PrimitiveTypes.Int64, Nullable: true}, i32("d")))
	writeMaps(t, w, []arrow.Field{fID, fN}, map[string]any{"id": 22, "n": map[string]any{"a": "x", "z": 1, "in": map[string]any{"c": 9, "d": 1}}})
	fNz := structOf("n", i32("z"), structOf("in", i32("d")))
	writeMaps(t, w, []arrow.Field{fID, fNz}, map[string]any{"id": 23, "n": map[string]any{"z": 2, "in": map[string]any{"d": 2}}})

	for _, c := range []struct {
		field arrow.Field
		path  string
		want  error
	}{
		{structOf("st", i32("x"), i32("bad")), "st.bad", iceberg.ErrTypeMismatch},
		{arrow.Field{Name: "l", Type: arrow.ListOf(arrow.StructOf(i32("e"))), Nullable: true}, "l.element.e", iceberg.ErrNotSupported},
	} {
		rec := mapsBatch(t, []arrow.Field{fID, c.field}, map[string]any{"id": 1000})
		err := w.Write(ctx, rec)
		rec.Release()
		var ce *iceberg.ColumnError
		if !errors.As(err, &ce) || ce.Column != c.path || !errors.Is(err, c.want) {
			t.Fatalf("a default for %s = %v, want a *ColumnError naming it wrapping %v", c.path, err, c.want)
		}
		if _, ok := loadSchema(t, cat, ident).FindFieldByName(c.path); ok {
			t.Fatalf("%s was added", c.path)
		}
	}
	must(t, w.Flush(ctx))
	_, rows := readRows(t, cat, ident)
	if len(rows) != 24 {
		t.Fatalf("%d rows, want 24", len(rows))
	}
	for id := 0; id < 20; id++ {
		checkColumn(t, rows, "st", id, id+1, fmt.Sprintf(`{"x":%d,"y":5}`, id))
	}
	checkColumn(t, rows, "st", 20, 21, `{"x":20,"y":1}`)
	checkColumn(t, rows, "st", 21, 22, `{"x":21,"y":5}`)
	checkColumn(t, rows, "n", 0, 22, nil) // the struct has no default: null before it existed
	checkColumn(t, rows, "n", 22, 23, `{"a":"x","in":{"c":9,"d":1},"z":1}`)
	checkColumn(t, rows, "n", 23, 24, `{"a":"none","in":{"c":3,"d":2},"z":2}`)
}

// TestDefaultsSurviveRewrites: rows of files written before a column with an initial-default existed keep
// reading the default (and null in a column added without one) after a copy-on-write rewrite of their file and
// after a compaction, which rewrite those rows into files that have the columns.
func TestDefaultsSurviveRewrites(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, ctx context.Context, cat icecatalog.Catalog, mode iceberg.Mode) {
		ident := table.Identifier{"defaults", "rewrite"}
		createTable(t, ctx, cat, ident, arrow.NewSchema([]arrow.Field{fID}, nil), iceberg.FormatVersion(3), iceberg.IdentifierFields("id"))
		w := newEvolvingWriter(t, cat, ident, nil, iceberg.WithMode(mode), iceberg.WithSmallFileCompactionEvery(0),
			iceberg.WithColumnDefaults(map[string]ice.Literal{"c": ice.NewLiteral(int32(7))}))
		defer w.Close(ctx)
		idRows(t, w, 0, 20)
		must(t, w.Flush(ctx)) // a file without c
		fC := arrow.Field{Name: "c", Type: arrow.PrimitiveTypes.Int32, Nullable: true}
		fN := arrow.Field{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true} // no default
		rec := mapsBatch(t, []arrow.Field{fID, fC, fN}, map[string]any{"id": 3, "c": 30, "n": 3}, map[string]any{"id": 100, "c": 1, "n": 4})
		must(t, w.Upsert(ctx, rec)) // adds c, rewrites (or deletes from) the first file
		rec.Release()
		must(t, w.Flush(ctx))
		check := func(what string) {
			t.Helper()
			_, rows := readRows(t, cat, ident)
			if len(rows) != 21 {
				t.Fatalf("%s: %d rows, want 21", what, len(rows))
			}
			checkColumn(t, rows, "c", 0, 3, int64(7))
			checkColumn(t, rows, "c", 3, 4, int64(30))
			checkColumn(t, rows, "c", 4, 20, int64(7))
			checkColumn(t, rows, "c", 100, 101, int64(1))
			checkColumn(t, rows, "n", 0, 3, nil)
			checkColumn(t, rows, "n", 3, 4, int64(3))
			checkColumn(t, rows, "n", 4, 20, nil)
		}
		check("after the upsert")
		if _, err := w.Compact(ctx); err != nil {
			t.Fatalf("Compact: %v", err)
		}
		check("after Compact")
	})
}
