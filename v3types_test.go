package iceberg_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/variant"
	ice "github.com/apache/iceberg-go"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// Iceberg v3 types on every keyed path: a variant column (variant null apart from SQL null) and nanosecond
// timestamps (timestamp_ns, timestamptz_ns; values a nanosecond around a second and before 1970) written through
// Write, Upsert and Delete in both modes, Apply, a Router's bulk phase and Compact, each read back with
// iceberg-go's scanner and compared exactly with a model of the calls.

// v3Row is a row of v3Schema. A nil timestamp is SQL null; v is the variant as JSON, "" for SQL null and
// "null" for the variant null.
type v3Row struct {
	id     int64
	ts, tz *int64
	v      string
}

func (r v3Row) String() string {
	show := func(p *int64) string {
		if p == nil {
			return "NULL"
		}
		return fmt.Sprint(*p)
	}
	v := r.v
	if v == "" {
		v = "NULL"
	}
	return fmt.Sprintf("{id %d ts %s tz %s v %s}", r.id, show(r.ts), show(r.tz), v)
}

var (
	tsNs     = &arrow.TimestampType{Unit: arrow.Nanosecond}
	tzNs     = &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}
	v3Schema = arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "ts", Type: tsNs, Nullable: true},
		{Name: "tz", Type: tzNs, Nullable: true},
		{Name: "v", Type: extensions.NewDefaultVariantType(), Nullable: true},
	}, nil)
	// nsEdges are nanosecond instants where a lossy conversion shows: ±1 ns around a second, around the epoch
	// and before 1970, and one with every digit set.
	nsEdges = []int64{0, 1, -1, 999_999_999, 1_000_000_000, 1_000_000_001, -999_999_999, -1_000_000_000,
		-1_000_000_001, 1_700_000_000_123_456_789, -86_400_000_000_000_001, 86_399_999_999_999}
	// variantJSON are variant values of every kind: SQL null (""), the variant null, primitives, nested
	// objects and arrays.
	variantJSON = []string{"", "null", "true", "false", "0", "-17", "3.25", `"text"`, `""`, "[]", "{}",
		`[1,"two",null,[3,{"four":4}]]`, `{"a":1,"b":{"c":[true,null,"x"],"d":{}},"e":null}`,
		`{"nested":{"deeper":{"deepest":[[1],[2,[3]]]}}}`}
)

// v3Value is the i-th row's values for key id: timestamps from nsEdges (null every 7th), a variant from
// variantJSON, normalised as the variant encoding writes it back.
func v3Value(t testing.TB, id int64, i int) v3Row {
	r := v3Row{id: id}
	if i%7 != 3 {
		ts := nsEdges[i%len(nsEdges)] + id
		tz := nsEdges[(i+5)%len(nsEdges)] - id
		r.ts, r.tz = &ts, &tz
	}
	if js := variantJSON[i%len(variantJSON)]; js != "" {
		r.v = normVariant(t, js)
	}
	return r
}

// normVariant is js as iceberg-go's scanner gives a variant back (the variant's own JSON).
func normVariant(t testing.TB, js string) string {
	t.Helper()
	v, err := variant.ParseJSON(js, false)
	if err != nil {
		t.Fatalf("variant %s: %v", js, err)
	}
	out, err := v.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// v3Batch builds rows of schema (v3Schema, or one with extra columns the fill callback sets).
func v3Batch(t testing.TB, sc *arrow.Schema, rows []v3Row, extra func(b *array.RecordBuilder, r v3Row)) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(memory.NewGoAllocator(), sc)
	defer b.Release()
	for _, r := range rows {
		for i, f := range sc.Fields() {
			switch f.Name {
			case "id":
				b.Field(i).(*array.Int64Builder).Append(r.id)
			case "ts", "tz":
				p := r.ts
				if f.Name == "tz" {
					p = r.tz
				}
				if p == nil {
					b.Field(i).AppendNull()
				} else {
					b.Field(i).(*array.TimestampBuilder).Append(arrow.Timestamp(*p))
				}
			case "v":
				vb := b.Field(i).(*extensions.VariantBuilder)
				if r.v == "" {
					vb.AppendNull()
					continue
				}
				v, err := variant.ParseJSON(r.v, false)
				if err != nil {
					t.Fatal(err)
				}
				vb.Append(v)
			}
		}
		if extra != nil {
			extra(b, r)
		}
	}
	return b.NewRecordBatch()
}

