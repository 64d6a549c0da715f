//go:build integration

package integration_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/seed"
)

// TestRouterAtomicCommits runs the router's commit rounds on every backend: SeaweedFS's REST catalog through
// POST /transactions/commit (verified on 2026-12-01 to apply two tables' changes together and to reject both
// when one table's requirement fails), and the SQL catalogs through one database transaction (package sqltx).
// Each step writes seed events into three tables and ends with a router checkpoint, while rounds run every
// 20 ms and every five steps (Flush, after which the test waits for a read); a reader loads the three tables one right after the other, in both orders, and scans what it loaded:
// a table loaded later never holds fewer rows than one loaded before it. The rounds must have gone out as
// multi-table commits, and every table ends with exactly its rows.
func TestRouterAtomicCommits(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		cat := b.open(t)
		first := newIdent("router")
		idents := []table.Identifier{first, {first[0], "b"}, {first[0], "c"}}
		r, err := iceberg.NewRouter(cat, iceberg.WithWriterOptions(iceberg.WithWriterID("sink"), iceberg.WithCheckpoints(),
			iceberg.WithFlushInterval(20*time.Millisecond)))
		if err != nil {
			t.Fatal(err)
		}
		const steps, perStep = 60, 10
		models := make([]map[int64]float64, len(idents))
		gens := make([]*seed.Generator, len(idents))
		for i := range idents {
			models[i], gens[i] = map[int64]float64{}, seed.New(0, uint64(i))
		}
		step := func(k int) {
			for i, ident := range idents {
				rec := gens[i].Batch(perStep)
				addToModel(models[i], rec)
				if err := r.Write(ctx, ident, rec); err != nil {
					t.Fatal(err)
				}
				rec.Release()
			}
			if err := r.Checkpoint(ctx, strconv.Itoa(k)); err != nil {
				t.Fatal(err)
			}
		}
		step(0)
		if err := r.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		stop, readerDone := make(chan struct{}), make(chan error, 1)
		var reads atomic.Int64
		readSignal := make(chan struct{}, 1)
		go func() {
			defer close(readerDone)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				order := slices.Clone(idents)
				if i%2 == 1 {
					slices.Reverse(order)
				}
				tbls := make([]*table.Table, len(order))
				for j, ident := range order {
					var err error
					if tbls[j], err = cat.LoadTable(ctx, ident); err != nil {
						readerDone <- err
						return
					}
				}
				last := int64(-1)
				for j, tbl := range tbls {
					n, err := scanRows(tbl)
					if err != nil {
						readerDone <- err
						return
					}
					if n < last {
						readerDone <- fmt.Errorf("table %v loaded after another holds %d rows, the other %d", order[j], n, last)
						return
					}
					last = n
				}
				reads.Add(1)
				select {
				case readSignal <- struct{}{}:
				default:
				}
			}
		}()
		// readBetween waits until a read that started after the call has ended: a read between two commits.
		readBetween := func() {
			for n := reads.Load(); reads.Load() < n+2; {
				select {
				case <-readSignal:
				case err := <-readerDone:
					t.Fatal(err)
				}
			}
		}
		for k := 1; k <= steps; k++ {
			step(k)
			if k%5 == 0 {
				if err := r.Flush(ctx); err != nil {
					t.Fatal(err)
				}
				readBetween()
			}
		}
		if err := r.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		close(stop)
		if err := <-readerDone; err != nil {
			t.Fatal(err)
		}
		st := r.Stats()
		if err := r.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if !st.AtomicCommits || st.MultiTableCommits < steps/5 {
			t.Fatalf("atomic %v, %d multi-table commits", st.AtomicCommits, st.MultiTableCommits)
		}
		for i, ident := range idents {
			checkExactly(t, cat, ident, models[i])
		}
		t.Logf("%s: %d multi-table commits, %d reads of the three tables", b.name, st.MultiTableCommits, reads.Load())
	})
}

// scanRows scans a loaded table with iceberg-go's scanner and counts its rows.
func scanRows(tbl *table.Table) (int64, error) {
	if tbl.CurrentSnapshot() == nil {
		return 0, nil
	}
	_, it, err := tbl.Scan().ToArrowRecords(context.Background())
	if err != nil {
		return 0, err
	}
	var n int64
	for rec, err := range it {
		if err != nil {
			return 0, err
		}
		n += rec.NumRows()
		rec.Release()
	}
	return n, nil
}
