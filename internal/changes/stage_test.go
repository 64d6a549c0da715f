package changes

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/icewriter/iceberg/internal/conform"
	"github.com/icewriter/iceberg/internal/keyindex/keyenc"
)

// TestStageResolve: a call's changes resolve per key in row order without a Writer: a key-changing update
// deletes its before-image key, a delete without a key deletes by its before image, a change older than its
// key's version is skipped, and the records handed on hold the surviving rows only.
func TestStageResolve(t *testing.T) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	target := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	cols := Columns{Version: "lsn"}.WithDefaults(1 << 20)
	st, err := NewStage(cols, target, []string{"id"}, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	in := arrow.NewSchema([]arrow.Field{{Name: "op", Type: arrow.BinaryTypes.String},
		{Name: "lsn", Type: arrow.PrimitiveTypes.Int32},
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "before_id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	b := array.NewRecordBuilder(mem, in)
	defer b.Release()
	for _, c := range []struct {
		op           string
		lsn          int32
		id, beforeID int64 // -1: null
		name         string
	}{{"c", 1, 1, -1, "a"}, {"c", 1, 2, -1, "b"}, {"u", 3, 3, 2, "b2"}, {"d", 4, -1, 1, ""}, {"u", 2, 3, -1, "old"}} {
		b.Field(0).(*array.StringBuilder).Append(c.op)
		b.Field(1).(*array.Int32Builder).Append(c.lsn)
		for f, v := range map[int]int64{2: c.id, 4: c.beforeID} {
			if v < 0 {
				b.Field(f).AppendNull()
			} else {
				b.Field(f).(*array.Int64Builder).Append(v)
			}
		}
		b.Field(3).(*array.StringBuilder).Append(c.name)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()

	l, err := st.Layout(in)
	if err != nil {
		t.Fatal(err)
	}
	data := l.Project(rec)
	defer data.Release()
	if got := fmt.Sprint(data.Schema().Fields()); data.NumCols() != 2 {
		t.Fatalf("projected %s, want id and name (the table has no change column)", got)
	}
	conf := conform.New(target, nil, mem, nil, 0)
	cb, err := st.Read(ctx, conf, arrow.NewSchema(target.Fields()[:1], nil), l, rec)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Release()
	unlock, err := st.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	vers, err := st.VersionsFor(ctx, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	plan, err := cb.Resolve(vers, keyenc.Hash)
	if err != nil {
		t.Fatal(err)
	}
	if plan.skipped != 1 || fmt.Sprint(plan.upserts) != "[2]" || fmt.Sprint(plan.delBefore) != "[3 2]" {
		t.Fatalf("plan: upserts %v, delBefore %v, skipped %d; want [2], [3 2], 1 (keys in the order they first appear)", plan.upserts, plan.delBefore, plan.skipped)
	}
	del, _, err := DeleteRecord(ctx, mem, cb, plan)
	if err != nil {
		t.Fatal(err)
	}
	defer del.Release()
	if got := fmt.Sprint(del.Column(0)); got != "[1 2]" {
		t.Fatalf("deleted keys %s, want [1 2]", got)
	}
	ups, _, _, dead, err := UpsertRecord(ctx, conf, data, plan)
	if err != nil {
		t.Fatal(err)
	}
	defer ups.Release()
	if got := fmt.Sprint(ups.Column(1)); got != `["b2"]` || len(dead) != 0 {
		t.Fatalf("upserted names %s, dead %v; want [\"b2\"]", got, dead)
	}
	st.Accepted(vers, plan, dead, nil)
	if v, ok := vers.Get(Hash(keyenc.AppendInt(nil, 3))); !ok || v != 3 || st.Skipped() != 1 {
		t.Fatalf("key 3: version %d, %v; skipped %d; want 3 and 1 skipped", v, ok, st.Skipped())
	}

	if _, err := st.Layout(arrow.NewSchema(in.Fields()[1:], nil)); !errors.Is(err, conform.ErrMissingColumn) {
		t.Fatalf("a batch without its op column: %v, want ErrMissingColumn", err)
	}
	if _, err := NewStage(Columns{Op: "id"}.WithDefaults(1<<20), target, []string{"id"}, nil, 0); err == nil {
		t.Fatal("the op column may not be a key column")
	}
}