// readV3 reads the table with iceberg-go's scanner: every row, sorted by id, then ts.
func readV3(t testing.TB, cat tabletest.Loader, ident table.Identifier) []v3Row {
	t.Helper()
	var out []v3Row
	sc, recs := tabletest.Records(t, tabletest.Load(t, cat, ident))
	for rec := range recs {
		for r := 0; r < int(rec.NumRows()); r++ {
			var row v3Row
			for c, f := range sc.Fields() {
				col := rec.Column(c)
				switch f.Name {
				case "id":
					row.id = col.(*array.Int64).Value(r)
				case "ts", "tz":
					if ft := f.Type.(*arrow.TimestampType); ft.Unit != arrow.Nanosecond {
						t.Fatalf("column %s reads back as %s, want nanoseconds", f.Name, ft)
					}
					if col.IsNull(r) {
						continue
					}
					v := int64(col.(*array.Timestamp).Value(r))
					if f.Name == "ts" {
						row.ts = &v
					} else {
						row.tz = &v
					}
				case "v":
					va, ok := col.(*extensions.VariantArray)
					if !ok {
						t.Fatalf("column v reads back as %T (%s), want a variant", col, col.DataType())
					}
					row.v = variantAt(t, va, r)
				}
			}
			out = append(out, row)
		}
	}
	slices.SortFunc(out, cmpV3)
	return out
}

// variantAt is row r of va as JSON, "" for SQL null (VariantArray.IsNull is true for the variant null too).
func variantAt(t testing.TB, va *extensions.VariantArray, r int) string {
	t.Helper()
	if va.Storage().IsNull(r) {
		return ""
	}
	v, err := va.Value(r)
	if err != nil {
		t.Fatalf("variant of row %d: %v", r, err)
	}
	js, err := v.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return string(js)
}

func cmpV3(a, b v3Row) int {
	if a.id != b.id {
		return int(a.id - b.id)
	}
	return strings.Compare(a.String(), b.String())
}

// v3Model is the rows a sequence of calls leaves, by key.
type v3Model map[int64]v3Row

func (m v3Model) rows() []v3Row {
	out := slices.Collect(maps.Values(m))
	slices.SortFunc(out, cmpV3)
	return out
}

// call passes rows as a v3Schema batch to f and records them in m: the rows, or with del their keys gone.
func (m v3Model) call(t testing.TB, ctx context.Context, rows []v3Row, del bool, f func(context.Context, arrow.RecordBatch) error) {
	t.Helper()
	rec := v3Batch(t, v3Schema, rows, nil)
	defer rec.Release()
	must(t, f(ctx, rec))
	for _, r := range rows {
		if del {
			delete(m, r.id)
		} else {
			m[r.id] = r
		}
	}
}

// checkV3 compares the table with want, row by row.
func checkV3(t testing.TB, what string, cat tabletest.Loader, ident table.Identifier, want []v3Row) {
	t.Helper()
	got := readV3(t, cat, ident)
	if fmt.Sprint(got) == fmt.Sprint(want) {
		return
	}
	n := 0
	for i := 0; i < max(len(got), len(want)) && n < 10; i++ {
		var g, w string
		if i < len(got) {
			g = got[i].String()
		}
		if i < len(want) {
			w = want[i].String()
		}
		if g != w {
			t.Errorf("%s: row %d: got %s, want %s", what, i, g, w)
			n++
		}
	}
	t.Fatalf("%s: table holds %d rows, the model %d (first differences above)", what, len(got), len(want))
}

// v3Rows are the rows of keys [from, to) at step i.
func v3Rows(t testing.TB, from, to int64, step int) []v3Row {
	var out []v3Row
	for id := from; id < to; id++ {
		out = append(out, v3Value(t, id, int(id)+step))
	}
	return out
}

// TestV3TypesKeyed writes a variant and nanosecond timestamps through Write, then Upsert and Delete in
// merge-on-read (deletion vectors) and copy-on-write on a v3 table, over several commits, and a Compact at the
// end; after each step the table read back equals the model.
func TestV3TypesKeyed(t *testing.T) {
	t.Parallel()
	eachV3Mode(t, func(t *testing.T, ctx context.Context, cat icecatalog.Catalog, ident table.Identifier, mode iceberg.Mode, w *iceberg.Writer) {
		model := v3Model{}
		model.call(t, ctx, v3Rows(t, 0, 60, 0), false, w.Write)
		must(t, w.Flush(ctx))
		checkV3(t, "after Write", cat, ident, model.rows())
		for step := 1; step <= 3; step++ {
			model.call(t, ctx, v3Rows(t, int64(step*10), int64(step*10+25), step*3), false, w.Upsert) // new keys at step 3
			var dels []v3Row
			for id := int64(step); id < 60; id += 9 {
				dels = append(dels, v3Row{id: id})
			}
			model.call(t, ctx, dels, true, w.Delete)
			must(t, w.Flush(ctx))
			checkV3(t, fmt.Sprintf("after round %d", step), cat, ident, model.rows())
		}
		if mode == iceberg.MergeOnRead {
			assertPositionDeletesOnly(t, cat, ident, 3)
		}
		if _, err := w.Compact(ctx); err != nil {
			t.Fatalf("Compact: %v", err)
		}
		checkV3(t, "after Compact", cat, ident, model.rows())
	}, "id")
}

