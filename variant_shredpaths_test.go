package iceberg_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/arrow-go/v18/parquet/variant"
	ice "github.com/apache/iceberg-go"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// Shredding of chosen variant paths (WithShreddedPaths, table property write.parquet.variant-shredded-paths.<column>):
// every data file stores exactly the chosen paths typed, whatever its rows hold, with variant bounds on them.

// pathDoc is row id's variant for the chosen-path tests: $.a is id (a long), $.n.b is 2*id, $.s a string; from
// id 300 on every seventh row has $.a a string (another type: the residual), every fifth row has no $.a, every
// eleventh is the variant null and every thirteenth SQL null. A file with a string at $.a in its residual has no
// bound on $.a (iceberg-go writes none when a path's residual holds values: a filter cannot be decided from the
// typed values alone), so the tests keep those rows in the last file of 100 ids.
func pathDoc(id int64) (string, bool) {
	switch {
	case id%13 == 0:
		return "", false
	case id%11 == 0:
		return "null", true
	case id >= 300 && id%7 == 0:
		return fmt.Sprintf(`{"a": "big %d", "n": {"b": %d}, "s": "row %d"}`, id, 2*id, id), true
	case id%5 == 0:
		return fmt.Sprintf(`{"n": {"b": %d, "c": [1, "two"]}, "s": "row %d"}`, 2*id, id), true
	}
	return fmt.Sprintf(`{"a": %d, "n": {"b": %d}, "s": "row %d"}`, id, 2*id, id), true
}

// pathA is $.a of row id when it is a long.
func pathA(id int64) (int64, bool) {
	doc, ok := pathDoc(id)
	if !ok || doc == "null" || (id >= 300 && id%7 == 0) || id%5 == 0 {
		return 0, false
	}
	return id, true
}

// pathBatch makes shredSchema rows for ids lo..hi-1 with pathDoc's variants.
func pathBatch(t testing.TB, lo, hi int64) arrow.RecordBatch {
	t.Helper()
	return variantBatch(t, lo, hi, pathDoc)
}

// pathRead reads tbl with the filter (nil: every row) and returns the ids read, checking every variant against
// pathDoc's: SQL null stays SQL null, the variant null stays the variant null, every other value equal in value
// (JSON), its strings, objects and arrays in type.
func pathRead(t *testing.T, tbl *table.Table, filter ice.BooleanExpression) map[int64]bool {
	t.Helper()
	var opts []table.ScanOption
	if filter != nil {
		opts = append(opts, table.WithRowFilter(filter))
	}
	got := map[int64]bool{}
	_, recs := tabletest.Records(t, tbl, opts...)
	for rec := range recs {
		ids := rec.Column(tabletest.Column(t, rec.Schema(), "id")).(*array.Int64)
		vs := rec.Column(tabletest.Column(t, rec.Schema(), "v")).(*extensions.VariantArray)
		for i := range ids.Len() {
			id := ids.Value(i)
			doc, ok := pathDoc(id)
			got[id] = true
			if vs.Storage().IsNull(i) {
				if ok {
					t.Fatalf("id %d: read SQL null, wrote %s", id, doc)
				}
				continue
			}
			if !ok {
				t.Fatalf("id %d: read a value, wrote SQL null", id)
			}
			v, err := vs.Value(i)
			if err != nil {
				t.Fatalf("id %d: %v", id, err)
			}
			want, err := variant.ParseJSON(doc, false)
			if err != nil {
				t.Fatal(err)
			}
			gotJSON, err := v.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(tabletest.JSONValue(t, gotJSON), tabletest.JSONValue(t, []byte(doc))) ||
				v.Type() != want.Type() || !sameVariant(v, want) {
				t.Fatalf("id %d: read %s (%v), wrote %s (%v)", id, gotJSON, v.Type(), doc, want.Type())
			}
		}
	}
	return got
}

