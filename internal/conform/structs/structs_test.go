package structs

import (
	"context"
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/icewriter/iceberg/internal/conform"
)

// TestToBatchDeadLetter: without a writer, values that cannot be converted (a null in a required column) fail
// the call as a *conform.ColumnError, or with dead letters on are set apart by index while the rest convert; with
// Relax, the column is relaxed instead and the call converts every row.
func TestToBatchDeadLetter(t *testing.T) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	required := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "code", Type: arrow.BinaryTypes.String}}, nil)
	optional := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "code", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	type row struct {
		ID   int64   `iceberg:"id"`
		Code *string `iceberg:"code"`
	}
	code := "x"
	rows := []row{{1, &code}, {2, nil}, {3, &code}, {4, nil}}

	var ce *conform.ColumnError
	s := New(Env{Mem: mem, Target: func() *arrow.Schema { return required }})
	if _, _, err := ToBatch(ctx, s, rows); !errors.As(err, &ce) || ce.Column != "code" || !errors.Is(err, conform.ErrNullInRequired) {
		t.Fatalf("a null in a required column: %v, want a ColumnError on code wrapping ErrNullInRequired", err)
	}

	s = New(Env{Mem: mem, Target: func() *arrow.Schema { return required }, DeadLetter: true})
	rec, bad, err := ToBatch(ctx, s, rows)
	if err != nil {
		t.Fatal(err)
	}
	if rec.NumRows() != 2 || len(bad) != 2 || bad[0].Idx != 1 || bad[1].Idx != 3 || !errors.As(bad[0].Err, &ce) {
		t.Fatalf("%d rows converted, set apart %v; want 2 and rows 1, 3 as ColumnErrors", rec.NumRows(), bad)
	}
	rec.Release()

	target := required
	relax := func(context.Context, []string) (bool, error) { target = optional; return true, nil }
	s = New(Env{Mem: mem, Target: func() *arrow.Schema { return target }, Relax: relax})
	rec, bad, err = ToBatch(ctx, s, rows)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	if rec.NumRows() != 4 || len(bad) != 0 || rec.Column(1).NullN() != 2 {
		t.Fatalf("relaxed: %d rows, %d nulls, set apart %v; want 4 rows, 2 nulls", rec.NumRows(), rec.Column(1).NullN(), bad)
	}
}
