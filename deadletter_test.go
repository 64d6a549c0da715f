package iceberg_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
)

// deadLetters collects routed rows.
type deadLetters struct {
	mu   sync.Mutex
	rows []any
	errs []error
}

func (d *deadLetters) fn(row any, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if rec, ok := row.(arrow.RecordBatch); ok {
		rec.Retain() // the writer releases it when fn returns
	}
	d.rows = append(d.rows, row)
	d.errs = append(d.errs, err)
}

func (d *deadLetters) release() {
	for _, r := range d.rows {
		if rec, ok := r.(arrow.RecordBatch); ok {
			rec.Release()
		}
	}
}

// TestDeadLetterStructs: struct values that cannot be converted (a null in a required column, a value out of
// the column's range) are routed with a *ColumnError; the others are written.
func TestDeadLetterStructs(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"deadletter", "structs"}
	var dl deadLetters
	schema := arrow.NewSchema([]arrow.Field{fID,
		{Name: "small", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "code", Type: arrow.BinaryTypes.String}}, nil)
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(schema), iceberg.WithDeadLetter(dl.fn))
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		ID    int64   `iceberg:"id"`
		Small int64   `iceberg:"small"`
		Code  *string `iceberg:"code"`
	}
	code := "c"
	rows := make([]row, 100)
	wantBad := map[int64]string{}
	for i := range rows {
		rows[i] = row{ID: int64(i), Small: int64(i), Code: &code}
		switch {
		case i%10 == 3:
			rows[i].Code = nil
			wantBad[int64(i)] = "code"
		case i%25 == 7:
			rows[i].Small = math.MaxInt32 + 1
			wantBad[int64(i)] = "small"
		}
	}
	if err := iceberg.WriteStructs(ctx, w, rows); err != nil {
		t.Fatal(err)
	}
	// A call whose rows are all bad writes nothing and still succeeds.
	if err := iceberg.WriteStructs(ctx, w, []row{{ID: 1000, Small: math.MinInt64, Code: &code}}); err != nil {
		t.Fatal(err)
	}
	wantBad[1000] = "small"
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if len(dl.rows) != len(wantBad) {
		t.Fatalf("%d rows routed, want %d", len(dl.rows), len(wantBad))
	}
	for i, r := range dl.rows {
		v, ok := r.(row)
		if !ok {
			t.Fatalf("routed %T, want the struct value", r)
		}
		var ce *iceberg.ColumnError
		if !errors.As(dl.errs[i], &ce) || ce.Column != wantBad[v.ID] {
			t.Fatalf("row %d: error %v, want a ColumnError on %q", v.ID, dl.errs[i], wantBad[v.ID])
		}
	}
	counts, _ := readRows(t, cat, ident)
	if len(counts) != 100-(len(wantBad)-1) {
		t.Fatalf("table holds %d rows, want %d", len(counts), 100-(len(wantBad)-1))
	}
	for id := range wantBad {
		if counts[id] != 0 {
			t.Fatalf("bad row %d was written", id)
		}
	}
}