// TestV3TypesTimestampKey keys a table on a timestamp_ns column, partitioned by day of it: keys a nanosecond
// apart (around a second, midnight and before 1970) stay distinct through Upsert and Delete in both modes, a
// Compact, and a writer opened on the table afterwards (its key index loaded from the files).
func TestV3TypesTimestampKey(t *testing.T) {
	t.Parallel()
	eachV3Mode(t, func(t *testing.T, ctx context.Context, cat icecatalog.Catalog, ident table.Identifier, mode iceberg.Mode, w *iceberg.Writer) {
		model := v3Model{} // by ts: each row's id is its ts
		row := func(ts int64, i int) v3Row {
			r := v3Value(t, ts, i)
			r.ts = &ts
			return r
		}
		var all []v3Row
		seen := map[int64]bool{}
		for i, e := range nsEdges {
			for d := int64(-1); d <= 1; d++ {
				if !seen[e+d] {
					seen[e+d] = true
					all = append(all, row(e+d, i))
				}
			}
		}
		check := func(what string) {
			t.Helper()
			must(t, w.Flush(ctx))
			checkV3(t, what, cat, ident, model.rows())
		}
		model.call(t, ctx, all, false, w.Write)
		check("after Write")
		// changes upserts every n-th key (new values) and deletes the ones after them, through w.
		changes := func(w *iceberg.Writer, n, step int) {
			t.Helper()
			var ups, dels []v3Row
			for i, r := range all {
				switch i % n {
				case 0:
					ups = append(ups, row(*r.ts, i+step))
				case 1:
					dels = append(dels, r)
				}
			}
			model.call(t, ctx, ups, false, w.Upsert)
			model.call(t, ctx, dels, true, w.Delete)
		}
		changes(w, 3, 1)
		check("after Upsert and Delete")
		if _, err := w.Compact(ctx); err != nil {
			t.Fatalf("Compact: %v", err)
		}
		check("after Compact")
		// A file per day of the rows live, the day before 1970 (-1) included.
		days, want := map[int64]bool{}, map[int64]bool{}
		for ts := range model {
			want[floorDiv(ts, 86_400_000_000_000)] = true
		}
		for _, task := range tabletest.LiveDataFiles(t, tabletest.Load(t, cat, ident)) {
			for _, v := range task.File.Partition() {
				days[int64(v.(ice.Date))] = true
			}
		}
		if !maps.Equal(days, want) {
			t.Fatalf("partitions (days) %v, want %v", slices.Sorted(maps.Keys(days)), slices.Sorted(maps.Keys(want)))
		}
		// A writer opened on the table loads its key index from the timestamp_ns key column of the files.
		must(t, w.Close(ctx))
		w2, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithMode(mode), iceberg.WithFlushInterval(0))
		if err != nil {
			t.Fatal(err)
		}
		defer w2.Close(ctx)
		w = w2
		changes(w, 4, 2)
		check("after a reopened writer's Upsert and Delete")
		if mode == iceberg.MergeOnRead {
			assertPositionDeletesOnly(t, cat, ident, 3)
		}
	}, "ts", iceberg.PartitionBy("day(ts)"))
}

// TestV3TypesApply applies a change stream (inserts, updates, deletes by op column) with variant and
// nanosecond values to a merge-on-read and a copy-on-write v3 table.
func TestV3TypesApply(t *testing.T) {
	t.Parallel()
	changeSchema := arrow.NewSchema(append([]arrow.Field{{Name: "op", Type: arrow.BinaryTypes.String}}, v3Schema.Fields()...), nil)
	eachV3Mode(t, func(t *testing.T, ctx context.Context, cat icecatalog.Catalog, ident table.Identifier, _ iceberg.Mode, w *iceberg.Writer) {
		model := v3Model{}
		for round := 0; round < 4; round++ {
			var rows []v3Row
			var ops []string
			for id := int64(0); id < 40; id++ {
				op := []string{"c", "u", "d", "r"}[(int(id)+round)%4]
				if round == 0 {
					op = "c"
				}
				ops = append(ops, op)
				r := v3Value(t, id, int(id)*3+round)
				rows = append(rows, r)
				if op == "d" {
					delete(model, id)
				} else {
					model[id] = r
				}
			}
			n := 0
			rec := v3Batch(t, changeSchema, rows, func(b *array.RecordBuilder, _ v3Row) {
				b.Field(0).(*array.StringBuilder).Append(ops[n])
				n++
			})
			must(t, w.Apply(ctx, rec))
			rec.Release()
			must(t, w.Flush(ctx))
			checkV3(t, fmt.Sprintf("after round %d", round), cat, ident, model.rows())
		}
	}, "id")
}

