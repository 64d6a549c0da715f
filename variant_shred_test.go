package iceberg_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
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

// Shredded variants: with the table property write.parquet.shred-variants on, every data file this library
// writes stores its variant column shredded (the paths iceberg-go infers from the file's first rows), with the
// spec's variant bounds in the file's metrics, so a scan filtering on a path reads only the files whose bounds
// admit it; the variants read back exactly.

// shredSchema is an id and a variant column.
var shredSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "v", Type: extensions.NewDefaultVariantType(), Nullable: true},
}, nil)

// shredProps turns shredding on for a created table.
var shredProps = iceberg.TableProperties(map[string]string{table.ParquetShredVariantsKey: "true"})

// shredDoc is row id's variant: an object whose path $.a is id (the path the tests filter on), $.s a string,
// every seventh row a nested array of mixed elements (left in the residual), every eleventh the variant null;
// every thirteenth row is SQL null.
func shredDoc(id int64) (string, bool) {
	switch {
	case id%13 == 0:
		return "", false
	case id%11 == 0:
		return "null", true
	case id%7 == 0:
		return fmt.Sprintf(`{"a": %d, "s": "row %d", "x": {"list": [1, "two", 3.5, null, {"deep": true}]}}`, id, id), true
	}
	return fmt.Sprintf(`{"a": %d, "s": "row %d"}`, id, id), true
}

// shredBatch makes shredSchema rows for ids lo..hi-1 with shredDoc's variants.
func shredBatch(t testing.TB, lo, hi int64) arrow.RecordBatch {
	t.Helper()
	return variantBatch(t, lo, hi, shredDoc)
}

// variantBatch makes shredSchema rows for ids lo..hi-1, each id's variant parsed from doc(id) (SQL null where
// doc returns false).
func variantBatch(t testing.TB, lo, hi int64, doc func(id int64) (string, bool)) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(memory.NewGoAllocator(), shredSchema)
	defer b.Release()
	vb := b.Field(1).(*extensions.VariantBuilder)
	for id := lo; id < hi; id++ {
		b.Field(0).(*array.Int64Builder).Append(id)
		js, ok := doc(id)
		if !ok {
			vb.AppendNull()
			continue
		}
		v, err := variant.ParseJSON(js, false)
		if err != nil {
			t.Fatal(err)
		}
		vb.Append(v)
	}
	return b.NewRecordBatch()
}

// shredRead reads the table with the row filter (nil: every row) and returns its variants by id as JSON ("" for
// SQL null), checking each against the value written: same types and values, not only the same JSON.
func shredRead(t *testing.T, tbl *table.Table, filter ice.BooleanExpression) map[int64]string {
	t.Helper()
	var opts []table.ScanOption
	if filter != nil {
		opts = append(opts, table.WithRowFilter(filter))
	}
	got := map[int64]string{}
	_, recs := tabletest.Records(t, tbl, opts...)
	for rec := range recs {
		ids := rec.Column(tabletest.Column(t, rec.Schema(), "id")).(*array.Int64)
		vs := rec.Column(tabletest.Column(t, rec.Schema(), "v")).(*extensions.VariantArray)
		for i := range ids.Len() {
			id := ids.Value(i)
			doc, ok := shredDoc(id)
			if vs.Storage().IsNull(i) { // SQL null (VariantArray.IsNull is true for the variant null too)
				if ok {
					t.Fatalf("id %d: read SQL null, wrote %s", id, doc)
				}
				got[id] = ""
				continue
			}
			v, err := vs.Value(i)
			if err != nil {
				t.Fatalf("id %d: %v", id, err)
			}
			want, err := variant.ParseJSON(doc, false)
			if err != nil || !ok {
				t.Fatalf("id %d: read %v, wrote SQL null", id, v)
			}
			if !sameVariant(v, want) {
				t.Fatalf("id %d: read %v, wrote %v", id, v, want)
			}
			got[id] = doc
		}
	}
	return got
}

