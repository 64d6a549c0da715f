package iceberg_test

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
)

// Find the files a writer uploaded and never committed (as a process killed between the two leaves them), first
// in a dry run; then remove those older than the safety window.
func ExampleRemoveOrphanFiles() {
	ctx := context.Background()
	cat, cleanup := exampleCatalog()
	defer cleanup()

	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	rows := func(ids ...int64) arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		defer b.Release()
		b.Field(0).(*array.Int64Builder).AppendValues(ids, nil)
		return b.NewRecordBatch()
	}
	ident := table.Identifier{"shop", "orders"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(schema))
	if err != nil {
		panic(err)
	}
	rec := rows(1, 2, 3)
	if err := w.Write(ctx, rec); err != nil {
		panic(err)
	}
	rec.Release()
	if err := w.Close(ctx); err != nil {
		panic(err)
	}
	// A file uploaded and never committed.
	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		panic(err)
	}
	recs := func(yield func(arrow.RecordBatch, error) bool) { yield(rows(4), nil) }
	for _, err := range table.WriteRecords(ctx, tbl, schema, recs) {
		if err != nil {
			panic(err)
		}
	}

	// Nothing writes to the table now: a window of zero finds the file at once, without deleting it.
	report, err := iceberg.RemoveOrphanFiles(ctx, cat, ident, iceberg.OrphanOlderThan(0), iceberg.OrphanDryRun())
	if err != nil {
		panic(err)
	}
	fmt.Printf("dry run: %d orphan among %d files, %d deleted\n", len(report.Orphans), report.Listed, len(report.Deleted))
	// With the default window (24 hours) a file this young may be a commit in progress: it is left alone.
	report, err = iceberg.RemoveOrphanFiles(ctx, cat, ident)
	if err != nil {
		panic(err)
	}
	fmt.Printf("default window: %d deleted, %d too recent to judge\n", len(report.Deleted), report.Recent)
	// Output:
	// dry run: 1 orphan among 2 files, 0 deleted
	// default window: 0 deleted, 2 too recent to judge
}
