//go:build integration

package integration_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/atomicread"
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
		reader := atomicread.Start(ctx, cat, idents)
		for k := 1; k <= steps; k++ {
			step(k)
			if k%5 == 0 {
				if err := r.Flush(ctx); err != nil {
					t.Fatal(err)
				}
				reader.Between(t)
			}
		}
		if err := r.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		reads, _ := reader.Stop(t)
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
		t.Logf("%s: %d multi-table commits, %d reads of the three tables", b.name, st.MultiTableCommits, reads)
	})
}
