package iceberg_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/seed"
)

// BenchmarkUpsertRate upserts seed events of which 10% update existing keys (1,000-row calls) into a format
// version 2 table, committing every 20,000 rows, with the writer's defaults, and reports rows/s. It is the
// figure that scripts/bench-against.sh compares with an earlier commit's in the same minutes: against f06c358,
// the last commit whose v2 upserts wrote equality deletes, it is "the upsert rate with position deletes against
// the rate with equality deletes" of issue 18 as filed. It uses only what the first release had
// (updateBatches, openCatalog, WithFlushRows), so that it builds on old commits; BenchmarkUpsert10pct compares
// the two kinds of delete in one build.
func BenchmarkUpsertRate(b *testing.B) {
	batches := updateBatches(b, benchRows, 1000, 0.10)
	ctx := context.Background()
	var total time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		cat := openCatalog(b)
		w, err := iceberg.NewWriter(ctx, cat, table.Identifier{"bench", "t"},
			iceberg.WithCreate(seed.Schema, iceberg.IdentifierFields("id")), iceberg.WithFlushRows(20_000))
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC() // each run starts on a collected heap
		b.StartTimer()
		start := time.Now()
		for _, r := range batches {
			if err := w.Upsert(ctx, r); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Close(ctx); err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
	}
	b.ReportMetric(float64(benchRows)*float64(b.N)/total.Seconds(), "rows/s")
}
