package iceberg_test

import (
	"context"
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/table"

	iceberg "github.com/icewriter/iceberg"
)

// A source partition (a Kafka topic-partition) whose records go to two tables, resumed after a restart: read
// after the resume point, and skip the records a table already holds.
func ExampleRouterSource_Resume() {
	ctx := context.Background()
	cat, cleanup := exampleCatalog()
	defer cleanup()
	schema := arrow.NewSchema([]arrow.Field{{Name: "offset", Type: arrow.PrimitiveTypes.Int64}}, nil)
	// The partition's records: offset i goes to "even" or "odd".
	route := func(off int64) table.Identifier {
		if off%2 == 0 {
			return table.Identifier{"kafka", "even"}
		}
		return table.Identifier{"kafka", "odd"}
	}
	consume := func(r *iceberg.Router, from, to int64, covered func(table.Identifier, string) bool) {
		src := r.Source("events/0")
		for off := from; off <= to; off++ {
			pos := strconv.FormatInt(off, 10)
			if covered != nil && covered(route(off), pos) {
				continue // that table holds this record already
			}
			b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
			b.Field(0).(*array.Int64Builder).Append(off)
			rec := b.NewRecordBatch()
			b.Release()
			if err := src.Write(ctx, route(off), rec); err != nil {
				panic(err)
			}
			rec.Release()
			if err := src.Checkpoint(ctx, pos); err != nil { // the position of the last record written
				panic(err)
			}
		}
	}
	opts := iceberg.WithWriterOptions(iceberg.WithWriterID("sink-0"), iceberg.WithCheckpoints())

	r, err := iceberg.NewRouter(cat, opts)
	if err != nil {
		panic(err)
	}
	consume(r, 1, 10, nil)
	if err := r.Close(ctx); err != nil {
		panic(err)
	}

	// A restart: open the tables the partition routes to, resume, replay from the resume point.
	r, err = iceberg.NewRouter(cat, opts)
	if err != nil {
		panic(err)
	}
	if err := r.Open(ctx, route(0), route(1)); err != nil {
		panic(err)
	}
	rp, err := r.Source("events/0").Resume(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("resume after", rp.Position)
	next, _ := strconv.ParseInt(rp.Position, 10, 64)
	consume(r, next+1, 14, rp.Covered)
	if err := r.Close(ctx); err != nil {
		panic(err)
	}
	fmt.Println("even:", exampleCount(cat, route(0)), "odd:", exampleCount(cat, route(1)))
	// Output:
	// resume after 10
	// even: 7 odd: 7
}
