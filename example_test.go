package iceberg_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/catalog"
)

// exampleCatalog opens an embedded catalog in a temporary folder.
func exampleCatalog() (icecatalog.Catalog, func()) {
	dir, _ := os.MkdirTemp("", "icewriter-example")
	cat, err := catalog.Open(context.Background(), "sqlite://"+filepath.Join(dir, "catalog.db"))
	if err != nil {
		panic(err)
	}
	return cat, func() { cat.(icecatalog.Closer).Close(); os.RemoveAll(dir) }
}

func exampleCount(cat icecatalog.Catalog, ident table.Identifier) int64 {
	tbl, err := cat.LoadTable(context.Background(), ident)
	if err != nil {
		panic(err)
	}
	_, recs, err := tbl.Scan().ToArrowRecords(context.Background())
	if err != nil {
		panic(err)
	}
	var n int64
	for r, err := range recs {
		if err != nil {
			panic(err)
		}
		n += r.NumRows()
		r.Release()
	}
	return n
}

// Write Arrow batches into a table the writer creates, then read it back.
func ExampleNewWriter() {
	ctx := context.Background()
	cat, cleanup := exampleCatalog()
	defer cleanup()

	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	ident := table.Identifier{"shop", "customers"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(schema))
	if err != nil {
		panic(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2, 3}, nil)
	b.Field(1).(*array.StringBuilder).AppendValues([]string{"ada", "grace", "alan"}, nil)
	rec := b.NewRecordBatch()
	if err := w.Write(ctx, rec); err != nil { // Write copies the rows: rec may be released right away
		panic(err)
	}
	rec.Release()
	if err := w.Close(ctx); err != nil { // commits what is buffered
		panic(err)
	}
	fmt.Println("rows:", exampleCount(cat, ident), "commits:", w.Stats().Commits)
	// Output: rows: 3 commits: 1
}

// Upsert and delete by key (merge-on-read on a format-v2 table: equality deletes next to the data; on v3,
// deletion vectors on the files that hold the keys).
func ExampleWriter_Upsert() {
	ctx := context.Background()
	cat, cleanup := exampleCatalog()
	defer cleanup()

	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "balance", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	rows := func(ids, balances []int64) arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		defer b.Release()
		b.Field(0).(*array.Int64Builder).AppendValues(ids, nil)
		b.Field(1).(*array.Int64Builder).AppendValues(balances, nil)
		return b.NewRecordBatch()
	}
	ident := table.Identifier{"bank", "accounts"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(schema, iceberg.IdentifierFields("id")))
	if err != nil {
		panic(err)
	}
	_ = w.Upsert(ctx, rows([]int64{1, 2, 3}, []int64{100, 200, 300}))
	_ = w.Upsert(ctx, rows([]int64{2}, []int64{250})) // replaces id 2
	_ = w.Delete(ctx, rows([]int64{3}, []int64{0}))   // only the key column is read
	if err := w.Close(ctx); err != nil {
		panic(err)
	}
	fmt.Println("rows:", exampleCount(cat, ident))
	// Output: rows: 2
}

// Go structs map onto columns by the iceberg tag, else the json tag, else the field name in snake_case.
func ExampleWriteStructs() {
	ctx := context.Background()
	cat, cleanup := exampleCatalog()
	defer cleanup()

	type Order struct {
		ID       int64     `iceberg:"id,required"`
		Customer string    // column "customer"
		Total    float64   `json:"total"`
		PlacedAt time.Time // column "placed_at", timestamp with zone
	}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "customer", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "total", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "placed_at", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
	}, nil)
	ident := table.Identifier{"shop", "orders"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(schema))
	if err != nil {
		panic(err)
	}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	if err := iceberg.WriteStructs(ctx, w, []Order{{1, "ada", 9.5, now}, {2, "alan", 12, now}}); err != nil {
		panic(err)
	}
	if err := w.Close(ctx); err != nil {
		panic(err)
	}
	fmt.Println("rows:", exampleCount(cat, ident))
	// Output: rows: 2
}

// Exactly-once from a source with offsets: commit only checkpointed rows and resume from the last token.
func ExampleWriter_Checkpoint() {
	ctx := context.Background()
	cat, cleanup := exampleCatalog()
	defer cleanup()

	schema := arrow.NewSchema([]arrow.Field{{Name: "offset", Type: arrow.PrimitiveTypes.Int64}}, nil)
	ident := table.Identifier{"kafka", "events"}
	open := func() *iceberg.Writer {
		w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(schema),
			iceberg.WithWriterID("events-partition-0"), iceberg.WithCheckpoints())
		if err != nil {
			panic(err)
		}
		return w
	}
	w := open()
	for offset := int64(0); offset < 10; offset++ {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		b.Field(0).(*array.Int64Builder).Append(offset)
		rec := b.NewRecordBatch()
		_ = w.Write(ctx, rec)
		rec.Release()
		if offset == 6 {
			_ = w.Checkpoint(ctx, "next=7")
		}
	}
	_ = w.Close(ctx) // commits up to the checkpoint; offsets 7..9 are discarded

	w = open() // a restart: same writer ID
	token, _, _ := w.LastCheckpoint(ctx)
	fmt.Println("resume from", token, "rows:", exampleCount(cat, ident))
	_ = w.Close(ctx)
	// Output: resume from next=7 rows: 7
}
