package iceberg_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/catalog"
)

// ColumnDefault gives a column of a created format version 3 table a default: rows written without the column
// read it back.
func ExampleColumnDefault() {
	ctx := context.Background()
	cat, done, err := ordersCatalog(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer done()
	ident := table.Identifier{"app", "orders"}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "status", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(schema, iceberg.FormatVersion(3),
		iceberg.ColumnDefault("status", ice.NewLiteral("new"))))
	if err != nil {
		fmt.Println(err)
		return
	}
	rec := idsBatch(1, 2) // without the status column
	defer rec.Release()
	if err := w.Write(ctx, rec); err != nil {
		fmt.Println(err)
		return
	}
	if err := w.Close(ctx); err != nil {
		fmt.Println(err)
		return
	}

	printStatus(ctx, cat, ident)
	// Output:
	// id=1 status=new
	// id=2 status=new
}

// WithColumnDefaults gives a column that schema evolution adds a default (format version 3): the rows written
// before the column existed and those written later without it read it back.
func ExampleWithColumnDefaults() {
	ctx := context.Background()
	cat, done, err := ordersCatalog(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer done()
	ident := table.Identifier{"app", "orders"}
	idOnly := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(idOnly, iceberg.FormatVersion(3)),
		iceberg.WithSchemaEvolution(), iceberg.WithColumnDefaults(map[string]ice.Literal{"status": ice.NewLiteral("new")}))
	if err != nil {
		fmt.Println(err)
		return
	}
	write := func(rec arrow.RecordBatch) {
		defer rec.Release()
		if err := w.Write(ctx, rec); err != nil {
			fmt.Println(err)
		}
	}
	write(idsBatch(1))
	_ = w.Flush(ctx) // id 1 is committed before the column exists
	b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema([]arrow.Field{idOnly.Field(0),
		{Name: "status", Type: arrow.BinaryTypes.String, Nullable: true}}, nil))
	defer b.Release()
	b.Field(0).(*array.Int64Builder).Append(2)
	b.Field(1).(*array.StringBuilder).Append("paid")
	write(b.NewRecordBatch()) // adds the column with its default
	write(idsBatch(3))        // without the column
	if err := w.Close(ctx); err != nil {
		fmt.Println(err)
		return
	}
	printStatus(ctx, cat, ident)
	// Output:
	// id=1 status=new
	// id=2 status=paid
	// id=3 status=new
}

// idsBatch is a batch of one id column.
func idsBatch(ids ...int64) arrow.RecordBatch {
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	b.AppendValues(ids, nil)
	col := b.NewArray()
	defer col.Release()
	return array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil), []arrow.Array{col}, int64(len(ids)))
}

// printStatus prints the table's id and status columns, a line per row, sorted.
func printStatus(ctx context.Context, cat icecatalog.Catalog, ident table.Identifier) {
	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, it, err := tbl.Scan(table.WithSelectedFields("id", "status")).ToArrowRecords(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	var lines []string
	for rec, err := range it {
		if err != nil {
			fmt.Println(err)
			return
		}
		for r := 0; r < int(rec.NumRows()); r++ {
			lines = append(lines, fmt.Sprintf("id=%s status=%s", rec.Column(0).ValueStr(r), rec.Column(1).ValueStr(r)))
		}
		rec.Release()
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
}

// ordersCatalog opens an embedded catalog in a temporary folder, which done removes.
func ordersCatalog(ctx context.Context) (icecatalog.Catalog, func(), error) {
	dir, err := os.MkdirTemp("", "defaults-example")
	if err != nil {
		return nil, nil, err
	}
	cat, err := catalog.Open(ctx, "sqlite://"+filepath.Join(dir, "catalog.db"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return cat, func() { os.RemoveAll(dir) }, nil
}
