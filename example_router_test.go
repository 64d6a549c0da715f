package iceberg_test

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/table"

	iceberg "github.com/icewriter/iceberg"
)

// Route the rows of a change stream to one table per source table: each table is created on first sight from
// the first record's schema, keyed as the config says, and all tables share one memory budget.
func ExampleRouter() {
	ctx := context.Background()
	cat, cleanup := exampleCatalog()
	defer cleanup()

	r, err := iceberg.NewRouter(cat,
		// A round commits every table with rows at each flush interval (1 s by default), sooner when the memory
		// limit fills, and at Close; an interval longer than the example keeps its output the same on a slow
		// machine: one commit a table.
		iceberg.WithWriterOptions(iceberg.WithMemoryLimit(64<<20), iceberg.WithFlushInterval(time.Minute)),
		iceberg.WithTableConfig(func(_ context.Context, ident table.Identifier, _ *arrow.Schema) (iceberg.TableConfig, error) {
			return iceberg.TableConfig{Create: []iceberg.CreateOption{iceberg.IdentifierFields("id")}}, nil
		}))
	if err != nil {
		panic(err)
	}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	rows := func(ids []int64, names []string) arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		defer b.Release()
		b.Field(0).(*array.Int64Builder).AppendValues(ids, nil)
		b.Field(1).(*array.StringBuilder).AppendValues(names, nil)
		return b.NewRecordBatch()
	}
	customers, orders := table.Identifier{"shop", "customers"}, table.Identifier{"shop", "orders"}
	calls := []struct {
		call  func(context.Context, table.Identifier, arrow.RecordBatch) error
		ident table.Identifier
		rec   arrow.RecordBatch
	}{
		{r.Write, customers, rows([]int64{1, 2}, []string{"ada", "grace"})},
		{r.Write, orders, rows([]int64{10, 11, 12}, []string{"book", "lamp", "desk"})},
		{r.Upsert, customers, rows([]int64{2}, []string{"grace hopper"})}, // replaces id 2
	}
	for _, c := range calls {
		if err := c.call(ctx, c.ident, c.rec); err != nil {
			panic(err)
		}
		c.rec.Release()
	}
	if err := r.Close(ctx); err != nil {
		panic(err)
	}
	for _, ts := range r.Stats().Tables {
		fmt.Printf("%v: %d rows in the table, %d commits\n", ts.Table, exampleCount(cat, ts.Table), ts.Stats.Commits)
	}
	// Output:
	// [shop customers]: 2 rows in the table, 1 commits
	// [shop orders]: 3 rows in the table, 1 commits
}
