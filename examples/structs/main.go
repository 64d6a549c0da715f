// Command structs writes Go structs into an Iceberg table created from the struct type, lets the schema evolve
// when the struct grows a field, and routes rows that cannot be written to a dead-letter function.
//
//	go run ./examples/structs
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/catalog"
)

// OrderV1 is the first shape of an order event.
type OrderV1 struct {
	ID       int64     `iceberg:"id,required"`
	Customer string    // column "customer"
	Total    float64   `json:"total"`
	PlacedAt time.Time // column "placed_at": timestamp with zone, microseconds
	Items    []string
}

// OrderV2 adds a nested struct: with WithSchemaEvolution the column is added before the rows that need it.
type OrderV2 struct {
	ID       int64 `iceberg:"id,required"`
	Customer string
	Total    float64 `json:"total"`
	PlacedAt time.Time
	Items    []string
	Shipping *Address // nullable nested struct
}

// Address is a nested struct column.
type Address struct {
	City    string
	Country string
}

func main() {
	if err := run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "icewriter-structs")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cat, err := catalog.Open(ctx, "sqlite://"+filepath.Join(dir, "catalog.db"))
	if err != nil {
		return err
	}
	defer cat.(icecatalog.Closer).Close()

	var dead int
	ident := table.Identifier{"shop", "orders"}
	w, err := iceberg.NewWriter(ctx, cat, ident,
		iceberg.WithCreateFor[OrderV1](iceberg.IdentifierFields("id")),
		iceberg.WithSchemaEvolution(),
		iceberg.WithDeadLetter(func(row any, err error) { dead++; fmt.Printf("dead letter: %v\n", err) }))
	if err != nil {
		return err
	}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	if err := iceberg.WriteStructs(ctx, w, []OrderV1{
		{ID: 1, Customer: "ada", Total: 12.5, PlacedAt: now, Items: []string{"book"}},
		{ID: 2, Customer: "alan", Total: 3, PlacedAt: now.Add(time.Minute)},
	}); err != nil {
		return err
	}
	if err := iceberg.WriteStructs(ctx, w, []OrderV2{
		{ID: 3, Customer: "grace", Total: 99, PlacedAt: now.Add(2 * time.Minute), Shipping: &Address{"Paris", "FR"}},
	}); err != nil {
		return err
	}
	if err := iceberg.UpsertStructs(ctx, w, []OrderV2{{ID: 1, Customer: "ada", Total: 15, PlacedAt: now}}); err != nil {
		return err
	}
	if err := w.Close(ctx); err != nil {
		return err
	}
	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		return err
	}
	fmt.Println("schema:", tbl.Schema())
	_, recs, err := tbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		return err
	}
	rows := 0
	for rec, err := range recs {
		if err != nil {
			return err
		}
		rows += int(rec.NumRows())
		rec.Release()
	}
	fmt.Printf("%d rows (order 1 upserted), %d dead letters\n", rows, dead)
	return nil
}
