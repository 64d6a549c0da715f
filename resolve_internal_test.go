package iceberg

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func namedRows(ids []int64, name string) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, bloomSchema)
	defer b.Release()
	for _, id := range ids {
		b.Field(0).(*array.Int64Builder).Append(id)
		b.Field(1).(*array.StringBuilder).Append(name)
	}
	return b.NewRecordBatch()
}

// TestResolveHashCollisions: resolve keys its in-batch model by 64-bit key hashes, checked against the key
// bytes. With every key hashing alike (a collision on every pair) a batch mixing inserts, upserts and deletes
// of the same keys must read back exactly as with the real hash.
func TestResolveHashCollisions(t *testing.T) {
	run := func(t *testing.T) map[int64][]string {
		ctx := context.Background()
		w := bloomWriter(t, 0, 0, WithCreate(bloomSchema, IdentifierFields("id")), WithFlushRows(1_000_000))
		if err := w.Write(ctx, namedRows([]int64{0, 1, 2, 3, 4, 5}, "a")); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		steps := []struct {
			op   string
			ids  []int64
			name string
		}{
			{"write", []int64{100, 101}, "x"},
			{"upsert", []int64{1, 2, 100}, "u1"},
			{"write", []int64{3}, "dup"}, // a plain insert of a key that exists: two rows
			{"delete", []int64{2}, ""},
			{"upsert", []int64{2, 1}, "u2"},
			{"write", []int64{102}, "y"},
			{"delete", []int64{101, 4}, ""},
			{"upsert", []int64{1}, "u3"},
		}
		for _, s := range steps {
			rec := namedRows(s.ids, s.name)
			var err error
			switch s.op {
			case "write":
				err = w.Write(ctx, rec)
			case "upsert":
				err = w.Upsert(ctx, rec)
			case "delete":
				err = w.Delete(ctx, rec)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		got := readNamed(t, w)
		return got
	}
	want := map[int64][]string{0: {"a"}, 1: {"u3"}, 2: {"u2"}, 3: {"a", "dup"}, 5: {"a"}, 100: {"u1"}, 102: {"y"}}
	real := run(t)
	saved := resolveHash
	resolveHash = func([]byte) uint64 { return 7 }
	defer func() { resolveHash = saved }()
	collided := run(t)
	if fmt.Sprint(real) != fmt.Sprint(want) || fmt.Sprint(collided) != fmt.Sprint(want) {
		t.Fatalf("read back\n with the key hash:      %v\n with every hash alike:  %v\n want:                   %v", real, collided, want)
	}
}

// readNamed reads a bloomSchema table back: per id, its names, sorted.
func readNamed(t *testing.T, w *Writer) map[int64][]string {
	t.Helper()
	_, recs, err := w.Table().Scan().ToArrowRecords(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64][]string{}
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		ids, names := rec.Column(0).(*array.Int64), rec.Column(1).(*array.String)
		for i := 0; i < int(rec.NumRows()); i++ {
			got[ids.Value(i)] = append(got[ids.Value(i)], names.Value(i))
		}
		rec.Release()
	}
	for _, v := range got {
		slices.Sort(v)
	}
	return got
}
