package encode

import (
	"context"
	"fmt"
	"iter"
	"path/filepath"
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
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// What iceberg-go v0.7.0 does with shredded variants (issue 32, shredding of chosen paths), pinned so an upgrade
// that changes it shows:
//   - WriteRecords does not keep a shredded layout it is given: it unshreds the column (table/arrow_utils.go,
//     arrowProjectionVisitor.Variant) and infers each file's layout from its first rows
//     (write.parquet.variant-inference-buffer-size, default 100; table/rolling_data_writer.go flushBootstrap and
//     inferShreddingFromBatches). An integer path is typed by the widest integer of those rows, so larger values
//     after them go to the residual and the file gets no bound on the path.
//   - With the inference buffer at least the file's rows, the path is typed by the widest value of the file.
//   - A file written by pqarrow with a shredded variant type (extensions.NewShreddedVariantType) keeps that
//     layout, and table.FileToDataFile reads the spec's variant bounds from its footer: scans prune on the path,
//     and the scanner reads the rows back.

// factRows are the tests' rows: a file's rows hold $.a = 0..99 and then 1,000,100..1,000,299.
const factRows = 300

// factA is $.a of row i.
func factA(i int64) int64 {
	if i < 100 {
		return i
	}
	return 1_000_000 + i
}

// factTable creates a format-version-3 table (id long, v variant) that shreds its variants.
func factTable(t *testing.T) *table.Table {
	t.Helper()
	ctx := context.Background()
	cat := tabletest.OpenCatalog(t, filepath.Join(t.TempDir(), "catalog.db"))
	if err := cat.CreateNamespace(ctx, table.Identifier{"db"}, nil); err != nil {
		t.Fatal(err)
	}
	sc := ice.NewSchema(0,
		ice.NestedField{ID: 1, Name: "id", Type: ice.PrimitiveTypes.Int64, Required: true},
		ice.NestedField{ID: 2, Name: "v", Type: ice.VariantType{}})
	tbl, err := cat.CreateTable(ctx, table.Identifier{"db", "facts"}, sc, icecatalog.WithProperties(ice.Properties{
		"format-version": "3", table.ParquetShredVariantsKey: "true"}))
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// factSchema is tbl's Arrow schema with field ids; with shred, v is shredded as {a: int64}.
func factSchema(t *testing.T, tbl *table.Table, shred bool) *arrow.Schema {
	t.Helper()
	sc, err := table.SchemaToArrowSchemaWithOptions(tbl.Schema(), table.ArrowSchemaOptions{IncludeFieldIDs: true})
	if err != nil {
		t.Fatal(err)
	}
	if !shred {
		return sc
	}
	fields := sc.Fields()
	fields[1].Type = extensions.NewShreddedVariantType(arrow.StructOf(
		arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true}))
	return arrow.NewSchema(fields, nil)
}

// factDoc is row i's variant.
func factDoc(i int64) string { return fmt.Sprintf(`{"a": %d, "s": "row %d"}`, factA(i), i) }

// factRecord is the factRows rows in schema sc (its variant builder shreds when sc's v is shredded).
func factRecord(t *testing.T, sc *arrow.Schema) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(memory.NewGoAllocator(), sc)
	defer b.Release()
	for i := range int64(factRows) {
		b.Field(0).(*array.Int64Builder).Append(i)
		v, err := variant.ParseJSON(factDoc(i), false)
		if err != nil {
			t.Fatal(err)
		}
		b.Field(1).(*extensions.VariantBuilder).Append(v)
	}
	return b.NewRecordBatch()
}

// factWrite writes rec through iceberg-go's WriteRecords into write (tbl, or a copy with other properties) and
// commits the files to tbl in a row delta; it returns the table committed and the files' storage of v.
func factWrite(t *testing.T, tbl, write *table.Table, sc *arrow.Schema, rec arrow.RecordBatch) (*table.Table, []string) {
	t.Helper()
	ctx := context.Background()
	files, err := collectFiles(table.WriteRecords(ctx, write, sc,
		iter.Seq2[arrow.RecordBatch, error](func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) })))
	if err != nil {
		t.Fatal(err)
	}
	return factCommit(t, tbl, files...)
}

// factCommit commits files to tbl in a row delta (a v3 table's fast append rejects them) and returns the table
// and the files' storage of v.
func factCommit(t *testing.T, tbl *table.Table, files ...ice.DataFile) (*table.Table, []string) {
	t.Helper()
	ctx := context.Background()
	tx := tbl.NewTransaction()
	if err := tx.NewRowDelta(nil).AddRows(files...).Commit(ctx); err != nil {
		t.Fatal(err)
	}
	out, err := tx.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fsys, err := out.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var storage []string
	for _, df := range files {
		storage = append(storage, factStorage(t, fsys, df.FilePath()))
	}
	return out, storage
}

// factStorage is the Arrow storage type of column v as the Parquet file at path holds it.
func factStorage(t *testing.T, fsys iceio.IO, path string) string {
	t.Helper()
	f, err := fsys.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := file.NewParquetReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	fr, err := pqarrow.NewFileReader(r, pqarrow.ArrowReadProperties{}, memory.NewGoAllocator())
	if err != nil {
		t.Fatal(err)
	}
	sc, err := fr.Schema()
	if err != nil {
		t.Fatal(err)
	}
	return sc.Field(1).Type.(*extensions.VariantType).StorageType().String()
}

