package iceberg_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/benchpair"
	"github.com/icewriter/iceberg/internal/nophook"
	"github.com/icewriter/iceberg/internal/seed"
)

// BenchmarkWriterAppendHooks appends benchRows events in 1,000-row calls, sealing every 10,000 rows (many
// batches and commits, so many events), with no hook and with a no-op hook of every kind, one after the other in
// each iteration and in turned order, and reports x-noop and x-noop-cpu: the median over iterations of the rate
// with the hook over the rate without, by wall and by CPU time (goal: within noise; the OpenTelemetry plugin's
// cost is measured by the otel module's BenchmarkHooksCost).
func BenchmarkWriterAppendHooks(b *testing.B) {
	ctx := context.Background()
	batches := seedBatches(b, 1000)
	cat := openCatalog(b)
	var wall, cpu [2][]float64 // without and with the hook, per iteration: seconds
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range 2 {
			hooked := (k == 1) != (i%2 == 1)
			opts := []iceberg.Option{iceberg.WithCreate(seed.Schema), iceberg.WithFlushRows(10_000)}
			s := 0
			if hooked {
				opts, s = append(opts, iceberg.WithHooks(nophook.Hook{})), 1
			}
			runtime.GC() // the garbage of the run before is not this run's
			start, cpu0 := time.Now(), benchpair.CPUTime()
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
			wall[s] = append(wall[s], time.Since(start).Seconds())
			cpu[s] = append(cpu[s], (benchpair.CPUTime() - cpu0).Seconds())
		}
	}
	b.ReportMetric(float64(benchRows)/benchpair.Median(wall[0]), "rows/s")
	b.ReportMetric(benchpair.Ratio(wall[0], wall[1]), "x-noop")
	if cpu[0][0] > 0 {
		b.ReportMetric(benchpair.Ratio(cpu[0], cpu[1]), "x-noop-cpu")
	}
}
