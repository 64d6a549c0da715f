package iceberg_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/tabletest"
	"github.com/icewriter/iceberg/shred"
)

// mapsBatch builds a batch of the given fields from rows of column values.
func mapsBatch(t testing.TB, fields []arrow.Field, rows ...map[string]any) arrow.RecordBatch {
	t.Helper()
	rec, err := shred.Maps(memory.NewGoAllocator(), rows, arrow.NewSchema(fields, nil))
	if err != nil {
		t.Fatalf("build batch: %v", err)
	}
	return rec
}

func writeMaps(t testing.TB, w *iceberg.Writer, fields []arrow.Field, rows ...map[string]any) {
	t.Helper()
	rec := mapsBatch(t, fields, rows...)
	defer rec.Release()
	if err := w.Write(context.Background(), rec); err != nil {
		t.Fatalf("write: %v", err)
	}
}

var (
	fID   = arrow.Field{Name: "id", Type: arrow.PrimitiveTypes.Int64}
	fName = arrow.Field{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true}
)

func newEvolvingWriter(t testing.TB, cat icecatalog.Catalog, ident table.Identifier, create *arrow.Schema, opts ...iceberg.Option) *iceberg.Writer {
	t.Helper()
	opts = append([]iceberg.Option{iceberg.WithSchemaEvolution(), iceberg.WithFlushInterval(0)}, opts...)
	if create != nil {
		opts = append(opts, iceberg.WithCreate(create))
	}
	w, err := iceberg.NewWriter(context.Background(), cat, ident, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestEvolveAddColumn: a column appears mid-stream; rows written before it read back with null in it, rows
// after with their values, in one writer without a restart (buffered old rows included).
func TestEvolveAddColumn(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"evolve", "add"}
	w := newEvolvingWriter(t, cat, ident, arrow.NewSchema([]arrow.Field{fID, fName}, nil))
	writeMaps(t, w, []arrow.Field{fID, fName}, map[string]any{"id": 1, "name": "a"}, map[string]any{"id": 2, "name": "b"})
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Buffered but not committed when the column arrives.
	writeMaps(t, w, []arrow.Field{fID, fName}, map[string]any{"id": 3, "name": "c"})
	fScore := arrow.Field{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true}
	writeMaps(t, w, []arrow.Field{fID, fScore, fName}, map[string]any{"id": 4, "name": "d", "score": 4.5})
	// The old shape keeps working after the change.
	writeMaps(t, w, []arrow.Field{fID}, map[string]any{"id": 5})
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	sc := loadSchema(t, cat, ident)
	if f := fieldOf(t, sc, "score"); f.Required || !f.Type.Equals(ice.PrimitiveTypes.Float64) {
		t.Fatalf("score: %+v", f)
	}
	counts, rows := readRows(t, cat, ident)
	if len(counts) != 5 {
		t.Fatalf("got ids %v, want 1..5", counts)
	}
	for id := int64(1); id <= 5; id++ {
		if counts[id] != 1 {
			t.Fatalf("id %d: %d rows", id, counts[id])
		}
		want := any(nil)
		if id == 4 {
			want = 4.5
		}
		if got := rows[id]["score"]; got != want {
			t.Fatalf("id %d: score %v, want %v", id, got, want)
		}
	}
	if rows[4]["name"] != "d" || rows[5]["name"] != nil {
		t.Fatalf("names: %v %v", rows[4], rows[5])
	}
}

// TestEvolveNestedField: a struct column gains a field; older rows read back with null in it.
func TestEvolveNestedField(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"evolve", "nested"}
	addrV1 := arrow.Field{Name: "addr", Nullable: true, Type: arrow.StructOf(
		arrow.Field{Name: "city", Type: arrow.BinaryTypes.String, Nullable: true})}
	addrV2 := arrow.Field{Name: "addr", Nullable: true, Type: arrow.StructOf(
		arrow.Field{Name: "zip", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		arrow.Field{Name: "city", Type: arrow.BinaryTypes.String, Nullable: true})}
	w := newEvolvingWriter(t, cat, ident, arrow.NewSchema([]arrow.Field{fID, addrV1}, nil))
	writeMaps(t, w, []arrow.Field{fID, addrV1}, map[string]any{"id": 1, "addr": map[string]any{"city": "Oslo"}})
	writeMaps(t, w, []arrow.Field{fID, addrV2}, map[string]any{"id": 2, "addr": map[string]any{"city": "Rome", "zip": 100}},
		map[string]any{"id": 3})
	writeMaps(t, w, []arrow.Field{fID, addrV1}, map[string]any{"id": 4, "addr": map[string]any{"city": "Lima"}})
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if f := fieldOf(t, loadSchema(t, cat, ident), "addr.zip"); f.Required || !f.Type.Equals(ice.PrimitiveTypes.Int32) {
		t.Fatalf("addr.zip: %+v", f)
	}
	counts, rows := readRows(t, cat, ident)
	if len(counts) != 4 {
		t.Fatalf("ids %v", counts)
	}
	want := map[int64]string{
		1: `{"city":"Oslo","zip":null}`, 2: `{"city":"Rome","zip":100}`, 3: "<nil>", 4: `{"city":"Lima","zip":null}`,
	}
	for id, s := range want {
		if got := fmt.Sprint(rows[id]["addr"]); got != s {
			t.Errorf("id %d: addr %s, want %s", id, got, s)
		}
	}
}

// TestEvolvePromote: int columns widen to long and float to double when a batch carries the wider type; rows
// written before read back unchanged.
func TestEvolvePromote(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"evolve", "promote"}
	fN32 := arrow.Field{Name: "n", Type: arrow.PrimitiveTypes.Int32, Nullable: true}
	fF32 := arrow.Field{Name: "f", Type: arrow.PrimitiveTypes.Float32, Nullable: true}
	w := newEvolvingWriter(t, cat, ident, arrow.NewSchema([]arrow.Field{fID, fN32, fF32}, nil))
	writeMaps(t, w, []arrow.Field{fID, fN32, fF32}, map[string]any{"id": 1, "n": 7, "f": 1.5})
	fN64 := arrow.Field{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true}
	fF64 := arrow.Field{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true}
	writeMaps(t, w, []arrow.Field{fID, fN64, fF64}, map[string]any{"id": 2, "n": int64(1) << 40, "f": 0.1})
	writeMaps(t, w, []arrow.Field{fID, fN32, fF32}, map[string]any{"id": 3, "n": 9, "f": 2.5})
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	sc := loadSchema(t, cat, ident)
	if f := fieldOf(t, sc, "n"); !f.Type.Equals(ice.PrimitiveTypes.Int64) {
		t.Fatalf("n: %s", f.Type)
	}
	if f := fieldOf(t, sc, "f"); !f.Type.Equals(ice.PrimitiveTypes.Float64) {
		t.Fatalf("f: %s", f.Type)
	}
	_, rows := readRows(t, cat, ident)
	want := map[int64][2]any{1: {int64(7), 1.5}, 2: {int64(1) << 40, 0.1}, 3: {int64(9), 2.5}}
	for id, v := range want {
		if rows[id]["n"] != v[0] || rows[id]["f"] != v[1] {
			t.Errorf("id %d: n=%v f=%v, want %v", id, rows[id]["n"], rows[id]["f"], v)
		}
	}
}