// factPlanned is how many data files a scan of tbl with the filter plans.
func factPlanned(t *testing.T, tbl *table.Table, filter ice.BooleanExpression) int {
	t.Helper()
	tasks, err := tbl.Scan(table.WithRowFilter(filter)).PlanFiles(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return len(tasks)
}

// factTerm is the filters' term, $.a as a long.
var factTerm = ice.Extract(ice.Reference("v"), "$.a", ice.PrimitiveTypes.Int64)

// TestShredFactsWriteRecordsInfers: a record whose variant column is already shredded ({a: int64}) is written
// by WriteRecords in the layout it infers from the file's first 100 rows ($.a int8, $.s string): the larger
// values after them go to the residual, the file has no bound on $.a, and a filter above every value reads it.
func TestShredFactsWriteRecordsInfers(t *testing.T) {
	tbl := factTable(t)
	sc := factSchema(t, tbl, true)
	tbl, storage := factWrite(t, tbl, tbl, sc, factRecord(t, sc))
	if want := "a: struct<value: binary nullable, typed_value: int8 nullable>"; !strings.Contains(storage[0], want) {
		t.Fatalf("v is stored as %s, want $.a inferred as int8 (%s)", storage[0], want)
	}
	if n := factPlanned(t, tbl, ice.GreaterThan(factTerm, int64(2_000_000))); n != 1 {
		t.Fatalf("a filter above every $.a plans %d files, want 1 (the file has no bound on $.a)", n)
	}
}

// TestShredFactsInferenceBuffer: with write.parquet.variant-inference-buffer-size at least the file's rows, the
// inference sees them all and types $.a int32 (the widest value's width): the file has a bound on $.a and the
// filter above every value plans no file.
func TestShredFactsInferenceBuffer(t *testing.T) {
	tbl := factTable(t)
	write, err := WithWriteProperties(tbl, ice.Properties{table.ParquetVariantBufferSizeKey: "1000"})
	if err != nil {
		t.Fatal(err)
	}
	sc := factSchema(t, tbl, false)
	tbl, storage := factWrite(t, tbl, write, sc, factRecord(t, sc))
	if want := "a: struct<value: binary nullable, typed_value: int32 nullable>"; !strings.Contains(storage[0], want) {
		t.Fatalf("v is stored as %s, want $.a inferred as int32 (%s)", storage[0], want)
	}
	if n := factPlanned(t, tbl, ice.GreaterThan(factTerm, int64(2_000_000))); n != 0 {
		t.Fatalf("a filter above every $.a plans %d files, want 0", n)
	}
}

// TestShredFactsPqarrowFileToDataFile: a file written by pqarrow with v shredded as {a: int64} keeps that layout
// ($.s in the residual); table.FileToDataFile gives it variant bounds on $.a, so a filter above every value plans
// no file and one inside the bounds plans it; the scanner reads every row back.
func TestShredFactsPqarrowFileToDataFile(t *testing.T) {
	ctx := context.Background()
	tbl := factTable(t)
	sc := factSchema(t, tbl, true)
	fsys, err := tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lp, err := tbl.LocationProvider()
	if err != nil {
		t.Fatal(err)
	}
	path := lp.NewDataLocation("facts.parquet")
	out, err := fsys.(iceio.WriteFileIO).Create(path)
	if err != nil {
		t.Fatal(err)
	}
	fw, err := pqarrow.NewFileWriter(sc, out, nil, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		t.Fatal(err)
	}
	rec := factRecord(t, sc)
	if err := fw.Write(rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	df, err := table.FileToDataFile(ctx, fsys, path, tbl.Schema(), tbl.Spec(), 0, tbl.Properties())
	if err != nil {
		t.Fatal(err)
	}
	if len(df.LowerBoundValues()[2]) == 0 || len(df.UpperBoundValues()[2]) == 0 {
		t.Fatal("no variant bounds on v")
	}
	tbl, storage := factCommit(t, tbl, df)
	if want := "typed_value: struct<a: struct<value: binary nullable, typed_value: int64 nullable>> nullable"; !strings.Contains(storage[0], want) {
		t.Fatalf("v is stored as %s, want %s", storage[0], want)
	}
	if n := factPlanned(t, tbl, ice.GreaterThan(factTerm, int64(2_000_000))); n != 0 {
		t.Fatalf("a filter above every $.a plans %d files, want 0", n)
	}
	if n := factPlanned(t, tbl, ice.EqualTo(factTerm, int64(1_000_150))); n != 1 {
		t.Fatalf("a filter on a value written plans %d files, want 1", n)
	}
	_, recs := tabletest.Records(t, tbl)
	read := 0
	for r := range recs {
		ids := r.Column(tabletest.Column(t, r.Schema(), "id")).(*array.Int64)
		vs := r.Column(tabletest.Column(t, r.Schema(), "v"))
		for i := range ids.Len() {
			got := tabletest.Variant(t, vs, i)
			if want := tabletest.JSONValue(t, []byte(factDoc(ids.Value(i)))); !reflect.DeepEqual(got, want) {
				t.Fatalf("id %d: read %v, wrote %v", ids.Value(i), got, want)
			}
			read++
		}
	}
	if read != factRows {
		t.Fatalf("read %d rows, wrote %d", read, factRows)
	}
}