// pathStorage is the Arrow storage type of column v in the Parquet file at path.
func pathStorage(t *testing.T, tbl *table.Table, path string) string {
	t.Helper()
	fsys, err := tbl.FS(context.Background())
	must(t, err)
	f, err := fsys.Open(path)
	must(t, err)
	defer f.Close()
	r, err := file.NewParquetReader(f)
	must(t, err)
	defer r.Close()
	fr, err := pqarrow.NewFileReader(r, pqarrow.ArrowReadProperties{}, memory.NewGoAllocator())
	must(t, err)
	sc, err := fr.Schema()
	must(t, err)
	return sc.Field(tabletest.Column(t, sc, "v")).Type.(*extensions.VariantType).StorageType().String()
}

// pathLayout is the typed_value of v the chosen paths a:long, n.b:long make.
const pathLayout = "typed_value: struct<a: struct<value: binary nullable, typed_value: int64 nullable>, " +
	"n: struct<value: binary nullable, typed_value: struct<b: struct<value: binary nullable, typed_value: int64 nullable>> nullable>>"

// assertPathFiles checks that every live data file of tbl stores v in pathLayout with variant bounds.
func assertPathFiles(t *testing.T, tbl *table.Table) int {
	t.Helper()
	files := shreddedFiles(t, tbl)
	for _, p := range files {
		if got := pathStorage(t, tbl, p); !strings.Contains(got, pathLayout) {
			t.Fatalf("file %s stores v as %s, want the chosen layout (%s)", p, got, pathLayout)
		}
	}
	return len(files)
}

// TestShreddedPathsPrune: with $.a and $.n.b chosen (by the option, or by the table property), every file of an
// append, a merge-on-read upsert, a copy-on-write rewrite and a compaction stores exactly those paths, whatever
// its rows hold ($.a missing in some rows, a string in others), with bounds on them; a filter on either path
// reads only the files whose bounds admit it, and every row reads back. The file of ids 300-399, whose $.a is a
// string in some rows, has no bound on $.a (its residual holds values there): filters on $.a read it, filters
// on $.n.b do not; so has the one file a compaction makes of all four.
func TestShreddedPathsPrune(t *testing.T) {
	t.Parallel() // see TestMain
	paths := []iceberg.ShreddedPath{{Path: "$.a", Type: ice.PrimitiveTypes.Int64}, {Path: "n.b", Type: ice.PrimitiveTypes.Int64}}
	keyed := []iceberg.CreateOption{iceberg.IdentifierFields("id")}
	for _, c := range []struct {
		name   string
		create []iceberg.CreateOption
		opts   []iceberg.Option
		change func(t *testing.T, w *iceberg.Writer)
		files  int
		// reads overrides filters' files by filter name
		reads   map[string]int64
		deleted func(int64) bool
	}{
		{name: "option", opts: []iceberg.Option{iceberg.WithShreddedPaths("v", paths...)}, files: 4},
		{name: "table property", create: []iceberg.CreateOption{iceberg.TableProperties(map[string]string{
			iceberg.ShreddedPathsPropertyPrefix + "v": "a:long, n.b:long", table.ParquetShredVariantsKey: "true"})}, files: 4},
		{name: "merge-on-read upsert", create: keyed, opts: []iceberg.Option{iceberg.WithShreddedPaths("v", paths...)},
			change: func(t *testing.T, w *iceberg.Writer) { // ids 100-109 again: a fifth file, $.a within 100-109
				rec := pathBatch(t, 100, 110)
				must(t, w.Upsert(context.Background(), rec))
				rec.Release()
			}, files: 5, reads: map[string]int64{"a in 100-109": 3}},
		{name: "copy-on-write", create: keyed, opts: []iceberg.Option{iceberg.WithShreddedPaths("v", paths...),
			iceberg.WithMode(iceberg.CopyOnWrite)},
			change: func(t *testing.T, w *iceberg.Writer) { // ids 100-109 again and id 250 deleted: three files rewritten
				rec := pathBatch(t, 100, 110)
				must(t, w.Upsert(context.Background(), rec))
				rec.Release()
				must(t, w.Delete(context.Background(), keyBatch([]int64{250, 351})))
			}, files: 5, reads: map[string]int64{"a in 100-109": 3},
			deleted: func(id int64) bool { return id == 250 || id == 351 }},
		{name: "compaction", create: keyed, opts: []iceberg.Option{iceberg.WithShreddedPaths("v", paths...)},
			change: func(t *testing.T, w *iceberg.Writer) { // one file of all four: ids 300-399's strings leave $.a unbounded
				must(t, w.Delete(context.Background(), keyBatch([]int64{250})))
				must(t, w.Flush(context.Background()))
				res, err := w.Compact(context.Background())
				must(t, err)
				if res.RewrittenDataFiles != 4 || res.AddedDataFiles != 1 {
					t.Fatalf("compaction: %+v, want the 4 files rewritten into 1", res)
				}
			}, files: 1, reads: map[string]int64{"a range": 1, "a in 100-109": 1, "a equal": 1},
			deleted: func(id int64) bool { return id == 250 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			cat, reads := tabletest.CountedCatalog(t)
			ident := table.Identifier{"db", "paths"}
			w := shredWriter(t, cat, ident, c.create, c.opts...)
			for lo := int64(0); lo < shredFiles*shredPer; lo += shredPer {
				rec := pathBatch(t, lo, lo+shredPer)
				must(t, w.Write(ctx, rec))
				rec.Release()
				must(t, w.Flush(ctx))
			}
			var rowIDs map[int64]int64 // before the change: every row keeps its _row_id through it (row lineage)
			if c.change != nil {
				rowIDs = tabletest.RowIDs(t, tabletest.Load(t, cat, ident))
				c.change(t, w)
				must(t, w.Flush(ctx))
			}
			must(t, w.Close(ctx))
			tbl := tabletest.Load(t, cat, ident)
			if rowIDs != nil {
				after := tabletest.RowIDs(t, tbl)
				for id, rid := range rowIDs {
					if c.deleted != nil && c.deleted(id) {
						continue
					}
					if after[id] != rid {
						t.Fatalf("id %d: _row_id %d after the change, %d before", id, after[id], rid)
					}
				}
			}
			if got := assertPathFiles(t, tbl); got != c.files {
				t.Fatalf("%d data files, want %d", got, c.files)
			}
			assertPathPrunes(t, tbl, reads, c.reads, c.deleted)
		})
	}
}

