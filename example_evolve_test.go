package iceberg_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/catalog"
	"github.com/icewriter/iceberg/shred"
)

// With WithSchemaEvolution, a struct that grew a field adds the column to the table before its rows are
// written; rows written earlier read back with null in it.
func ExampleWithSchemaEvolution() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "evolve-example")
	defer os.RemoveAll(dir)
	cat, err := catalog.Open(ctx, "sqlite://"+filepath.Join(dir, "catalog.db"))
	if err != nil {
		fmt.Println(err)
		return
	}

	type EventV1 struct {
		ID   int64  `iceberg:"id,required"`
		Kind string `iceberg:"kind"`
	}
	type EventV2 struct {
		ID    int64   `iceberg:"id,required"`
		Kind  string  `iceberg:"kind"`
		Score float64 `iceberg:"score"` // new in version 2
	}
	schema, _ := shred.SchemaOf[EventV1]()
	w, err := iceberg.NewWriter(ctx, cat, table.Identifier{"app", "events"},
		iceberg.WithCreate(schema), iceberg.WithSchemaEvolution())
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = iceberg.WriteStructs(ctx, w, []EventV1{{ID: 1, Kind: "click"}})
	if err := iceberg.WriteStructs(ctx, w, []EventV2{{ID: 2, Kind: "view", Score: 0.5}}); err != nil {
		fmt.Println(err)
		return
	}
	if err := w.Close(ctx); err != nil {
		fmt.Println(err)
		return
	}

	tbl, _ := cat.LoadTable(ctx, table.Identifier{"app", "events"})
	for _, f := range tbl.Schema().Fields() {
		fmt.Printf("%s %s required=%v\n", f.Name, f.Type, f.Required)
	}
	arrowTable, err := tbl.Scan(table.WithSelectedFields("id", "score")).ToArrowTable(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer arrowTable.Release()
	var lines []string
	tr := array.NewTableReader(arrowTable, 0)
	defer tr.Release()
	for tr.Next() {
		rec := tr.RecordBatch()
		for r := 0; r < int(rec.NumRows()); r++ {
			lines = append(lines, fmt.Sprintf("id=%s score=%s", rec.Column(0).ValueStr(r), rec.Column(1).ValueStr(r)))
		}
	}
	sort.Strings(lines)
	fmt.Println(strings.Join(lines, "\n"))
	// Output:
	// id long required=true
	// kind string required=false
	// score double required=false
	// id=1 score=(null)
	// id=2 score=0.5
}