// sameVariant reports whether two variants are equal in type and value, objects field by field.
func sameVariant(a, b variant.Value) bool {
	if a.Type() != b.Type() {
		return false
	}
	switch a.Type() {
	case variant.Object:
		ao, bo := a.Value().(variant.ObjectValue), b.Value().(variant.ObjectValue)
		if ao.NumElements() != bo.NumElements() {
			return false
		}
		for name, av := range ao.Values() {
			bf, err := bo.ValueByKey(name)
			if err != nil || !sameVariant(av, bf.Value) {
				return false
			}
		}
		return true
	case variant.Array:
		aa, ba := a.Value().(variant.ArrayValue), b.Value().(variant.ArrayValue)
		if aa.Len() != ba.Len() {
			return false
		}
		for i := range aa.Len() {
			ae, err1 := aa.Value(i)
			be, err2 := ba.Value(i)
			if err1 != nil || err2 != nil || !sameVariant(ae, be) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a.Value(), b.Value())
}

// shredModel is the rows of ids lo..hi-1 whose $.a the predicate admits, as shredRead returns them.
func shredModel(lo, hi int64, admit func(a int64) bool) map[int64]string {
	out := map[int64]string{}
	for id := lo; id < hi; id++ {
		doc, ok := shredDoc(id)
		if admit == nil || (ok && doc != "null" && admit(id)) {
			out[id] = doc
		}
	}
	return out
}

// The tables of these tests: shredFiles files of shredPer ids each (0-99, 100-199, ...).
const shredFiles, shredPer = 4, 100

// fillShredded writes the tests' ids through write, a file's ids each time, each followed by flush.
func fillShredded(t *testing.T, write func(context.Context, arrow.RecordBatch) error, flush func(context.Context) error) {
	t.Helper()
	ctx := context.Background()
	for lo := int64(0); lo < shredFiles*shredPer; lo += shredPer {
		rec := shredBatch(t, lo, lo+shredPer)
		must(t, write(ctx, rec))
		rec.Release()
		must(t, flush(ctx))
	}
}

// shredWriter opens a writer on a v3 table with shredding on that it creates (create: more options for it), with
// no flush interval and no small-file compaction.
func shredWriter(t *testing.T, cat icecatalog.Catalog, ident table.Identifier, create []iceberg.CreateOption, opts ...iceberg.Option) *iceberg.Writer {
	t.Helper()
	create = append([]iceberg.CreateOption{iceberg.FormatVersion(3), shredProps}, create...)
	w, err := iceberg.NewWriter(context.Background(), cat, ident, append([]iceberg.Option{
		iceberg.WithCreate(shredSchema, create...), iceberg.WithFlushInterval(0),
		iceberg.WithSmallFileCompactionEvery(0)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	return w
}

// shreddedFiles checks that every live data file of tbl holds variant bounds on v (what a shredded file has and
// an unshredded one lacks) and returns the files' paths.
func shreddedFiles(t *testing.T, tbl *table.Table) []string {
	t.Helper()
	fld, ok := tbl.Schema().FindFieldByName("v")
	if !ok {
		t.Fatal("no column v")
	}
	var paths []string
	for _, task := range tabletest.LiveDataFiles(t, tbl) {
		df := task.File
		if len(df.LowerBoundValues()[fld.ID]) == 0 || len(df.UpperBoundValues()[fld.ID]) == 0 {
			t.Fatalf("data file %s has no variant bounds on v: not shredded", df.FilePath())
		}
		paths = append(paths, df.FilePath())
	}
	slices.Sort(paths)
	return paths
}

// shredCases are the filters on $.a the tests scan with, with the rows they admit; on a table of files of 100
// ids each (0-99, 100-199, ...) their bounds admit files[i] of them.
func shredCases() []struct {
	name   string
	filter ice.BooleanExpression
	admit  func(int64) bool
} {
	a := ice.Extract(ice.Reference("v"), "$.a", ice.PrimitiveTypes.Int64)
	return []struct {
		name   string
		filter ice.BooleanExpression
		admit  func(int64) bool
	}{
		{"equal", ice.EqualTo(a, int64(150)), func(x int64) bool { return x == 150 }},
		{"range", ice.GreaterThanEqual(a, int64(250)), func(x int64) bool { return x >= 250 }},
		{"between", ice.NewAnd(ice.GreaterThanEqual(a, int64(90)), ice.LessThan(a, int64(110))),
			func(x int64) bool { return x >= 90 && x < 110 }},
		{"none", ice.EqualTo(a, int64(10_000)), func(int64) bool { return false }},
	}
}

// assertPrunes scans tbl (ids lo..hi-1 written, less the deleted) with each of shredCases' filters: the scan
// reads the data files at most files[i] times (reads counts them), returns the model's rows, and every variant
// reads back exactly; so does a scan without a filter.
func assertPrunes(t *testing.T, tbl *table.Table, reads func() int64, lo, hi int64, deleted func(int64) bool, files ...int64) {
	t.Helper()
	live := len(shreddedFiles(t, tbl))
	model := func(admit func(int64) bool) map[int64]string {
		m := shredModel(lo, hi, admit)
		for id := range m {
			if deleted != nil && deleted(id) {
				delete(m, id)
			}
		}
		return m
	}
	for i, c := range shredCases() {
		t.Run(c.name, func(t *testing.T) {
			before := reads()
			got := shredRead(t, tbl, c.filter)
			if n := reads() - before; n > files[i] {
				t.Errorf("the scan read data files %d times, want at most %d (the files whose bounds admit it)", n, files[i])
			} else {
				t.Logf("filter %v: %d of %d data files read", c.filter, n, live)
			}
			if want := model(c.admit); !reflect.DeepEqual(got, want) {
				t.Errorf("read %d rows, want %d: %v", len(got), len(want), got)
			}
		})
	}
	if got, want := shredRead(t, tbl, nil), model(nil); !reflect.DeepEqual(got, want) {
		t.Fatalf("read %d rows, want %d", len(got), len(want))
	}
}

// TestShreddedVariantPrunes writes $.a in disjoint ranges, a file per range, and filters on $.a: the scan reads
// only the files whose bounds admit the filter, returns the model's rows, and every variant reads back exactly.
func TestShreddedVariantPrunes(t *testing.T) {
	t.Parallel() // see TestMain
	cat, reads := tabletest.CountedCatalog(t)
	ident := table.Identifier{"db", "shred"}
	w := shredWriter(t, cat, ident, nil)
	fillShredded(t, w.Write, w.Flush)
	must(t, w.Close(context.Background()))
	tbl := tabletest.Load(t, cat, ident)
	if got := len(shreddedFiles(t, tbl)); got != shredFiles {
		t.Fatalf("%d data files, want %d", got, shredFiles)
	}
	assertPrunes(t, tbl, reads, 0, shredFiles*shredPer, nil, 1, 2, 2, 0)
}

// TestShreddedVariantRouterBulk: a Router's bulk phase on a table that shreds its variants writes its files
// shredded too (a file per batch instead of bulk files kept open across batches, which pqarrow would write
// unshredded), so they prune like the writer's.
func TestShreddedVariantRouterBulk(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat, reads := tabletest.CountedCatalog(t)
	ident := table.Identifier{"db", "shred"}
	createTable(t, ctx, cat, ident, shredSchema, iceberg.FormatVersion(3), shredProps)
	r := bulkRouter(t, cat, 64<<20, iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompactionEvery(0))
	fillShredded(t, func(ctx context.Context, rec arrow.RecordBatch) error { return r.Write(ctx, ident, rec) }, r.Flush)
	must(t, r.Close(ctx))
	tbl := tabletest.Load(t, cat, ident)
	if got := len(shreddedFiles(t, tbl)); got != shredFiles {
		t.Fatalf("%d data files, want %d", got, shredFiles)
	}
	assertPrunes(t, tbl, reads, 0, shredFiles*shredPer, nil, 1, 2, 2, 0)
}

// TestShreddedVariantKeyed: the data files of keyed writes are shredded too, and still prune: a copy-on-write
// delete's rewrite, a merge-on-read upsert's new file (format v3: the upserted rows' row ids go into it) and a
// compaction's output (of a merge-on-read delete).
func TestShreddedVariantKeyed(t *testing.T) {
	t.Parallel() // see TestMain

	inRange := func(id int64) bool { return id >= 150 && id < 160 } // the ids changed, in the second file
	for _, c := range []struct {
		name            string
		mode            iceberg.Mode
		upsert, compact bool
		kept, live      int     // the live data files after, and how many of them were live before
		files           []int64 // per shredCases filter
	}{
		{"copy-on-write delete", iceberg.CopyOnWrite, false, false, 3, 4, []int64{1, 2, 2, 0}},
		{"merge-on-read upsert", iceberg.MergeOnRead, true, false, 4, 5, []int64{2, 2, 2, 0}},
		{"compaction", iceberg.MergeOnRead, false, true, 0, 1, []int64{1, 1, 1, 0}}, // it merges the four files
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			cat, reads := tabletest.CountedCatalog(t)
			ident := table.Identifier{"db", "shred"}
			w := shredWriter(t, cat, ident, []iceberg.CreateOption{iceberg.IdentifierFields("id")}, iceberg.WithMode(c.mode))
			fillShredded(t, w.Write, w.Flush)
			before := shreddedFiles(t, tabletest.Load(t, cat, ident))
			deleted := inRange
			if c.upsert {
				rec := shredBatch(t, 150, 160) // the same values: the model is unchanged
				must(t, w.Upsert(ctx, rec))
				rec.Release()
				deleted = nil
			} else {
				var del []int64
				for id := int64(150); id < 160; id++ {
					del = append(del, id)
				}
				must(t, w.Delete(ctx, keyBatch(del)))
			}
			must(t, w.Flush(ctx))
			if c.compact {
				res, err := w.Compact(ctx)
				must(t, err)
				t.Logf("compaction: %+v", res)
			}
			must(t, w.Close(ctx))
			tbl := tabletest.Load(t, cat, ident)
			after := shreddedFiles(t, tbl)
			kept := 0
			for _, p := range after {
				if slices.Contains(before, p) {
					kept++
				}
			}
			if kept != c.kept || len(after) != c.live {
				t.Fatalf("%d live data files, %d of them from before: want %d and %d", len(after), kept, c.live, c.kept)
			}
			assertPrunes(t, tbl, reads, 0, shredFiles*shredPer, deleted, c.files...)
		})
	}
}

// TestShreddedVariantFileInfersFromEveryRow: a file's shredded layout is inferred from all of its rows, not its
// first 100 (iceberg-go's default): in a file of ids 0-299, $.a is 0-99 in the first 100 rows, which an int8
// holds, and up to 299 after. Inferred from those alone, the larger values went to the file's residual and the
// file had no bound on $.a, so a filter admitting no row still read it. The file of an append, of a
// copy-on-write rewrite of it, and of a compaction of three files of 100 rows each all prune.
func TestShreddedVariantFileInfersFromEveryRow(t *testing.T) {
	t.Parallel() // see TestMain
	const rows = 300
	for _, c := range []struct {
		name     string
		mode     iceberg.Mode
		write    int64 // ids per Write and Flush
		cow      bool  // delete id 5 in copy-on-write mode: its file is rewritten
		compact  bool
		files    int // the live data files at the end
		deleted  func(int64) bool
		filesHit []int64 // per shredCases filter
	}{
		{name: "append", mode: iceberg.MergeOnRead, write: rows, files: 1, filesHit: []int64{1, 1, 1, 0}},
		{name: "copy-on-write", mode: iceberg.CopyOnWrite, write: rows, cow: true, files: 1,
			deleted: func(id int64) bool { return id == 5 }, filesHit: []int64{1, 1, 1, 0}},
		{name: "compaction", mode: iceberg.MergeOnRead, write: 100, compact: true, files: 1, filesHit: []int64{1, 1, 1, 0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			cat, reads := tabletest.CountedCatalog(t)
			ident := table.Identifier{"db", "shred"}
			w := shredWriter(t, cat, ident, []iceberg.CreateOption{iceberg.IdentifierFields("id")}, iceberg.WithMode(c.mode))
			for i := int64(0); i < rows; i += c.write {
				lo := rows - c.write - i // the files in descending ids: a compaction reads the newest first
				rec := shredBatch(t, lo, lo+c.write)
				must(t, w.Write(ctx, rec))
				rec.Release()
				must(t, w.Flush(ctx))
			}
			if c.cow {
				must(t, w.Delete(ctx, keyBatch([]int64{5})))
				must(t, w.Flush(ctx))
			}
			if c.compact {
				res, err := w.Compact(ctx)
				must(t, err)
				if res.RewrittenDataFiles != 3 {
					t.Fatalf("compaction: %+v, want the 3 files rewritten", res)
				}
			}
			must(t, w.Close(ctx))
			tbl := tabletest.Load(t, cat, ident)
			if got := len(shreddedFiles(t, tbl)); got != c.files {
				t.Fatalf("%d data files, want %d", got, c.files)
			}
			assertPrunes(t, tbl, reads, 0, rows, c.deleted, c.filesHit...)
		})
	}
}
