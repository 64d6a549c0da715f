package iceberg_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/seed"
)

// TestBadInput: each kind of bad input returns a *ColumnError naming the column, accepts nothing, and leaves
// the writer usable with earlier rows intact.
func TestBadInput(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"input", "events"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema))
	if err != nil {
		t.Fatal(err)
	}
	g := seed.New(0, 1)
	writeSeed(t, w, g, 100)

	idField := arrow.Field{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}
	cases := []struct {
		name, column string
		want         error
		rec          arrow.RecordBatch
	}{
		{"wrong type", "value", iceberg.ErrTypeMismatch, buildRecord(t,
			[]arrow.Field{idField, {Name: "value", Type: arrow.BinaryTypes.String, Nullable: true}},
			func(b *array.RecordBuilder) {
				b.Field(0).(*array.Int64Builder).Append(1000)
				b.Field(1).(*array.StringBuilder).Append("not a number")
			})},
		{"null in required", "id", iceberg.ErrNullInRequired, buildRecord(t,
			[]arrow.Field{idField}, func(b *array.RecordBuilder) {
				b.Field(0).(*array.Int64Builder).Append(1001)
				b.Field(0).(*array.Int64Builder).AppendNull()
			})},
		{"missing required", "id", iceberg.ErrMissingColumn, buildRecord(t,
			[]arrow.Field{{Name: "user_id", Type: arrow.PrimitiveTypes.Int64}}, func(b *array.RecordBuilder) {
				b.Field(0).(*array.Int64Builder).Append(1)
			})},
		{"unknown column", "colour", iceberg.ErrUnknownColumn, buildRecord(t,
			[]arrow.Field{idField, {Name: "colour", Type: arrow.BinaryTypes.String, Nullable: true}},
			func(b *array.RecordBuilder) {
				b.Field(0).(*array.Int64Builder).Append(1002)
				b.Field(1).(*array.StringBuilder).Append("red")
			})},
		{"int64 over int32? no: uint64 overflow", "user_id", iceberg.ErrTypeMismatch, buildRecord(t,
			[]arrow.Field{idField, {Name: "user_id", Type: arrow.PrimitiveTypes.Uint64, Nullable: true}},
			func(b *array.RecordBuilder) {
				b.Field(0).(*array.Int64Builder).Append(1003)
				b.Field(1).(*array.Uint64Builder).Append(1 << 63)
			})},
	}
	for _, c := range cases {
		err := w.Write(ctx, c.rec)
		c.rec.Release()
		var ce *iceberg.ColumnError
		if !errors.As(err, &ce) || ce.Column != c.column || !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.column) {
			t.Fatalf("%s: got %v, want a ColumnError on %q wrapping %v", c.name, err, c.column, c.want)
		}
	}
	// Still usable; a narrower batch with only some optional columns is fine (the rest are null), and lossless
	// casts (int32 -> long, nullable column without nulls -> required) are applied.
	ok := buildRecord(t, []arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "event_type", Type: arrow.BinaryTypes.LargeString, Nullable: true}}, func(b *array.RecordBuilder) {
		b.Field(0).(*array.Int32Builder).Append(5000)
		b.Field(1).(*array.LargeStringBuilder).Append("view")
	})
	if err := w.Write(ctx, ok); err != nil {
		t.Fatal(err)
	}
	ok.Release()
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	counts, rows := readRows(t, cat, ident)
	if len(counts) != 101 || counts[5000] != 1 {
		t.Fatalf("table has %d ids (id 5000: %d), want 101", len(counts), counts[5000])
	}
	if rows[5000]["event_type"] != "view" || rows[5000]["user_id"] != nil {
		t.Fatalf("row 5000 = %v", rows[5000])
	}
}

// TestWriteCopies: the caller may reuse its buffers as soon as Write returns.
func TestWriteCopies(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"input", "copies"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema), iceberg.WithFlushInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	rec := seed.New(0, 1).Batch(50)
	if err := w.Write(ctx, rec); err != nil {
		t.Fatal(err)
	}
	// Scribble over the caller's id buffer after the call.
	ids := rec.Column(0).(*array.Int64).Int64Values()
	for i := range ids {
		ids[i] = -1
	}
	rec.Release()
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	counts, _ := readRows(t, cat, ident)
	assertIDs(t, counts, 0, 50)
}

type event struct {
	ID        int64     `iceberg:"id,required"`
	UserID    int64     // user_id
	EventType string    `json:"event_type"`
	Value     *float64  // nullable
	Info      string    `iceberg:"info"`
	TS        time.Time `iceberg:"ts"`
	Ignored   string    `iceberg:"-"`
}

// TestWriteStructs: Go structs map onto the table by the documented rules and read back equal.
func TestWriteStructs(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"input", "structs"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema))
	if err != nil {
		t.Fatal(err)
	}
	v := 2.5
	ts := time.Date(2026, 5, 1, 12, 0, 0, 123456000, time.UTC)
	rows := []event{{ID: 1, UserID: 7, EventType: "click", Value: &v, Info: "a", TS: ts, Ignored: "x"},
		{ID: 2, UserID: 8, EventType: "view", Info: "b", TS: ts}}
	if err := iceberg.WriteStructs(ctx, w, rows); err != nil {
		t.Fatal(err)
	}
	type bad struct {
		ID    int64 `iceberg:"id"`
		Color string
	}
	err = iceberg.WriteStructs(ctx, w, []bad{{ID: 3, Color: "red"}})
	var ce *iceberg.ColumnError
	if !errors.As(err, &ce) || ce.Column != "color" {
		t.Fatalf("unknown struct field: got %v", err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	counts, got := readRows(t, cat, ident)
	if len(counts) != 2 {
		t.Fatalf("got %d rows", len(counts))
	}
	if got[1]["value"] != 2.5 || got[2]["value"] != nil || got[1]["user_id"] != int64(7) ||
		got[2]["event_type"] != "view" || got[1]["ts"] != ts.UnixMicro() {
		t.Fatalf("rows read back: %v", got)
	}
}
