package iceberg

import (
	"context"
	"fmt"
	"testing"

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
