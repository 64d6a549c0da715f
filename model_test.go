package iceberg_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/seed"
)

// TestAppendModel writes random batch sizes under random flush policies, MaxInFlight and Flush calls, partitioned
// and not, and checks that the table read back holds exactly the rows written, each once, with their values.
func TestAppendModel(t *testing.T) {
	for trial := 0; trial < 4; trial++ {
		trial := trial
		t.Run(fmt.Sprintf("trial=%d", trial), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(uint64(trial), 99))
			ctx := context.Background()
			cat := openCatalog(t)
			ident := table.Identifier{"model", "events"}
			var create []iceberg.CreateOption
			if trial%2 == 1 {
				create = append(create, iceberg.PartitionBy("bucket(4, user_id)", "hour(ts)"))
			}
			opts := []iceberg.Option{
				iceberg.WithCreate(seed.Schema, create...),
				iceberg.WithFlushRows(1 + rng.IntN(3000)),
				iceberg.WithMaxInFlight(1 + rng.IntN(4)),
				iceberg.WithFlushInterval(time.Duration(rng.IntN(20)) * time.Millisecond),
			}
			if rng.IntN(2) == 0 {
				opts = append(opts, iceberg.WithFlushBytes(int64(50_000+rng.IntN(500_000))))
			}
			w, err := iceberg.NewWriter(ctx, cat, ident, opts...)
			if err != nil {
				t.Fatal(err)
			}
			g := seed.New(0, uint64(trial))
			model := map[int64]map[string]any{}
			total := 0
			for total < 8_000 {
				n := 1 + rng.IntN(1500)
				rec := g.Batch(n)
				for r := 0; r < n; r++ {
					row := map[string]any{}
					for c, f := range rec.Schema().Fields() {
						row[f.Name] = cellValue(rec.Column(c), r)
					}
					model[row["id"].(int64)] = row
				}
				if err := w.Write(ctx, rec); err != nil {
					t.Fatal(err)
				}
				rec.Release()
				total += n
				if rng.IntN(10) == 0 {
					if err := w.Flush(ctx); err != nil {
						t.Fatal(err)
					}
					if got := w.Stats().RowsCommitted; got != int64(total) {
						t.Fatalf("after Flush %d rows committed, want %d", got, total)
					}
				}
			}
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
			counts, rows := readRows(t, cat, ident)
			if len(counts) != len(model) {
				t.Fatalf("table has %d ids, model %d", len(counts), len(model))
			}
			for id, want := range model {
				if counts[id] != 1 {
					t.Fatalf("id %d appears %d times", id, counts[id])
				}
				for k, v := range want {
					if rows[id][k] != v {
						t.Fatalf("id %d column %s = %v, want %v", id, k, rows[id][k], v)
					}
				}
			}
			st := w.Stats()
			if st.RowsCommitted != int64(total) || st.UncommittedBatches != 0 || st.BufferedBytes != 0 {
				t.Fatalf("stats after Close: %+v", st)
			}
		})
	}
}

// TestConcurrentWriters runs writers with distinct IDs on one table, plus concurrent calls on one writer.
func TestConcurrentWriters(t *testing.T) {
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
				iceberg.WithFlushRows(700), iceberg.WithMaxInFlight(2))
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
