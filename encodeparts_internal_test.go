package iceberg

import (
	"context"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/icewriter/iceberg/internal/arrowx"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// TestEncodeParts: a batch of at least twice the seal policy's rows with an encoder slot idle is written as two
// files at once, each of at least the policy's rows, and reads back as written; a smaller batch stays one file.
// An upsert batch cut in two supersedes rows of both earlier files.
func TestEncodeParts(t *testing.T) {
	ctx := context.Background()
	w := idNameWriter(t, 0, 0, WithCreate(idNameSchema, IdentifierFields("id")), WithFlushRows(100))
	ids := func(from, to int64) []int64 {
		var out []int64
		for i := from; i < to; i++ {
			out = append(out, i)
		}
		return out
	}
	want := map[int64][]string{}
	steps := []struct {
		name     string
		from, to int64
		upsert   bool
		files    int64 // data files the batch writes
	}{
		{"a", 0, 450, false, 2},
		{"b", 450, 600, false, 1}, // 150 rows: two parts would be under the policy's 100 rows
		{"c", 200, 650, true, 2},
	}
	for _, s := range steps {
		before := w.Stats().FilesWritten
		rec := namedRows(ids(s.from, s.to), s.name)
		var err error
		if s.upsert {
			err = w.Upsert(ctx, rec)
		} else {
			err = w.Write(ctx, rec)
		}
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		for _, id := range ids(s.from, s.to) {
			want[id] = []string{s.name}
		}
		if got := w.Stats().FilesWritten - before; got != s.files {
			t.Errorf("batch %s of %d rows: %d data files, want %d", s.name, s.to-s.from, got, s.files)
		}
	}
	if got := readNamed(t, w); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read back %v,\nwant %v", got, want)
	}
	for _, task := range tabletest.LiveDataFiles(t, w.Table()) {
		if task.File.Count() < 100 {
			t.Errorf("data file of %d rows, under the policy's 100", task.File.Count())
		}
	}
}

// TestCutRecords: cutting records into runs keeps every row once, in order, in runs of about equal rows, and
// leaves nothing allocated once the runs are released.
func TestCutRecords(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64}}, nil)
	var recs []arrow.RecordBatch
	next := int64(0)
	for _, n := range []int{5, 7, 3} {
		b := array.NewInt64Builder(mem)
		for range n {
			b.Append(next)
			next++
		}
		col := b.NewArray()
		b.Release()
		recs = append(recs, array.NewRecordBatch(schema, []arrow.Array{col}, int64(n)))
		col.Release()
	}
	for _, parts := range []int{1, 2, 3} {
		for _, r := range recs {
			r.Retain()
		}
		runs := cutRecords(recs, next, parts)
		if len(runs) != parts {
			t.Fatalf("%d parts: %d runs", parts, len(runs))
		}
		var got []int64
		for _, run := range runs {
			var n int64
			for _, r := range run {
				n += r.NumRows()
				got = append(got, r.Column(0).(*array.Int64).Int64Values()...)
			}
			if per := (next + int64(parts) - 1) / int64(parts); n != per && n != next-per*int64(parts-1) {
				t.Errorf("%d parts: a run of %d rows", parts, n)
			}
			arrowx.ReleaseRecords(run...)
		}
		for i, v := range got {
			if v != int64(i) || len(got) != int(next) {
				t.Fatalf("%d parts: rows %v, want 0 to %d in order", parts, got, next-1)
			}
		}
	}
	arrowx.ReleaseRecords(recs...)
}
