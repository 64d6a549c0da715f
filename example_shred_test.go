package iceberg_test

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/variant"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
)

// Shred a variant column (format v3, table property write.parquet.shred-variants) so that a scan filtering on a
// path plans only the files whose bounds admit it.
func ExampleTableProperties_shredVariants() {
	ctx := context.Background()
	cat, cleanup := exampleCatalog()
	defer cleanup()

	schema := arrow.NewSchema([]arrow.Field{
		{Name: "event", Type: extensions.NewDefaultVariantType(), Nullable: true},
	}, nil)
	ident := table.Identifier{"shop", "events"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(schema, iceberg.FormatVersion(3),
		iceberg.TableProperties(map[string]string{table.ParquetShredVariantsKey: "true"})))
	if err != nil {
		panic(err)
	}
	for _, user := range []int{1, 2} { // a file of each user's events
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		for n := range 3 {
			v, err := variant.ParseJSON(fmt.Sprintf(`{"user": %d, "n": %d}`, user, n), false)
			if err != nil {
				panic(err)
			}
			b.Field(0).(*extensions.VariantBuilder).Append(v)
		}
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
	if err := w.Close(ctx); err != nil {
		panic(err)
	}

	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		panic(err)
	}
	all, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		panic(err)
	}
	user2 := ice.EqualTo(ice.Extract(ice.Reference("event"), "$.user", ice.PrimitiveTypes.Int64), int64(2))
	some, err := tbl.Scan(table.WithRowFilter(user2)).PlanFiles(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Printf("data files: %d, to read for $.user = 2: %d\n", len(all), len(some))
	// Output: data files: 2, to read for $.user = 2: 1
}

// Shred chosen variant paths: $.user is stored typed in every file, whatever else the events hold, and each
// file's bounds on it let a filter on it skip the files that cannot match.
func ExampleWithShreddedPaths() {
	ctx := context.Background()
	cat, cleanup := exampleCatalog()
	defer cleanup()

	schema := arrow.NewSchema([]arrow.Field{
		{Name: "event", Type: extensions.NewDefaultVariantType(), Nullable: true},
	}, nil)
	ident := table.Identifier{"shop", "events"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(schema, iceberg.FormatVersion(3)),
		iceberg.WithShreddedPaths("event", iceberg.ShreddedPath{Path: "$.user", Type: ice.PrimitiveTypes.Int64}))
	if err != nil {
		panic(err)
	}
	for _, user := range []int{1, 2} { // a file of each user's events, most of them without $.user
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		for _, doc := range []string{fmt.Sprintf(`{"user": %d}`, user), `{"page": "home"}`, `{"page": "cart"}`} {
			v, err := variant.ParseJSON(doc, false)
			if err != nil {
				panic(err)
			}
			b.Field(0).(*extensions.VariantBuilder).Append(v)
		}
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
	if err := w.Close(ctx); err != nil {
		panic(err)
	}

	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		panic(err)
	}
	user2 := ice.EqualTo(ice.Extract(ice.Reference("event"), "$.user", ice.PrimitiveTypes.Int64), int64(2))
	some, err := tbl.Scan(table.WithRowFilter(user2)).PlanFiles(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Printf("data files to read for $.user = 2: %d of 2\n", len(some))
	// Output: data files to read for $.user = 2: 1 of 2
}
