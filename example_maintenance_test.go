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

// passEnded hears of each compaction a writer ran (HookCompaction).
type passEnded chan iceberg.Compaction

func (c passEnded) OnCompaction(ev iceberg.Compaction) { c <- ev }

// Merge the small files of a stream of tiny commits every 8 commits (WithSmallFileCompactionEvery replaces the
// deprecated WithSmallFileCompaction). The pass runs in the background; a hook hears when it is done.
func ExampleWithSmallFileCompactionEvery() {
	ctx := context.Background()
	cat, cleanup := exampleCatalog()
	defer cleanup()

	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	done := make(passEnded, 1)
	w, err := iceberg.NewWriter(ctx, cat, table.Identifier{"shop", "clicks"}, iceberg.WithCreate(schema),
		iceberg.WithSmallFileCompactionEvery(8), iceberg.WithHooks(done))
	if err != nil {
		panic(err)
	}
	for id := int64(0); id < 8; id++ { // one file a commit
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		b.Field(0).(*array.Int64Builder).Append(id)
		rec := b.NewRecordBatch()
		b.Release()
		if err := w.Write(ctx, rec); err != nil {
			panic(err)
		}
		rec.Release()
		if err := w.Flush(ctx); err != nil {
			panic(err)
		}
	}
	ev := <-done
	if err := w.Close(ctx); err != nil {
		panic(err)
	}
	fmt.Printf("small-file pass: %d files merged into %d\n", ev.Result.RewrittenDataFiles, ev.Result.AddedDataFiles)
	// Output:
	// small-file pass: 8 files merged into 1
}
