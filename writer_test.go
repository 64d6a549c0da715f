package iceberg_test

import (
	"context"
	"testing"

	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/seed"
)

func TestWriteReadBack(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"ns", "events"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema), iceberg.WithFlushRows(2500))
	if err != nil {
		t.Fatal(err)
	}
	g := seed.New(0, 1)
	for i := 0; i < 10; i++ {
		rec := g.Batch(1000)
		if err := w.Write(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	st := w.Stats()
	t.Logf("stats: %+v", st)
	counts, _ := readRows(t, cat, ident)
	if len(counts) != 10000 {
		t.Fatalf("got %d distinct ids, want 10000", len(counts))
	}
	for id, n := range counts {
		if n != 1 || id < 0 || id >= 10000 {
			t.Fatalf("id %d appears %d times", id, n)
		}
	}
}
