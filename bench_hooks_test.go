package iceberg_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/nophook"
	"github.com/icewriter/iceberg/internal/seed"
)

// BenchmarkWriterAppendHooks appends benchRows events in 1,000-row calls, sealing every 10,000 rows (many
// batches and commits, so many events), with no hook and with a no-op hook of every kind, alternately in each
// iteration and in turned order, and reports x-noop: the rate with the hook over the rate without (goal: within
// noise; the OpenTelemetry plugin's cost is measured by the otel module's BenchmarkHooksCost).
func BenchmarkWriterAppendHooks(b *testing.B) {
	ctx := context.Background()
	batches := seedBatches(b, 1000)
	cat := openCatalog(b)
	var none, hooked time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range 2 {
			withHook := (k == 1) != (i%2 == 1)
			opts := []iceberg.Option{iceberg.WithCreate(seed.Schema), iceberg.WithFlushRows(10_000)}
			if withHook {
				opts = append(opts, iceberg.WithHooks(nophook.Hook{}))
			}
			start := time.Now()
			w, err := iceberg.NewWriter(ctx, cat, table.Identifier{"bench", fmt.Sprintf("hooks_%d_%d", i, k)}, opts...)
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range batches {
				if err := w.Write(ctx, r); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.Close(ctx); err != nil {
				b.Fatal(err)
			}
			if withHook {
				hooked += time.Since(start)
			} else {
				none += time.Since(start)
			}
		}
	}
	b.ReportMetric(float64(benchRows)*float64(b.N)/none.Seconds(), "rows/s")
	b.ReportMetric(none.Seconds()/hooked.Seconds(), "x-noop")
}
