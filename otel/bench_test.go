package iceotel_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go/table"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/benchpair"
	"github.com/icewriter/iceberg/internal/nophook"
	"github.com/icewriter/iceberg/internal/seed"
	"github.com/icewriter/iceberg/internal/tabletest"
	iceotel "github.com/icewriter/iceberg/otel"
)

// BenchmarkHooksCost appends 400,000 seed events in 1,000-row calls, sealing every 10,000 rows (40 batches, and
// commits as often as the loop cuts them: many events per second), through three writers measured one after
// the other in each iteration, in turned order: no hooks, a no-op hook of every kind, and the OpenTelemetry
// plugin on an SDK (metrics collected at the end of each run, spans kept in memory). It reports each setup's
// rate and, against the run without hooks of the same iteration, the median ratios x-noop and x-otel of the
// wall time and x-noop-cpu and x-otel-cpu of the process's CPU time (goals: within noise, and at least 0.97).
// Pairing runs of one iteration and taking medians keeps the drift and bursts of a shared machine out of the
// ratios; CPU time is what the hooks add, whatever else the machine runs.
func BenchmarkHooksCost(b *testing.B) {
	ctx := context.Background()
	const rows, perCall = 400_000, 1000
	g := seed.New(0, 7)
	var batches []arrow.RecordBatch
	for n := 0; n < rows; n += perCall {
		batches = append(batches, g.Batch(perCall))
	}
	cat := tabletest.TempCatalog(b)

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
	wall := make([][]float64, len(setups)) // per setup, per iteration: seconds
	cpu := make([][]float64, len(setups))
	var commits int64
	run := func(i, s int) {
		ident := table.Identifier{"bench", fmt.Sprintf("%s_%d", setups[s].name, i)}
		runtime.GC() // the garbage of the run before is not this run's
		start, cpu0 := time.Now(), benchpair.CPUTime()
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
		wall[s] = append(wall[s], time.Since(start).Seconds())
		cpu[s] = append(cpu[s], (benchpair.CPUTime() - cpu0).Seconds())
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
		b.ReportMetric(float64(rows)/benchpair.Median(wall[s]), "rows/s-"+st.name)
	}
	b.ReportMetric(benchpair.Ratio(wall[0], wall[1]), "x-noop")
	b.ReportMetric(benchpair.Ratio(wall[0], wall[2]), "x-otel")
	if cpu[0][0] > 0 {
		b.ReportMetric(benchpair.Ratio(cpu[0], cpu[1]), "x-noop-cpu")
		b.ReportMetric(benchpair.Ratio(cpu[0], cpu[2]), "x-otel-cpu")
	}
	b.ReportMetric(float64(commits)/float64(b.N*len(setups)), "commits/run")
}

// BenchmarkHookEventsPerCommit hands the plugin the events of one commit of one batch (batch sealed, file
// written, commit attempt, committed: four counters, six histograms, a span with a child span) on an SDK, and
// reports the CPU time they cost per commit: what the plugin adds to a writer is this times its commits per
// second (a gauge collection, once per scrape, is not counted).
func BenchmarkHookEventsPerCommit(b *testing.B) {
	ctx := context.Background()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewNoopExporter()))
	defer mp.Shutdown(ctx)
	defer tp.Shutdown(ctx)
	h, err := iceotel.New(iceotel.WithMeterProvider(mp), iceotel.WithTracerProvider(tp))
	if err != nil {
		b.Fatal(err)
	}
	ident := table.Identifier{"bench", "events"}
	now := time.Now()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		seq := int64(i + 1)
		h.OnBatchSealed(iceberg.BatchSealed{Table: ident, WriterID: "w", Seq: seq, Rows: 10_000, Bytes: 1 << 20,
			Open: time.Second, At: now})
		h.OnFileWritten(iceberg.FileWritten{Table: ident, WriterID: "w", Seq: seq, Path: "f.parquet", Rows: 10_000,
			Bytes: 300 << 10, Encode: 50 * time.Millisecond, At: now})
		h.OnCommitAttempt(iceberg.CommitAttempt{Table: ident, WriterID: "w", Kind: iceberg.KindRun, What: "commit run",
			Attempt: 1, Start: now, Duration: 5 * time.Millisecond, Sent: true})
		h.OnCommitted(iceberg.CommitInfo{SnapshotID: seq, Rows: 10_000, Files: 1, FirstSeq: seq, LastSeq: seq,
			Batches: 1, Attempts: 1, FileBytes: 300 << 10, Duration: 6 * time.Millisecond, CommitTime: now,
			Table: ident, WriterID: "w"})
	}
}