// TestV3TypesRouterBulk loads variant and nanosecond rows through a Router's bulk phase (Parquet files kept
// open across batches) into a keyed table and one partitioned by hour of its timestamptz_ns column, then goes
// live and upserts (writes, into the partitioned one): each table equals its model after each phase, and the
// partitioned one has the hours of its rows (before 1970 too) as partitions.
func TestV3TypesRouterBulk(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cat := openCatalog(t)
	keyed, hourly := table.Identifier{"v3", "bulk"}, table.Identifier{"v3", "bulk_hourly"}
	r, err := iceberg.NewRouter(cat, iceberg.WithBulkTargetFileSize(1<<20),
		iceberg.WithWriterOptions(iceberg.WithFlushRows(500), iceberg.WithFlushInterval(0)),
		iceberg.WithTableConfig(func(_ context.Context, ident table.Identifier, _ *arrow.Schema) (iceberg.TableConfig, error) {
			create := []iceberg.CreateOption{iceberg.FormatVersion(3), iceberg.IdentifierFields("id")}
			if slices.Equal(ident, hourly) {
				create = []iceberg.CreateOption{iceberg.FormatVersion(3), iceberg.PartitionBy("hour(tz)")}
			}
			return iceberg.TableConfig{Phase: iceberg.PhaseBulk, Create: create}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	models := map[string]v3Model{}
	on := func(ident table.Identifier, f func(context.Context, table.Identifier, arrow.RecordBatch) error) func(context.Context, arrow.RecordBatch) error {
		return func(ctx context.Context, rec arrow.RecordBatch) error { return f(ctx, ident, rec) }
	}
	for _, ident := range []table.Identifier{keyed, hourly} {
		models[fmt.Sprint(ident)] = v3Model{}
		for from := int64(0); from < 3000; from += 300 {
			models[fmt.Sprint(ident)].call(t, ctx, v3Rows(t, from, from+300, 0), false, on(ident, r.Write))
		}
	}
	must(t, r.Flush(ctx))
	for _, ident := range []table.Identifier{keyed, hourly} {
		checkV3(t, fmt.Sprint(ident, " after the bulk load"), cat, ident, models[fmt.Sprint(ident)].rows())
		must(t, r.SetPhase(ctx, ident, iceberg.PhaseLive))
	}
	models[fmt.Sprint(keyed)].call(t, ctx, v3Rows(t, 100, 400, 5), false, on(keyed, r.Upsert))
	models[fmt.Sprint(hourly)].call(t, ctx, v3Rows(t, 3000, 3300, 5), false, on(hourly, r.Write))
	must(t, r.Flush(ctx))
	for _, ident := range []table.Identifier{keyed, hourly} {
		checkV3(t, fmt.Sprint(ident, " after the live phase"), cat, ident, models[fmt.Sprint(ident)].rows())
	}
	hours, want := map[string]bool{}, map[string]bool{}
	for _, row := range models[fmt.Sprint(hourly)] {
		h := "null"
		if row.tz != nil {
			h = fmt.Sprint(floorDiv(*row.tz, 3_600_000_000_000))
		}
		want[h] = true
	}
	for _, task := range tabletest.LiveDataFiles(t, tabletest.Load(t, cat, hourly)) {
		for _, v := range task.File.Partition() {
			h := "null"
			if v != nil {
				h = fmt.Sprint(v)
			}
			hours[h] = true
		}
	}
	if !maps.Equal(hours, want) {
		t.Fatalf("partitions (hours) %v, want %v", slices.Sorted(maps.Keys(hours)), slices.Sorted(maps.Keys(want)))
	}
}

// floorDiv is a/b rounded down (the day of a timestamp before 1970 is negative).
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// TestV3TypesVariantKeyRefused: a variant column cannot be a key (identifier fields must be primitive): WithKeys
// and IdentifierFields naming it fail NewWriter with a *ColumnError naming the column, and create no table.
func TestV3TypesVariantKeyRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cat := openCatalog(t)
	for _, c := range []struct {
		name string
		opts []iceberg.Option
	}{
		{"identifier", []iceberg.Option{iceberg.WithCreate(v3Schema, iceberg.IdentifierFields("v"), iceberg.FormatVersion(3))}},
		{"keys", []iceberg.Option{iceberg.WithCreate(v3Schema, iceberg.FormatVersion(3)), iceberg.WithKeys("id", "v")}},
	} {
		ident := table.Identifier{"v3", "varkey_" + c.name}
		_, err := iceberg.NewWriter(ctx, cat, ident, c.opts...)
		var ce *iceberg.ColumnError
		if !errors.As(err, &ce) || ce.Column != "v" {
			t.Fatalf("%s: NewWriter with a variant key = %v, want a *ColumnError naming v", c.name, err)
		}
		t.Logf("%s: %v", c.name, err)
		if c.name == "identifier" {
			if _, err := cat.LoadTable(ctx, ident); err == nil {
				t.Fatal("the table was created")
			}
		}
	}
}

// TestV3TypesVariantIdentifierAppends: a v3 table created through iceberg-go's catalog API with a variant
// identifier field (which iceberg-go does not refuse) opens for appends: Write and a Flush work and read back
// exactly, while Upsert, Delete and Apply, which would match rows by that key, return a *ColumnError naming the
// variant column. WithKeys naming the variant is refused by NewWriter; WithKeys("id") upserts by id.
func TestV3TypesVariantIdentifierAppends(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"v3", "variant_identifier"}
	must(t, cat.CreateNamespace(ctx, icecatalog.NamespaceFromIdent(ident), nil))
	sc := ice.NewSchemaWithIdentifiers(0, []int{1, 4},
		ice.NestedField{ID: 1, Name: "id", Type: ice.PrimitiveTypes.Int64, Required: true},
		ice.NestedField{ID: 2, Name: "ts", Type: ice.PrimitiveTypes.TimestampNs},
		ice.NestedField{ID: 3, Name: "tz", Type: ice.PrimitiveTypes.TimestampTzNs},
		ice.NestedField{ID: 4, Name: "v", Type: ice.VariantType{}, Required: true})
	if _, err := cat.CreateTable(ctx, ident, sc, icecatalog.WithProperties(ice.Properties{"format-version": "3"})); err != nil {
		t.Fatal(err)
	}
	required := func(rows []v3Row) []v3Row { // v is required: the variant null, not SQL null
		for i := range rows {
			if rows[i].v == "" {
				rows[i].v = "null"
			}
		}
		return rows
	}
	rows := required(v3Rows(t, 0, 40, 0))
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithFlushInterval(0))
	if err != nil {
		t.Fatalf("NewWriter on a table with a variant identifier field: %v", err)
	}
	defer w.Close(ctx)
	m := v3Model{}
	m.call(t, ctx, rows, false, w.Write)
	must(t, w.Flush(ctx))
	checkV3(t, "appended", cat, ident, m.rows())

	rec := v3Batch(t, v3Schema, rows[:1], nil)
	defer rec.Release()
	for name, call := range map[string]func(context.Context, arrow.RecordBatch) error{
		"Upsert": w.Upsert, "Delete": w.Delete, "Apply": w.Apply} {
		err := call(ctx, rec)
		var ce *iceberg.ColumnError
		if !errors.As(err, &ce) || ce.Column != "v" {
			t.Fatalf("%s on a variant identifier field = %v, want a *ColumnError naming v", name, err)
		}
	}
	if _, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithKeys("id", "v")); err == nil {
		t.Fatal("NewWriter with WithKeys naming the variant column succeeded")
	}
	w2, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithFlushInterval(0), iceberg.WithKeys("id"))
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close(ctx)
	m.call(t, ctx, required(v3Rows(t, 30, 50, 1)), false, w2.Upsert)
	must(t, w2.Flush(ctx))
	checkV3(t, "upserted by id", cat, ident, m.rows())
}

