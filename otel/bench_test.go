package iceotel_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/catalog"
	"github.com/icewriter/iceberg/internal/nophook"
	"github.com/icewriter/iceberg/internal/seed"
	iceotel "github.com/icewriter/iceberg/otel"
)

// BenchmarkHooksCost appends 400,000 seed events in 1,000-row calls, sealing every 10,000 rows (40 batches, and
// commits as often as the loop cuts them: many events per second), through three writers measured alternately
// in each iteration, in turned order: no hooks, a no-op hook of every kind, and the OpenTelemetry plugin on an
// SDK (metrics collected at the end of each iteration, spans kept in memory). It reports each rate and the
// ratios x-noop and x-otel to the rate without hooks (goals: within noise, and at least 0.97).
func BenchmarkHooksCost(b *testing.B) {
	ctx := context.Background()
	const rows, perCall = 400_000, 1000
	g := seed.New(0, 7)
	var batches []arrow.RecordBatch
	for n := 0; n < rows; n += perCall {
		batches = append(batches, g.Batch(perCall))
	}
	cat, err := catalog.Open(ctx, "sqlite://"+filepath.Join(b.TempDir(), "catalog.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer cat.(icecatalog.Closer).Close()

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer mp.Shutdown(ctx)
	defer tp.Shutdown(ctx)
	otelHooks, err := iceotel.New(iceotel.WithMeterProvider(mp), iceotel.WithTracerProvider(tp))
	if err != nil {
		b.Fatal(err)
	}
	setups := []struct {
		name  string
		hooks []iceberg.Hook
	}{{"none", nil}, {"noop", []iceberg.Hook{nophook.Hook{}}}, {"otel", []iceberg.Hook{otelHooks}}}
	took := make([]time.Duration, len(setups))
	var commits int64
	run := func(i, s int) {
		ident := table.Identifier{"bench", fmt.Sprintf("%s_%d", setups[s].name, i)}
		start := time.Now()
		w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema), iceberg.WithFlushRows(10_000),
			iceberg.WithHooks(setups[s].hooks...))
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
		if setups[s].name == "otel" {
			var rm metricdata.ResourceMetrics
			if err := reader.Collect(ctx, &rm); err != nil {
				b.Fatal(err)
			}
			spans.Reset()
		}
		took[s] += time.Since(start)
		commits += w.Stats().Commits
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range setups {
			s := k
			if i%2 == 1 {
				s = len(setups) - 1 - k // turned order: drift of a shared machine falls on every setup alike
			}
			run(i, s)
		}
	}
	for s, st := range setups {
		b.ReportMetric(float64(rows)*float64(b.N)/took[s].Seconds(), "rows/s-"+st.name)
	}
	b.ReportMetric(took[0].Seconds()/took[1].Seconds(), "x-noop")
	b.ReportMetric(took[0].Seconds()/took[2].Seconds(), "x-otel")
	b.ReportMetric(float64(commits)/float64(b.N*len(setups)), "commits/run")
}