// TestShreddedPathsSorted: on a table with a sort order (v descending by id), each chosen-layout file holds its
// rows in that order, and the files prune as any.
func TestShreddedPathsSorted(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat, reads := tabletest.CountedCatalog(t)
	ident := table.Identifier{"db", "paths"}
	must(t, cat.CreateNamespace(ctx, table.Identifier{"db"}, nil))
	sc := ice.NewSchema(0,
		ice.NestedField{ID: 1, Name: "id", Type: ice.PrimitiveTypes.Int64, Required: true},
		ice.NestedField{ID: 2, Name: "v", Type: ice.VariantType{}})
	order, err := table.NewSortOrder(1, []table.SortField{{SourceIDs: []int{1}, Transform: ice.IdentityTransform{},
		Direction: table.SortDESC, NullOrder: table.NullsLast}})
	must(t, err)
	_, err = cat.CreateTable(ctx, ident, sc, icecatalog.WithSortOrder(order),
		icecatalog.WithProperties(ice.Properties{"format-version": "3"}))
	must(t, err)
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompactionEvery(0),
		iceberg.WithShreddedPaths("v", iceberg.ShreddedPath{Path: "a", Type: ice.PrimitiveTypes.Int64},
			iceberg.ShreddedPath{Path: "n.b", Type: ice.PrimitiveTypes.Int64}))
	must(t, err)
	for lo := int64(0); lo < shredFiles*shredPer; lo += shredPer {
		rec := pathBatch(t, lo, lo+shredPer)
		must(t, w.Write(ctx, rec))
		rec.Release()
		must(t, w.Flush(ctx))
	}
	must(t, w.Close(ctx))
	tbl := tabletest.Load(t, cat, ident)
	if got := assertPathFiles(t, tbl); got != shredFiles {
		t.Fatalf("%d data files, want %d", got, shredFiles)
	}
	for _, task := range tabletest.LiveDataFiles(t, tbl) {
		_, recs, err := tbl.Scan().ReadTasks(ctx, []table.FileScanTask{task})
		must(t, err)
		prev := int64(1 << 62)
		for rec, err := range recs {
			must(t, err)
			ids := rec.Column(tabletest.Column(t, rec.Schema(), "id")).(*array.Int64)
			for i := range ids.Len() {
				if ids.Value(i) > prev {
					t.Fatalf("file %s: id %d after %d, want descending ids", task.File.FilePath(), ids.Value(i), prev)
				}
				prev = ids.Value(i)
			}
			rec.Release()
		}
	}
	assertPathPrunes(t, tbl, reads, nil, nil)
}