// TestV3TypesV2Refused: a format-2 table has no variant or nanosecond types: WithCreate refuses them, and
// schema evolution refuses to add a variant column, with a *ColumnError naming it; the table is unchanged.
func TestV3TypesV2Refused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cat := openCatalog(t)
	_, err := iceberg.NewWriter(ctx, cat, table.Identifier{"v2", "created"}, iceberg.WithCreate(v3Schema))
	var ce *iceberg.ColumnError
	if !errors.As(err, &ce) || ce.Column != "ts" {
		t.Fatalf("WithCreate of variant and ns columns on v2 = %v, want a *ColumnError naming ts", err)
	}
	t.Logf("create: %v", err)
	ident := table.Identifier{"v2", "evolve"}
	w := newEvolvingWriter(t, cat, ident, arrow.NewSchema([]arrow.Field{fID}, nil))
	defer w.Close(ctx)
	rec := v3Batch(t, arrow.NewSchema([]arrow.Field{fID, v3Schema.Field(3)}, nil), []v3Row{{id: 1, v: "1"}}, nil)
	defer rec.Release()
	err = w.Write(ctx, rec)
	if !errors.As(err, &ce) || ce.Column != "v" {
		t.Fatalf("Write of a variant column into v2 with schema evolution = %v, want a *ColumnError naming v", err)
	}
	t.Logf("evolve: %v", err)
	if _, ok := loadSchema(t, cat, ident).FindFieldByName("v"); ok {
		t.Fatal("the v2 table has the column")
	}
	writeMaps(t, w, []arrow.Field{fID}, map[string]any{"id": 2})
	must(t, w.Flush(ctx))
	if counts, _ := readRows(t, cat, ident); len(counts) != 1 {
		t.Fatalf("table ids %v, want 2", counts)
	}
}

