package iceberg_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/seed"
)

func TestWriteReadBack(t *testing.T) {
	t.Parallel() // see TestMain
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

// TestConcurrentWriters runs writers with distinct IDs on one table, plus concurrent calls on one writer.
func TestConcurrentWriters(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"conc", "events"}
	createTable(t, ctx, cat, ident, seed.Schema)
	const writers, perWriter = 4, 6000
	var wg sync.WaitGroup
	errs := make(chan error, writers*2)
	for i := 0; i < writers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithWriterID(fmt.Sprintf("w%d", i)),
				iceberg.WithFlushRows(700), iceberg.WithMaxInFlight(2), iceberg.WithQuickRetriesForTest())
			if err != nil {
				errs <- err
				return
			}
			// Two goroutines share this writer.
			var inner sync.WaitGroup
			for half := 0; half < 2; half++ {
				inner.Add(1)
				go func(half int) {
					defer inner.Done()
					g := seed.New(int64(i*perWriter+half*perWriter/2), uint64(i))
					for n := 0; n < perWriter/2; n += 300 {
						rec := g.Batch(300)
						if err := w.Write(ctx, rec); err != nil {
							errs <- err
						}
						rec.Release()
					}
				}(half)
			}
			inner.Wait()
			if err := w.Close(ctx); err != nil {
				errs <- err
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	counts, _ := readRows(t, cat, ident)
	if len(counts) != writers*perWriter {
		t.Fatalf("table has %d ids, want %d", len(counts), writers*perWriter)
	}
	for id, n := range counts {
		if n != 1 {
			t.Fatalf("id %d appears %d times", id, n)
		}
	}
}