// TestShreddedPathsPartitioned: on a table partitioned by bucket(2, id), each append writes a file per bucket in
// the chosen layout with the bucket's partition value (a scan on id reads the one file of its bucket and range);
// so do a copy-on-write delete's rewrites and a compaction, which makes a file per bucket.
func TestShreddedPathsPartitioned(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat, reads := tabletest.CountedCatalog(t)
	ident := table.Identifier{"db", "paths"}
	w := shredWriter(t, cat, ident, []iceberg.CreateOption{iceberg.IdentifierFields("id"), iceberg.PartitionBy("bucket(2, id)")},
		iceberg.WithMode(iceberg.CopyOnWrite),
		iceberg.WithShreddedPaths("v", iceberg.ShreddedPath{Path: "a", Type: ice.PrimitiveTypes.Int64},
			iceberg.ShreddedPath{Path: "n.b", Type: ice.PrimitiveTypes.Int64}))
	for lo := int64(0); lo < shredFiles*shredPer; lo += shredPer {
		rec := pathBatch(t, lo, lo+shredPer)
		must(t, w.Write(ctx, rec))
		rec.Release()
		must(t, w.Flush(ctx))
	}
	must(t, w.Delete(ctx, keyBatch([]int64{250, 351})))
	must(t, w.Flush(ctx))
	deleted := func(id int64) bool { return id == 250 || id == 351 }
	check := func(t *testing.T, files int, override map[string]int64) {
		t.Helper()
		tbl := tabletest.Load(t, cat, ident)
		if got := assertPathFiles(t, tbl); got != files {
			t.Fatalf("%d data files, want %d", got, files)
		}
		bucket := ice.BucketTransform{NumBuckets: 2}
		for _, task := range tabletest.LiveDataFiles(t, tbl) {
			part := task.File.Partition()
			if len(part) != 1 {
				t.Fatalf("data file %s: partition %v, want the bucket", task.File.FilePath(), part)
			}
			_, recs, err := tbl.Scan().ReadTasks(context.Background(), []table.FileScanTask{task})
			must(t, err)
			for rec, err := range recs {
				must(t, err)
				ids := rec.Column(tabletest.Column(t, rec.Schema(), "id")).(*array.Int64)
				for i := range ids.Len() {
					b := bucket.Apply(ice.Optional[ice.Literal]{Valid: true, Val: ice.NewLiteral(ids.Value(i))})
					for _, v := range part {
						if v != b.Val.Any() {
							t.Fatalf("data file %s: partition %v holds id %d of bucket %v", task.File.FilePath(), part, ids.Value(i), b.Val.Any())
						}
					}
				}
				rec.Release()
			}
		}
		before := reads()
		if got := pathRead(t, tbl, ice.EqualTo(ice.Reference("id"), int64(151))); !reflect.DeepEqual(got, map[int64]bool{151: true}) {
			t.Fatalf("id 151: read %v", got)
		}
		if n := reads() - before; n > override["id"] {
			t.Errorf("a scan for id 151 read data files %d times, want at most %d", n, override["id"])
		}
		assertPathPrunes(t, tbl, reads, override, deleted)
	}
	// Two files per 100 ids; those of ids 300-399 have no bound on $.a.
	t.Run("appends and copy-on-write", func(t *testing.T) {
		check(t, 8, map[string]int64{"id": 1, "a equal": 4, "a range": 4, "a none": 2, "a in 100-109": 4, "n.b equal": 2})
	})
	res, err := w.Compact(ctx)
	must(t, err)
	if res.AddedDataFiles != 2 {
		t.Fatalf("compaction: %+v, want a file per bucket", res)
	}
	must(t, w.Close(ctx))
	t.Run("compaction", func(t *testing.T) {
		check(t, 2, map[string]int64{"id": 1, "a equal": 2, "a range": 2, "a none": 2, "a in 100-109": 2, "n.b equal": 2})
	})
}