// eachV3Mode runs body in parallel subtests, one per mode, each on a fresh v3Schema table of format version 3
// keyed by key (created with create besides), through a writer in that mode that flushes only when asked and
// never compacts on its own.
func eachV3Mode(t *testing.T, body func(t *testing.T, ctx context.Context, cat icecatalog.Catalog, ident table.Identifier, mode iceberg.Mode, w *iceberg.Writer), key string, create ...iceberg.CreateOption) {
	eachMode(t, func(t *testing.T, ctx context.Context, cat icecatalog.Catalog, mode iceberg.Mode) {
		ident := table.Identifier{"v3", "keyed"}
		create := append([]iceberg.CreateOption{iceberg.IdentifierFields(key), iceberg.FormatVersion(3)}, create...)
		w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(v3Schema, create...), iceberg.WithMode(mode),
			iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompactionEvery(0))
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close(ctx)
		body(t, ctx, cat, ident, mode, w)
	})
}

// eachMode runs body in parallel subtests, one per mode, each with a fresh catalog.
func eachMode(t *testing.T, body func(t *testing.T, ctx context.Context, cat icecatalog.Catalog, mode iceberg.Mode)) {
	for _, mode := range []iceberg.Mode{iceberg.MergeOnRead, iceberg.CopyOnWrite} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			body(t, context.Background(), openCatalog(t), mode)
		})
	}
}

// TestV3TypesEvolve: schema evolution adds variant, timestamp_ns and timestamptz_ns columns to a v3 table when a
// batch brings them (no truncation to microseconds); rows written before read SQL null in them.
func TestV3TypesEvolve(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"v3", "evolve"}
	createTable(t, ctx, cat, ident, arrow.NewSchema([]arrow.Field{fID}, nil), iceberg.FormatVersion(3))
	w := newEvolvingWriter(t, cat, ident, nil)
	defer w.Close(ctx)
	model := v3Model{}
	idRows(t, w, 0, 10)
	for id := int64(0); id < 10; id++ {
		model[id] = v3Row{id: id}
	}
	model.call(t, ctx, v3Rows(t, 10, 60, 0), false, w.Write)
	must(t, w.Flush(ctx))
	sc := loadSchema(t, cat, ident)
	for name, want := range map[string]ice.Type{"ts": ice.PrimitiveTypes.TimestampNs,
		"tz": ice.PrimitiveTypes.TimestampTzNs, "v": ice.VariantType{}} {
		if f := fieldOf(t, sc, name); !f.Type.Equals(want) {
			t.Fatalf("column %s added as %s, want %s", name, f.Type, want)
		}
	}
	checkV3(t, "after evolution", cat, ident, model.rows())
	// Writer.AddColumn maps the types as evolution does.
	must(t, w.AddColumn(ctx, arrow.Field{Name: "v2", Type: extensions.NewDefaultVariantType()}, nil))
	must(t, w.AddColumn(ctx, arrow.Field{Name: "ts2", Type: tsNs}, nil))
	sc = loadSchema(t, cat, ident)
	if v, ts := fieldOf(t, sc, "v2"), fieldOf(t, sc, "ts2"); !v.Type.Equals(ice.VariantType{}) || !ts.Type.Equals(ice.PrimitiveTypes.TimestampNs) {
		t.Fatalf("AddColumn added v2 %s, ts2 %s", v.Type, ts.Type)
	}

	// A variant inside a struct column the table has.
	fS := arrow.Field{Name: "s", Type: arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true}), Nullable: true}
	writeMaps(t, w, []arrow.Field{fID, fS}, map[string]any{"id": 60, "s": map[string]any{"a": 1}})
	sv := arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: "v", Type: extensions.NewDefaultVariantType(), Nullable: true})
	rec := buildRecord(t, []arrow.Field{fID, {Name: "s", Type: sv, Nullable: true}}, func(b *array.RecordBuilder) {
		b.Field(0).(*array.Int64Builder).Append(61)
		sb := b.Field(1).(*array.StructBuilder)
		sb.Append(true)
		sb.FieldBuilder(0).(*array.Int64Builder).Append(2)
		sb.FieldBuilder(1).(*extensions.VariantBuilder).Append(variant.NullValue)
	})
	defer rec.Release()
	must(t, w.Write(ctx, rec))
	must(t, w.Flush(ctx))
	if f := fieldOf(t, loadSchema(t, cat, ident), "s"); !f.Type.(*ice.StructType).FieldList[1].Type.Equals(ice.VariantType{}) {
		t.Fatalf("s added as %s, want a variant field v", f.Type)
	}
	// Row 60 was written before s.v existed (SQL null), row 61 holds the variant null.
	got := map[int64]string{}
	as, recs := tabletest.Records(t, tabletest.Load(t, cat, ident))
	for rec := range recs {
		ids, st := rec.Column(as.FieldIndices("id")[0]).(*array.Int64), rec.Column(as.FieldIndices("s")[0]).(*array.Struct)
		va := st.Field(1).(*extensions.VariantArray)
		for r := 0; r < int(rec.NumRows()); r++ {
			if id := ids.Value(r); id >= 60 {
				got[id] = variantAt(t, va, r)
			}
		}
	}
	if want := map[int64]string{60: "", 61: "null"}; !maps.Equal(got, want) {
		t.Fatalf("s.v: %v, want %v", got, want)
	}
}

