package shred_test

import (
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/icewriter/iceberg/shred"
)

func ExampleStructs() {
	type Event struct {
		ID     int64 `iceberg:"id,required"`
		UserID int64
		Kind   string    `json:"kind"`
		TS     time.Time `iceberg:"ts"`
		Note   *string
	}
	rows := []Event{
		{ID: 1, UserID: 42, Kind: "click", TS: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)},
	}
	rec, err := shred.Structs(memory.DefaultAllocator, rows, nil)
	if err != nil {
		panic(err)
	}
	defer rec.Release()
	for i, f := range rec.Schema().Fields() {
		fmt.Printf("%s %v nullable=%v: %v\n", f.Name, f.Type, f.Nullable, rec.Column(i))
	}
	// Output:
	// id int64 nullable=false: [1]
	// user_id int64 nullable=true: [42]
	// kind utf8 nullable=true: ["click"]
	// ts timestamp[us, tz=UTC] nullable=true: [1735689600000000]
	// note utf8 nullable=true: [(null)]
}

func ExampleJSONLines() {
	target := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "ts", Type: shred.TimestampType, Nullable: true},
	}, nil)
	data := []byte(`{"id": 9007199254740993, "ts": "2025-01-01T12:00:00Z"}
{"id": 2, "ts": 1735732800}
{"id": "oops"}
`)
	rec, err := shred.JSONLines(nil, data, target, shred.MapOptions{
		EpochUnit:  arrow.Second,
		OnRowError: func(row int, err error) { fmt.Println("skipped:", err) },
	})
	if err != nil {
		panic(err)
	}
	defer rec.Release()
	fmt.Println(rec.Column(0))
	fmt.Println(rec.Column(1))
	// Output:
	// skipped: shred: column "id" (row 2): JSON string cannot be written to a int64 column: type mismatch
	// [9007199254740993 2]
	// [1735732800000000 1735732800000000]
}