// TestEvolveRelaxRequired: nulls in a required non-key column make it optional; a null in the key stays an error.
func TestEvolveRelaxRequired(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"evolve", "relax"}
	fCode := arrow.Field{Name: "code", Type: arrow.BinaryTypes.String}
	w := newEvolvingWriter(t, cat, ident, arrow.NewSchema([]arrow.Field{fID, fCode}, nil), iceberg.WithKeys("id"))
	writeMaps(t, w, []arrow.Field{fID, fCode}, map[string]any{"id": 1, "code": "x"})
	fCodeN := fCode
	fCodeN.Nullable = true
	writeMaps(t, w, []arrow.Field{fID, fCodeN}, map[string]any{"id": 2, "code": nil}, map[string]any{"id": 3, "code": "z"})
	// Upsert goes through the same path.
	rec := mapsBatch(t, []arrow.Field{fID, fCodeN}, map[string]any{"id": 1, "code": nil})
	if err := w.Upsert(ctx, rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	// The key column is never relaxed.
	fIDN := fID
	fIDN.Nullable = true
	rec = mapsBatch(t, []arrow.Field{fIDN, fCodeN}, map[string]any{"id": nil, "code": "k"})
	err := w.Write(ctx, rec)
	rec.Release()
	var ce *iceberg.ColumnError
	if !errors.As(err, &ce) || ce.Column != "id" || !errors.Is(err, iceberg.ErrNullInRequired) {
		t.Fatalf("null key: got %v, want a ColumnError on id", err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	sc := loadSchema(t, cat, ident)
	if fieldOf(t, sc, "code").Required || !fieldOf(t, sc, "id").Required {
		t.Fatalf("schema after relaxing:\n%s", sc)
	}
	counts, rows := readRows(t, cat, ident)
	if len(counts) != 3 || counts[1] != 1 || rows[1]["code"] != nil || rows[2]["code"] != nil || rows[3]["code"] != "z" {
		t.Fatalf("rows %v %v", counts, rows)
	}
}

// TestEvolveExternalChange: a column added by another tool while the writer runs is used at the writer's next
// batch that carries it, without a restart and without a second schema change.
func TestEvolveExternalChange(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"evolve", "external"}
	w := newEvolvingWriter(t, cat, ident, arrow.NewSchema([]arrow.Field{fID, fName}, nil))
	writeMaps(t, w, []arrow.Field{fID, fName}, map[string]any{"id": 1, "name": "a"})
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Another tool adds "tag" (string) with its own transaction.
	tbl := tabletest.Load(t, cat, ident)
	tx := tbl.NewTransaction()
	if err := tx.UpdateSchema(true, false).AddColumn([]string{"tag"}, ice.PrimitiveTypes.String, "", false, nil).Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	schemaID := loadSchema(t, cat, ident).ID
	// The writer's cached schema lacks tag; it must find it in the table (int32 values go into the string? no:
	// the batch carries a string, the type the other tool chose).
	fTag := arrow.Field{Name: "tag", Type: arrow.BinaryTypes.String, Nullable: true}
	writeMaps(t, w, []arrow.Field{fID, fTag}, map[string]any{"id": 2, "tag": "t"})
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := loadSchema(t, cat, ident).ID; got != schemaID {
		t.Fatalf("schema id %d after the write, want %d: the writer changed a schema that had the column", got, schemaID)
	}
	_, rows := readRows(t, cat, ident)
	if rows[1]["tag"] != nil || rows[2]["tag"] != "t" || rows[1]["name"] != "a" {
		t.Fatalf("rows %v", rows)
	}
}

// TestEvolveConcurrentWriters: two writers evolve the same table at once, adding different columns and the same
// ones; both converge on one schema and no row is lost or duplicated.
func TestEvolveConcurrentWriters(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"evolve", "concurrent"}
	w0 := newEvolvingWriter(t, cat, ident, arrow.NewSchema([]arrow.Field{fID}, nil))
	if err := w0.Close(ctx); err != nil {
		t.Fatal(err)
	}
	const perWriter, rounds = 20, 6
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for wi := 0; wi < 2; wi++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := newEvolvingWriter(t, cat, ident, nil, iceberg.WithFlushRows(perWriter))
			for r := 0; r < rounds; r++ {
				// Each round adds a column both writers add (shared_r) and one only this writer adds.
				fields := []arrow.Field{fID,
					{Name: fmt.Sprintf("shared_%d", r), Type: arrow.PrimitiveTypes.Int64, Nullable: true},
					{Name: fmt.Sprintf("own_%d_%d", wi, r), Type: arrow.BinaryTypes.String, Nullable: true}}
				rows := make([]map[string]any, perWriter)
				for i := range rows {
					id := int64(wi*1_000_000 + r*1000 + i)
					rows[i] = map[string]any{"id": id, fields[1].Name: id, fields[2].Name: fmt.Sprint(id)}
				}
				rec := mapsBatch(t, fields, rows...)
				err := w.Write(ctx, rec)
				rec.Release()
				if err != nil {
					errs <- fmt.Errorf("writer %d round %d: %w", wi, r, err)
					return
				}
			}
			if err := w.Close(ctx); err != nil {
				errs <- fmt.Errorf("writer %d close: %w", wi, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	sc := loadSchema(t, cat, ident)
	if got, want := len(sc.Fields()), 1+rounds*3; got != want {
		t.Fatalf("%d columns, want %d:\n%s", got, want, sc)
	}
	counts, rows := readRows(t, cat, ident)
	if len(counts) != 2*rounds*perWriter {
		t.Fatalf("%d ids, want %d", len(counts), 2*rounds*perWriter)
	}
	for id, n := range counts {
		if n != 1 {
			t.Fatalf("id %d: %d rows", id, n)
		}
		wi, r := id/1_000_000, (id%1_000_000)/1000
		if rows[id][fmt.Sprintf("shared_%d", r)] != id || rows[id][fmt.Sprintf("own_%d_%d", wi, r)] != fmt.Sprint(id) {
			t.Fatalf("id %d: %v", id, rows[id])
		}
	}
}

// TestEvolveOff: without WithSchemaEvolution an unknown column is a *ColumnError naming it, and the table is
// unchanged.
func TestEvolveOff(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"evolve", "off"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(arrow.NewSchema([]arrow.Field{fID}, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	rec := mapsBatch(t, []arrow.Field{fID, fName}, map[string]any{"id": 1, "name": "a"})
	defer rec.Release()
	err = w.Write(ctx, rec)
	var ce *iceberg.ColumnError
	if !errors.As(err, &ce) || ce.Column != "name" || !errors.Is(err, iceberg.ErrUnknownColumn) {
		t.Fatalf("got %v, want a ColumnError naming name", err)
	}
	type row struct {
		ID   int64  `iceberg:"id"`
		Name string `iceberg:"name"`
	}
	err = iceberg.WriteStructs(ctx, w, []row{{1, "a"}})
	if !errors.As(err, &ce) || ce.Column != "name" {
		t.Fatalf("structs: got %v, want a ColumnError naming name", err)
	}
	if n := len(loadSchema(t, cat, ident).Fields()); n != 1 {
		t.Fatalf("table has %d columns", n)
	}
}

// TestEvolveStructs: WriteStructs adds the fields of a newer struct version, and relaxes a required column
// that receives nulls through a pointer field.
func TestEvolveStructs(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"evolve", "structs"}
	type v1 struct {
		ID   int64  `iceberg:"id,required"`
		Name string `iceberg:"name,required"`
	}
	type v2 struct {
		ID    int64   `iceberg:"id,required"`
		Name  *string `iceberg:"name"`
		Score float64 `iceberg:"score"`
		Tags  []string
	}
	as, err := shred.SchemaOf[v1]()
	if err != nil {
		t.Fatal(err)
	}
	w := newEvolvingWriter(t, cat, ident, as)
	if err := iceberg.WriteStructs(ctx, w, []v1{{1, "a"}}); err != nil {
		t.Fatal(err)
	}
	b := "b"
	if err := iceberg.WriteStructs(ctx, w, []v2{{2, &b, 2.5, []string{"x"}}, {3, nil, 3.5, nil}}); err != nil {
		t.Fatal(err)
	}
	if err := iceberg.WriteStructs(ctx, w, []v1{{4, "d"}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	sc := loadSchema(t, cat, ident)
	if fieldOf(t, sc, "name").Required {
		t.Fatalf("name still required:\n%s", sc)
	}
	fieldOf(t, sc, "tags")
	counts, rows := readRows(t, cat, ident)
	if len(counts) != 4 || rows[1]["score"] != nil || rows[2]["score"] != 2.5 || rows[3]["name"] != nil || rows[4]["name"] != "d" {
		t.Fatalf("rows %v", rows)
	}
}

// TestEvolvePromoteKey: a key column promoted by schema evolution (int to long, on a single and on a composite
// key; float to double) keeps matching the rows written before: upserts and deletes by the wider key replace
// and remove rows of the narrower files, in the same writer and after a reopen (the key index loaded from files
// of both types), in merge-on-read and copy-on-write modes.
func TestEvolvePromoteKey(t *testing.T) {
	t.Parallel() // see TestMain
	type step struct {
		upsert, del []map[string]any
	}
	f := func(name string, typ arrow.DataType) arrow.Field { return arrow.Field{Name: name, Type: typ} }
	fv := arrow.Field{Name: "v", Type: arrow.BinaryTypes.String, Nullable: true}
	i32, i64 := arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int64
	cases := []struct {
		name         string
		keys         []string
		narrow, wide []arrow.Field // key columns
		promoted     ice.Type      // the first key column's type after
		mode         []iceberg.Option
		rows         [3]step // narrow, then wide in the same writer, then wide after a reopen
		want         map[string]string
	}{
		{
			name: "int to long", keys: []string{"id"}, narrow: []arrow.Field{f("id", i32)}, wide: []arrow.Field{f("id", i64)},
			promoted: ice.PrimitiveTypes.Int64,
			rows: [3]step{
				{upsert: []map[string]any{{"id": 1, "v": "a"}, {"id": 2, "v": "a"}, {"id": 3, "v": "a"}, {"id": -4, "v": "a"}, {"id": 5, "v": "a"}}},
				{upsert: []map[string]any{{"id": int64(3), "v": "b"}, {"id": int64(1) << 40, "v": "b"}, {"id": int64(-4), "v": "b"}}, del: []map[string]any{{"id": int64(2)}}},
				{upsert: []map[string]any{{"id": int64(1), "v": "c"}, {"id": int64(1) << 40, "v": "c"}}, del: []map[string]any{{"id": int64(5)}}},
			},
			want: map[string]string{"1": "c", "3": "b", "-4": "b", "1099511627776": "c"},
		},
		{
			name: "int to long in a composite key", keys: []string{"a", "b"},
			narrow: []arrow.Field{f("a", i32), f("b", arrow.BinaryTypes.String)}, wide: []arrow.Field{f("a", i64), f("b", arrow.BinaryTypes.String)},
			promoted: ice.PrimitiveTypes.Int64,
			rows: [3]step{
				{upsert: []map[string]any{{"a": 1, "b": "x", "v": "a"}, {"a": 1, "b": "y", "v": "a"}, {"a": 2, "b": "x", "v": "a"}}},
				{upsert: []map[string]any{{"a": int64(1), "b": "x", "v": "b"}, {"a": int64(3) << 33, "b": "x", "v": "b"}}, del: []map[string]any{{"a": int64(1), "b": "y"}}},
				{upsert: []map[string]any{{"a": int64(2), "b": "x", "v": "c"}}},
			},
			want: map[string]string{"1|x": "b", "2|x": "c", "25769803776|x": "b"},
		},
		{
			name: "float to double", keys: []string{"k"},
			narrow: []arrow.Field{f("k", arrow.PrimitiveTypes.Float32)}, wide: []arrow.Field{f("k", arrow.PrimitiveTypes.Float64)},
			promoted: ice.PrimitiveTypes.Float64,
			rows: [3]step{
				{upsert: []map[string]any{{"k": 0.5, "v": "a"}, {"k": 1.25, "v": "a"}, {"k": -2.75, "v": "a"}}},
				{upsert: []map[string]any{{"k": 0.5, "v": "b"}, {"k": 0.1, "v": "b"}}, del: []map[string]any{{"k": 1.25}}},
				{upsert: []map[string]any{{"k": -2.75, "v": "c"}}},
			},
			want: map[string]string{"0.5": "b", "0.1": "b", "-2.75": "c"},
		},
		{
			name: "int to long, copy-on-write", keys: []string{"id"}, narrow: []arrow.Field{f("id", i32)}, wide: []arrow.Field{f("id", i64)},
			promoted: ice.PrimitiveTypes.Int64, mode: []iceberg.Option{iceberg.WithMode(iceberg.CopyOnWrite)},
			rows: [3]step{
				{upsert: []map[string]any{{"id": 1, "v": "a"}, {"id": 2, "v": "a"}, {"id": 3, "v": "a"}}},
				{upsert: []map[string]any{{"id": int64(3), "v": "b"}, {"id": int64(1) << 40, "v": "b"}}, del: []map[string]any{{"id": int64(2)}}},
				{upsert: []map[string]any{{"id": int64(1), "v": "c"}}},
			},
			want: map[string]string{"1": "c", "3": "b", "1099511627776": "b"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			cat := openCatalog(t)
			ident := table.Identifier{"evolve", "promote_key"}
			open := func(create *arrow.Schema) *iceberg.Writer {
				return newEvolvingWriter(t, cat, ident, create, append([]iceberg.Option{iceberg.WithKeys(c.keys...)}, c.mode...)...)
			}
			w := open(arrow.NewSchema(append(slices.Clone(c.narrow), fv), nil))
			for i, s := range c.rows {
				keys := c.wide
				if i == 0 {
					keys = c.narrow
				}
				if i == 2 {
					must(t, w.Close(ctx))
					w = open(nil)
				}
				rec := mapsBatch(t, append(slices.Clone(keys), fv), s.upsert...)
				must(t, w.Upsert(ctx, rec))
				rec.Release()
				if len(s.del) > 0 {
					rec := mapsBatch(t, keys, s.del...)
					must(t, w.Delete(ctx, rec))
					rec.Release()
				}
				must(t, w.Flush(ctx))
			}
			must(t, w.Close(ctx))
			if got := fieldOf(t, loadSchema(t, cat, ident), c.keys[0]).Type; !got.Equals(c.promoted) {
				t.Fatalf("key column %s: %s, want %s", c.keys[0], got, c.promoted)
			}
			tbl := tabletest.Load(t, cat, ident)
			sc, it := tabletest.Records(t, tbl)
			got := map[string]string{}
			for rec := range it {
				for r := range int(rec.NumRows()) {
					var k []string
					for _, n := range c.keys {
						k = append(k, rec.Column(sc.FieldIndices(n)[0]).ValueStr(r))
					}
					ks := strings.Join(k, "|")
					if _, dup := got[ks]; dup {
						t.Errorf("key %s twice", ks)
					}
					got[ks] = rec.Column(sc.FieldIndices("v")[0]).ValueStr(r)
				}
			}
			if !maps.Equal(got, c.want) {
				t.Fatalf("table %v, want %v", got, c.want)
			}
		})
	}
}

// TestEvolveAddColumnWithDefault: Writer.AddColumn on a v3 table adds columns with an initial default; rows
// written before (committed, and buffered when the column is added) read the default back through iceberg-go's
// scanner, from a freshly loaded table (initial-default), and so do rows written after without the column
// (write-default); rows written after with it read their own values. A v2 table refuses a default
// (ErrNotSupported), a second AddColumn of a column the table has changes nothing, and a long default that
// the metadata's JSON number would round is refused.
func TestEvolveAddColumnWithDefault(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"evolve", "default"}
	createTable(t, ctx, cat, ident, arrow.NewSchema([]arrow.Field{fID, fName}, nil), iceberg.FormatVersion(3))
	w := newEvolvingWriter(t, cat, ident, nil)
	writeMaps(t, w, []arrow.Field{fID, fName}, map[string]any{"id": 1, "name": "a"}, map[string]any{"id": 2, "name": "b"})
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	writeMaps(t, w, []arrow.Field{fID, fName}, map[string]any{"id": 3, "name": "c"}) // buffered

	ts := ice.Timestamp(1_700_000_000_123_456)
	d := ice.NewLiteral(ice.Decimal{Val: decimal128.FromI64(1234), Scale: 2})
	cols := []struct {
		f    arrow.Field
		lit  ice.Literal
		want any // as cellValue reads it
	}{
		{arrow.Field{Name: "c", Type: arrow.PrimitiveTypes.Int32, Nullable: true}, ice.NewLiteral(int32(7)), int64(7)},
		{arrow.Field{Name: "big", Type: arrow.PrimitiveTypes.Int64, Nullable: true}, ice.NewLiteral(int32(-3)), int64(-3)},
		{arrow.Field{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true}, ice.NewLiteral("it's"), "it's"},
		{arrow.Field{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond}, Nullable: true}, ice.NewLiteral(ts), int64(ts)},
		{arrow.Field{Name: "tz", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true}, ice.NewLiteral(ts), int64(ts)},
		{arrow.Field{Name: "dec", Type: &arrow.Decimal128Type{Precision: 10, Scale: 2}, Nullable: true}, d, "12.34"},
		{arrow.Field{Name: "day", Type: arrow.FixedWidthTypes.Date32, Nullable: true}, ice.NewLiteral(ice.Date(19000)), "2022-01-08"},
		{arrow.Field{Name: "none", Type: arrow.PrimitiveTypes.Int32, Nullable: true}, nil, nil},
	}
	for _, c := range cols {
		if err := w.AddColumn(ctx, c.f, c.lit); err != nil {
			t.Fatalf("AddColumn %s: %v", c.f.Name, err)
		}
	}
	// Again: the column is there, nothing changes (not even with another default).
	if err := w.AddColumn(ctx, cols[0].f, ice.NewLiteral(int32(8))); err != nil {
		t.Fatalf("AddColumn again: %v", err)
	}
	tooBig := arrow.Field{Name: "huge", Type: arrow.PrimitiveTypes.Int64, Nullable: true}
	if err := w.AddColumn(ctx, tooBig, ice.NewLiteral(int64(1)<<60)); !errors.Is(err, iceberg.ErrTypeMismatch) {
		t.Fatalf("AddColumn of a long default beyond 2^53 = %v, want ErrTypeMismatch", err)
	}
	list := arrow.Field{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true}
	if err := w.AddColumn(ctx, list, ice.NewLiteral(int32(1))); !errors.Is(err, iceberg.ErrTypeMismatch) {
		t.Fatalf("AddColumn of a list with a default = %v, want ErrTypeMismatch", err)
	}
	fields := []arrow.Field{fID, fName}
	row4 := map[string]any{"id": 4, "name": "d"}
	for _, c := range cols {
		fields = append(fields, c.f)
	}
	row4["c"], row4["big"], row4["s"] = 40, 400, "new"
	writeMaps(t, w, fields, row4)
	writeMaps(t, w, []arrow.Field{fID, fName}, map[string]any{"id": 5, "name": "e"}) // after, without the columns
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	counts, rows := readRows(t, cat, ident)
	if len(counts) != 5 {
		t.Fatalf("got ids %v, want 1..5", counts)
	}
	for _, id := range []int64{1, 2, 3, 5} {
		for _, c := range cols {
			if got := rows[id][c.f.Name]; got != c.want {
				t.Errorf("id %d (written without the column): %s = %v (%T), want its default %v", id, c.f.Name, got, got, c.want)
			}
		}
	}
	if r := rows[4]; r["c"] != int64(40) || r["big"] != int64(400) || r["s"] != "new" || r["ts"] != nil || r["dec"] != nil {
		t.Errorf("id 4 (written after): %v", r)
	}

	// A v2 table has no initial-default: refused, and the column is not added.
	v2 := table.Identifier{"evolve", "default_v2"}
	createTable(t, ctx, cat, v2, arrow.NewSchema([]arrow.Field{fID}, nil))
	w2 := newEvolvingWriter(t, cat, v2, nil)
	defer w2.Close(ctx)
	if err := w2.AddColumn(ctx, cols[0].f, cols[0].lit); !errors.Is(err, iceberg.ErrNotSupported) || !strings.Contains(err.Error(), "c") {
		t.Fatalf("AddColumn with a default on v2 = %v, want ErrNotSupported", err)
	}
	if _, ok := loadSchema(t, cat, v2).FindFieldByName("c"); ok {
		t.Fatal("the v2 table has the column")
	}
}
