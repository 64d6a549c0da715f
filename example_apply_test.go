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

// Apply a change stream in stream order: Debezium's ops (c, u, d, r), an update that changes the key (its
// before-image key column before_id), and a version column (lsn) that makes a replay skip what it already
// applied.
func ExampleWriter_Apply() {
	ctx := context.Background()
	cat, cleanup := exampleCatalog()
	defer cleanup()

	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	ident := table.Identifier{"shop", "customers"}
	w, err := iceberg.NewWriter(ctx, cat, ident,
		iceberg.WithCreate(schema, iceberg.IdentifierFields("id")),
		iceberg.WithChangeColumns(iceberg.ChangeColumns{Op: "op", Version: "lsn"})) // and BeforePrefix "before_"
	if err != nil {
		panic(err)
	}
	changes := arrow.NewSchema([]arrow.Field{
		{Name: "op", Type: arrow.BinaryTypes.String},
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "before_id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "lsn", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, changes)
	defer b.Release()
	b.Field(0).(*array.StringBuilder).AppendValues([]string{"c", "c", "u", "d", "r"}, nil)
	b.Field(1).(*array.Int64Builder).AppendValues([]int64{1, 2, 20, 1, 3}, nil)
	b.Field(2).(*array.StringBuilder).AppendValues([]string{"ada", "grace", "grace h.", "", "alan"}, []bool{true, true, true, false, true})
	b.Field(3).(*array.Int64Builder).AppendValues([]int64{0, 0, 2, 0, 0}, []bool{false, false, true, false, false})
	b.Field(4).(*array.Int64Builder).AppendValues([]int64{10, 11, 12, 13, 14}, nil)
	rec := b.NewRecordBatch()
	defer rec.Release()
	// Insert 1 and 2, move 2 to 20, delete 1, and read 3 (a snapshot row).
	if err := w.Apply(ctx, rec); err != nil {
		panic(err)
	}
	// The same changes again, as a source replays them after a failure: every one is older than its key's
	// version, or the same change again.
	if err := w.Apply(ctx, rec); err != nil {
		panic(err)
	}
	if err := w.Close(ctx); err != nil {
		panic(err)
	}
	fmt.Println("rows:", exampleCount(cat, ident), "changes skipped:", w.Stats().ChangesSkipped)
	// Output: rows: 2 changes skipped: 2
}