// TestV3TypesNanosIntoV2: a format-2 table has microsecond timestamps only. Nanosecond Arrow timestamps that
// are whole microseconds go into such a column, through upserts and deletes as v2 position deletes; one that is
// not is refused with a *ColumnError naming the column (never truncated silently), and the writer stays
// usable. Schema evolution adds a nanosecond column as microseconds, under the same rule.
func TestV3TypesNanosIntoV2(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"v2", "micros"}
	fUs := arrow.Field{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond}, Nullable: true}
	createTable(t, ctx, cat, ident, arrow.NewSchema([]arrow.Field{fID, fUs}, nil), iceberg.IdentifierFields("id"))
	w := newEvolvingWriter(t, cat, ident, nil)
	defer w.Close(ctx)
	withNs := arrow.NewSchema([]arrow.Field{fID, v3Schema.Field(1), v3Schema.Field(2)}, nil) // ts, and tz: new
	micros := func(rows []v3Row) []v3Row {
		for i := range rows {
			for _, p := range []**int64{&rows[i].ts, &rows[i].tz} {
				if *p != nil {
					v := floorDiv(**p, 1000) * 1000
					*p = &v
				}
			}
			rows[i].v = ""
		}
		return rows
	}
	model := v3Model{}
	put := func(rows []v3Row, f func(context.Context, arrow.RecordBatch) error, del bool) error {
		rec := v3Batch(t, withNs, rows, nil)
		defer rec.Release()
		if err := f(ctx, rec); err != nil {
			return err
		}
		for _, r := range rows {
			if del {
				delete(model, r.id)
			} else {
				model[r.id] = r
			}
		}
		return nil
	}
	must(t, put(micros(v3Rows(t, 0, 40, 0)), w.Write, false))
	must(t, w.Flush(ctx))
	must(t, put(micros(v3Rows(t, 10, 30, 1)), w.Upsert, false))
	must(t, put(micros(v3Rows(t, 0, 5, 0)), w.Delete, true))
	for _, f := range []func(context.Context, arrow.RecordBatch) error{w.Write, w.Upsert} {
		lossy := v3Rows(t, 100, 101, 0)
		lossy[0].ts = new(int64)
		*lossy[0].ts = 1_000_000_001
		err := put(lossy, f, false)
		var ce *iceberg.ColumnError
		if !errors.As(err, &ce) || ce.Column != "ts" {
			t.Fatalf("a nanosecond value into a microsecond column = %v, want a *ColumnError naming ts", err)
		}
	}
	must(t, w.Flush(ctx))
	if f := fieldOf(t, loadSchema(t, cat, ident), "tz"); !f.Type.Equals(ice.PrimitiveTypes.TimestampTz) {
		t.Fatalf("tz added to a v2 table as %s, want timestamptz", f.Type)
	}
	assertPositionDeletesOnly(t, cat, ident, 2)
	want := model.rows()
	got := readV3Micros(t, cat, ident)
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d", len(got), len(want))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("table\n%v\nwant\n%v", got, want)
	}
}