// arrowDeadLetter writes a batch with bad rows (a null in the required key, a uint64 value over the int64
// range) through Write and Upsert, and checks what is routed and what the table holds.
func arrowDeadLetter(t *testing.T, ident table.Identifier, opts ...iceberg.Option) {
	ctx := context.Background()
	cat := openCatalog(t)
	var dl deadLetters
	defer dl.release()
	schema := arrow.NewSchema([]arrow.Field{fID, {Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	opts = append(opts, iceberg.WithCreate(schema, iceberg.IdentifierFields("id")), iceberg.WithDeadLetter(dl.fn))
	w, err := iceberg.NewWriter(ctx, cat, ident, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if len(opts) == 2 && !iceberg.DeadLetterWired(w) {
		w.Close(ctx)
		t.Fatal("the view's conformers lack the writer's dead-letter hook: Write without schema evolution would not route rows")
	}
	in := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "n", Type: arrow.PrimitiveTypes.Uint64, Nullable: true}}, nil)
	wantBad := map[int]string{}
	rec := buildRecord(t, in.Fields(), func(b *array.RecordBuilder) {
		for i := 0; i < 1000; i++ {
			switch {
			case i%100 == 5:
				b.Field(0).(*array.Int64Builder).AppendNull()
				wantBad[i] = "id"
			default:
				b.Field(0).(*array.Int64Builder).Append(int64(i))
			}
			if i%150 == 9 {
				b.Field(1).(*array.Uint64Builder).Append(math.MaxUint64)
				wantBad[i] = "n"
			} else {
				b.Field(1).(*array.Uint64Builder).Append(uint64(i))
			}
		}
	})
	defer rec.Release()
	if err := w.Write(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if len(dl.rows) != len(wantBad) {
		t.Fatalf("%d rows routed, want %d", len(dl.rows), len(wantBad))
	}
	for i, r := range dl.rows {
		one, ok := r.(arrow.RecordBatch)
		if !ok || one.NumRows() != 1 {
			t.Fatalf("routed %T, want a one-row record batch", r)
		}
		var ce *iceberg.ColumnError
		if !errors.As(dl.errs[i], &ce) {
			t.Fatalf("error %v is not a ColumnError", dl.errs[i])
		}
		// Identify the row by its n value (the id may be the null).
		n := one.Column(1).(*array.Uint64)
		idx := int(n.Value(0))
		if n.Value(0) == math.MaxUint64 {
			idx = -1
			for j, col := range wantBad {
				if col == "n" && one.Column(0).(*array.Int64).Value(0) == int64(j) {
					idx = j
				}
			}
		}
		if ce.Column != wantBad[idx] {
			t.Fatalf("row %d routed for %q, want %q (%v)", idx, ce.Column, wantBad[idx], dl.errs[i])
		}
	}
	// A batch whose rows are all bad accepts nothing and succeeds.
	allBad := buildRecord(t, in.Fields(), func(b *array.RecordBuilder) {
		b.Field(0).(*array.Int64Builder).AppendNull()
		b.Field(1).(*array.Uint64Builder).Append(1)
	})
	defer allBad.Release()
	if err := w.Write(ctx, allBad); err != nil {
		t.Fatal(err)
	}
	if len(dl.rows) != len(wantBad)+1 {
		t.Fatalf("%d rows routed, want %d", len(dl.rows), len(wantBad)+1)
	}
	dl.rows, dl.errs = dl.rows[:len(wantBad)], dl.errs[:len(wantBad)]
	// Schema-level problems still fail the call.
	bad := buildRecord(t, []arrow.Field{fID, {Name: "n", Type: arrow.BinaryTypes.String, Nullable: true}},
		func(b *array.RecordBuilder) {
			b.Field(0).(*array.Int64Builder).Append(1)
			b.Field(1).(*array.StringBuilder).Append("x")
		})
	defer bad.Release()
	var ce *iceberg.ColumnError
	if err := w.Write(ctx, bad); !errors.As(err, &ce) || ce.Column != "n" {
		t.Fatalf("wrong column type: got %v", err)
	}
	// Upsert routes the same way.
	if err := w.Upsert(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if len(dl.rows) != 2*len(wantBad) {
		t.Fatalf("%d rows routed after Upsert, want %d", len(dl.rows), 2*len(wantBad))
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	counts, _ := readRows(t, cat, ident)
	if len(counts) != 1000-len(wantBad) {
		t.Fatalf("table holds %d ids, want %d", len(counts), 1000-len(wantBad))
	}
	for id, n := range counts {
		if n != 1 {
			t.Fatalf("id %d: %d rows", id, n)
		}
		if _, isBad := wantBad[int(id)]; isBad {
			t.Fatalf("bad row %d was written", id)
		}
	}
}

// TestDeadLetterArrowEvolve: with schema evolution on, bad Arrow rows are routed as one-row batches.
func TestDeadLetterArrowEvolve(t *testing.T) {
	arrowDeadLetter(t, table.Identifier{"deadletter", "arrow_evolve"}, iceberg.WithSchemaEvolution())
}

// TestDeadLetterArrow: without schema evolution, bad Arrow rows are routed as one-row batches.
func TestDeadLetterArrow(t *testing.T) {
	arrowDeadLetter(t, table.Identifier{"deadletter", "arrow"})
}