// TestShreddedPathsRouterBulk: a Router's bulk phase writes the files of a table whose paths are chosen (by its
// table property) in the chosen layout, a file per batch, and they prune.
func TestShreddedPathsRouterBulk(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat, reads := tabletest.CountedCatalog(t)
	ident := table.Identifier{"db", "paths"}
	createTable(t, ctx, cat, ident, shredSchema, iceberg.FormatVersion(3), iceberg.TableProperties(map[string]string{
		iceberg.ShreddedPathsPropertyPrefix + "v": "a:long,n.b:long"}))
	r := bulkRouter(t, cat, 64<<20, iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompactionEvery(0))
	for lo := int64(0); lo < shredFiles*shredPer; lo += shredPer {
		rec := pathBatch(t, lo, lo+shredPer)
		must(t, r.Write(ctx, ident, rec))
		rec.Release()
		must(t, r.Flush(ctx))
	}
	must(t, r.Close(ctx))
	tbl := tabletest.Load(t, cat, ident)
	if got := assertPathFiles(t, tbl); got != shredFiles {
		t.Fatalf("%d data files, want %d", got, shredFiles)
	}
	assertPathPrunes(t, tbl, reads, nil, nil)
}

// assertPathPrunes scans tbl (ids 0-399 of pathDoc written in four files of 100 ids, less the deleted) with
// filters on the chosen paths $.a and $.n.b: each scan reads the data files at most as often as the files whose
// bounds admit it (override: other counts by filter name), returns the model's rows, and every variant reads
// back exactly; so does a scan without a filter.
func assertPathPrunes(t *testing.T, tbl *table.Table, reads func() int64, override map[string]int64, deleted func(int64) bool) {
	t.Helper()
	a := ice.Extract(ice.Reference("v"), "$.a", ice.PrimitiveTypes.Int64)
	nb := ice.Extract(ice.Reference("v"), "$.n.b", ice.PrimitiveTypes.Int64)
	aIs := func(f func(int64) bool) func(int64) bool {
		return func(id int64) bool { x, ok := pathA(id); return ok && f(x) }
	}
	// The filters, with the files each reads at most on the four files of appends (ids 0-99, ..., 300-399).
	filters := []struct {
		name   string
		filter ice.BooleanExpression
		admit  func(id int64) bool
		files  int64
	}{
		{"a equal", ice.EqualTo(a, int64(151)), aIs(func(x int64) bool { return x == 151 }), 2}, // and ids 300-399
		{"a range", ice.GreaterThanEqual(a, int64(250)), aIs(func(x int64) bool { return x >= 250 }), 2},
		{"a none", ice.EqualTo(a, int64(10_000)), func(int64) bool { return false }, 1},
		{"a in 100-109", ice.EqualTo(a, int64(101)), aIs(func(x int64) bool { return x == 101 }), 2},
		{"n.b equal", ice.EqualTo(nb, int64(302)), func(id int64) bool {
			doc, ok := pathDoc(id)
			return ok && doc != "null" && id == 151
		}, 1},
		{"n.b none", ice.EqualTo(nb, int64(10_000)), func(int64) bool { return false }, 0},
	}
	live := func(id int64) bool { return deleted == nil || !deleted(id) }
	for _, f := range filters {
		t.Run(f.name, func(t *testing.T) {
			before := reads()
			got := pathRead(t, tbl, f.filter)
			want := f.files
			if n, ok := override[f.name]; ok {
				want = n
			}
			if n := reads() - before; n > want {
				t.Errorf("the scan read data files %d times, want at most %d (the files whose bounds admit it)", n, want)
			}
			model := map[int64]bool{}
			for id := int64(0); id < shredFiles*shredPer; id++ {
				if f.admit(id) && live(id) {
					model[id] = true
				}
			}
			if !reflect.DeepEqual(got, model) {
				t.Errorf("read ids %v, want %v", got, model)
			}
		})
	}
	got := pathRead(t, tbl, nil)
	for id := int64(0); id < shredFiles*shredPer; id++ {
		if got[id] != live(id) {
			t.Fatalf("id %d: read %v, want %v", id, got[id], live(id))
		}
	}
}