// readV3Micros reads a table whose timestamps are microseconds, as readV3 reads nanoseconds (in nanoseconds);
// an id in several rows is there as often.
func readV3Micros(t testing.TB, cat tabletest.Loader, ident table.Identifier) []v3Row {
	var out []v3Row
	counts, rows := readRows(t, cat, ident)
	for id, r := range rows {
		for range counts[id] - 1 {
			out = append(out, v3Row{id: id})
		}
		row := v3Row{id: id}
		for name, p := range map[string]**int64{"ts": &row.ts, "tz": &row.tz} {
			if v, ok := r[name].(int64); ok {
				v *= 1000
				*p = &v
			}
		}
		out = append(out, row)
	}
	slices.SortFunc(out, cmpV3)
	return out
}

// badVariantColumn is a variant column of n rows whose row bad holds bytes that are not a variant, the others the
// integer of their row.
func badVariantColumn(t testing.TB, n, bad int) arrow.Array {
	t.Helper()
	vt := extensions.NewDefaultVariantType()
	sb := array.NewStructBuilder(memory.NewGoAllocator(), vt.StorageType().(*arrow.StructType))
	defer sb.Release()
	for i := range n {
		sb.Append(true)
		v, err := variant.Of(int64(i))
		if err != nil {
			t.Fatal(err)
		}
		meta, value := v.Metadata().Bytes(), v.Bytes()
		if i == bad {
			meta, value = []byte{0xff, 0x01}, []byte{0xff, 0xff}
		}
		sb.FieldBuilder(0).(*array.BinaryBuilder).Append(meta)
		sb.FieldBuilder(1).(*array.BinaryBuilder).Append(value)
	}
	st := sb.NewArray()
	defer st.Release()
	return array.NewExtensionArrayWithStorage(vt, st)
}

// TestV3TypesBadVariant: variant bytes that do not decode (top level, and in a struct) fail Write with a
// *ColumnError naming the column, and nothing of the call is written; with a dead letter handler only that row
// is routed there and the others are written.
func TestV3TypesBadVariant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"v3", "badvariant"}
	vField := v3Schema.Field(3)
	st := arrow.StructOf(vField)
	sc := arrow.NewSchema([]arrow.Field{fID, vField, {Name: "s", Type: st, Nullable: true}}, nil)
	var dead []error
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(sc, iceberg.FormatVersion(3)), iceberg.WithFlushInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	batch := func(badTop, badNested int) arrow.RecordBatch {
		ids := make([]int64, 4)
		for i := range ids {
			ids[i] = int64(i)
		}
		ib := array.NewInt64Builder(memory.NewGoAllocator())
		defer ib.Release()
		ib.AppendValues(ids, nil)
		idCol, top, nested := ib.NewArray(), badVariantColumn(t, 4, badTop), badVariantColumn(t, 4, badNested)
		defer idCol.Release()
		defer top.Release()
		defer nested.Release()
		sArr, err := array.NewStructArrayWithFields([]arrow.Array{nested}, st.Fields())
		if err != nil {
			t.Fatal(err)
		}
		defer sArr.Release()
		return array.NewRecordBatch(sc, []arrow.Array{idCol, top, sArr}, 4)
	}
	for _, c := range []struct {
		col              string
		badTop, badInner int
	}{{"v", 2, -1}, {"s.v", -1, 1}} {
		rec := batch(c.badTop, c.badInner)
		err := w.Write(ctx, rec)
		rec.Release()
		var ce *iceberg.ColumnError
		if !errors.As(err, &ce) || ce.Column != c.col || !errors.Is(err, iceberg.ErrTypeMismatch) {
			t.Fatalf("invalid variant bytes in %s: Write = %v, want a *ColumnError naming it", c.col, err)
		}
	}
	must(t, w.Flush(ctx))
	if counts, _ := readRows(t, cat, ident); len(counts) != 0 {
		t.Fatalf("the table holds rows %v of refused calls", counts)
	}

	w2, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithFlushInterval(0),
		iceberg.WithDeadLetter(func(_ any, err error) { dead = append(dead, err) }))
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close(ctx)
	rec := batch(2, -1)
	must(t, w2.Write(ctx, rec))
	rec.Release()
	must(t, w2.Flush(ctx))
	counts, _ := readRows(t, cat, ident)
	if len(dead) != 1 || len(counts) != 3 || counts[2] != 0 {
		t.Fatalf("dead letters %v, table ids %v: want row 2 routed, 0, 1 and 3 written", dead, counts)
	}
}
