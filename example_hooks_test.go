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

// commitPrinter is a hook of two kinds: it implements HookBatchSealed and HookCommitted, and hears of nothing
// else.
type commitPrinter struct{}

func (commitPrinter) OnBatchSealed(b iceberg.BatchSealed) {
	fmt.Printf("batch %d sealed: %d rows\n", b.Seq, b.Rows)
}

func (commitPrinter) OnCommitted(ci iceberg.CommitInfo) {
	fmt.Printf("commit of batches %d..%d: %d rows in %d file after %d attempt\n", ci.FirstSeq, ci.LastSeq, ci.Rows,
		ci.Files, ci.Attempts) // ci.Duration and ci.CommitTime say how long it took and when
}

// Hear what the writer does: hooks are called in order, outside the writer's locks (the OpenTelemetry plugin,
// module github.com/icewriter/iceberg/otel, is a hook of every kind).
func ExampleWithHooks() {
	ctx := context.Background()
	cat, cleanup := exampleCatalog()
	defer cleanup()

	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	w, err := iceberg.NewWriter(ctx, cat, table.Identifier{"shop", "orders"}, iceberg.WithCreate(schema),
		iceberg.WithHooks(commitPrinter{}))
	if err != nil {
		panic(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2, 3}, nil)
	rec := b.NewRecordBatch()
	if err := w.Write(ctx, rec); err != nil {
		panic(err)
	}
	rec.Release()
	if err := w.Close(ctx); err != nil { // returns once the hooks have heard of every commit
		panic(err)
	}
	// Output:
	// batch 1 sealed: 3 rows
	// commit of batches 1..1: 3 rows in 1 file after 1 attempt
}