// TestShreddedPathsRefused: chosen paths that do not fit the table are refused by NewWriter naming the column.
func TestShreddedPathsRefused(t *testing.T) {
	long := ice.PrimitiveTypes.Int64
	for _, c := range []struct {
		name   string
		create []iceberg.CreateOption
		opts   []iceberg.Option
		want   error
		column string
		say    string
		schema *arrow.Schema // nil: shredSchema
	}{
		{name: "not a variant column", opts: []iceberg.Option{iceberg.WithShreddedPaths("id", iceberg.ShreddedPath{Path: "a", Type: long})},
			want: iceberg.ErrInvalidOption, column: "id", say: "not variant"},
		{name: "no such column", opts: []iceberg.Option{iceberg.WithShreddedPaths("w", iceberg.ShreddedPath{Path: "a", Type: long})},
			want: iceberg.ErrInvalidOption, column: "w", say: "no such column"},
		{name: "no path", opts: []iceberg.Option{iceberg.WithShreddedPaths("v")},
			want: iceberg.ErrInvalidOption, column: "v", say: "no path"},
		{name: "array element", opts: []iceberg.Option{iceberg.WithShreddedPaths("v", iceberg.ShreddedPath{Path: "$.a[0]", Type: long})},
			want: iceberg.ErrInvalidOption, column: "v", say: "$.a[0]"},
		{name: "empty field", opts: []iceberg.Option{iceberg.WithShreddedPaths("v", iceberg.ShreddedPath{Path: "a..b", Type: long})},
			want: iceberg.ErrInvalidOption, column: "v", say: "a..b"},
		{name: "decimal", opts: []iceberg.Option{iceberg.WithShreddedPaths("v", iceberg.ShreddedPath{Path: "a", Type: ice.DecimalTypeOf(10, 2)})},
			want: iceberg.ErrInvalidOption, column: "v", say: "cannot be shredded"},
		{name: "path inside another", opts: []iceberg.Option{iceberg.WithShreddedPaths("v",
			iceberg.ShreddedPath{Path: "a", Type: long}, iceberg.ShreddedPath{Path: "a.b", Type: long})},
			want: iceberg.ErrInvalidOption, column: "v", say: "inside the other"},
		{name: "table property type", create: []iceberg.CreateOption{iceberg.TableProperties(map[string]string{
			iceberg.ShreddedPathsPropertyPrefix + "v": "a:integer"})},
			want: iceberg.ErrInvalidOption, say: iceberg.ShreddedPathsPropertyPrefix + "v"},
		{name: "partition source", schema: arrow.NewSchema(append(shredSchema.Fields(),
			arrow.Field{Name: "d", Type: &arrow.Decimal128Type{Precision: 10, Scale: 2}, Nullable: true}), nil),
			create: []iceberg.CreateOption{iceberg.PartitionBy("d")},
			opts:   []iceberg.Option{iceberg.WithShreddedPaths("v", iceberg.ShreddedPath{Path: "a", Type: long})},
			want:   iceberg.ErrNotSupported, column: "d", say: "partition source of type decimal(10, 2)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cat := tabletest.TempCatalog(t)
			create := append([]iceberg.CreateOption{iceberg.FormatVersion(3)}, c.create...)
			sc := shredSchema
			if c.schema != nil {
				sc = c.schema
			}
			w, err := iceberg.NewWriter(context.Background(), cat, table.Identifier{"db", "refused"},
				append([]iceberg.Option{iceberg.WithCreate(sc, create...)}, c.opts...)...)
			if err == nil {
				_ = w.Close(context.Background())
				t.Fatal("NewWriter accepted it")
			}
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.say) {
				t.Fatalf("error %q, want %v saying %q", err, c.want, c.say)
			}
			var ce *iceberg.ColumnError
			if c.column != "" && (!errors.As(err, &ce) || ce.Column != c.column) {
				t.Fatalf("error %q: want a *ColumnError naming column %s", err, c.column)
			}
		})
	}
}
