package iceberg_test

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/seed"
)

// benchRows is the rows each benchmark iteration writes.
const benchRows = 200_000

// seedBatches pre-generates the events of one iteration, so generation is not what is measured.
func seedBatches(b *testing.B, rowsPerBatch int) []arrow.RecordBatch {
	g := seed.New(0, 7)
	var out []arrow.RecordBatch
	for n := 0; n < benchRows; n += rowsPerBatch {
		out = append(out, g.Batch(rowsPerBatch))
	}
	b.Cleanup(func() {
		for _, r := range out {
			r.Release()
		}
	})
	return out
}

// BenchmarkEncodeBaseline is the raw encode rate: one pqarrow FileWriter with zstd and otherwise default
// properties, one goroutine, writing the same batches to io.Discard (DESIGN.md). Writer benchmarks are read as
// a ratio against it.
func BenchmarkEncodeBaseline(b *testing.B) {
	for _, rows := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("batch=%d", rows), func(b *testing.B) {
			batches := seedBatches(b, rows)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				encodeBaseline(b, batches, 0)
			}
			reportRows(b, benchRows)
		})
	}
}

// encodeBaseline encodes the batches at the zstd level given (0: the codec's default).
func encodeBaseline(b *testing.B, batches []arrow.RecordBatch, level int) {
	props := []parquet.WriterProperty{parquet.WithCompression(compress.Codecs.Zstd)}
	if level != 0 {
		props = append(props, parquet.WithCompressionLevel(level))
	}
	fw, err := pqarrow.NewFileWriter(seed.Schema, io.Discard, parquet.NewWriterProperties(props...),
		pqarrow.DefaultWriterProps())
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range batches {
		if err := fw.WriteBuffered(r); err != nil {
			b.Fatal(err)
		}
	}
	if err := fw.Close(); err != nil {
		b.Fatal(err)
	}
}

// baselineRate measures the encode baseline's rows/s on the batches, best of three, outside the timer.
func baselineRate(b *testing.B, batches []arrow.RecordBatch) float64 {
	return baselineRateAt(b, batches, 0)
}

// baselineRateAt is baselineRate at a given zstd level.
func baselineRateAt(b *testing.B, batches []arrow.RecordBatch, level int) float64 {
	b.StopTimer()
	defer b.StartTimer()
	best := time.Duration(1<<63 - 1)
	for i := 0; i < 3; i++ {
		start := time.Now()
		encodeBaseline(b, batches, level)
		best = min(best, time.Since(start))
	}
	return float64(benchRows) / best.Seconds()
}

// BenchmarkWriterAppend writes the same events through a Writer with default options into the embedded
// catalog (SQLite and a local folder), Close included, so every row is committed when the iteration ends. It
// reports x-encode: its rate over the encode baseline measured on the same batches in the same run (goal: at
// least 0.8 at 1,000-row Write calls). Tables the writer creates use zstd level 1, which encodes about twice as
// fast as the codec's default level the baseline uses: x-encode-zstd1 is the rate over a baseline at level 1,
// the pipeline's own overhead with the codec's work equal.
func BenchmarkWriterAppend(b *testing.B) {
	for _, rows := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("batch=%d", rows), func(b *testing.B) {
			batches := seedBatches(b, rows)
			base := baselineRate(b, batches)
			base1 := baselineRateAt(b, batches, 1)
			rate := benchWriter(b, rows, nil)
			b.ReportMetric(rate/base, "x-encode")
			b.ReportMetric(rate/base1, "x-encode-zstd1")
		})
	}
}

// BenchmarkWriterAppendSlowCatalog injects 50 ms of latency into every catalog commit, with a flush every
// 1,000 rows, and reports x-no-latency: its rate over the same writer's without latency, measured alternately in
// the same iterations (goal: at least 0.8: commit latency must not bound throughput).
func BenchmarkWriterAppendSlowCatalog(b *testing.B) {
	var fast, slow time.Duration
	var commitsSlow int64
	for i := 0; i < b.N; i++ {
		for _, latency := range []time.Duration{0, 50 * time.Millisecond} {
			start := time.Now()
			c := writeOnce(b, 1000, func(cat *slowCatalog) { cat.latency = latency }, iceberg.WithFlushRows(1000))
			if latency == 0 {
				fast += time.Since(start)
			} else {
				slow += time.Since(start)
				commitsSlow += c
			}
		}
	}
	b.ReportMetric(float64(benchRows)*float64(b.N)/slow.Seconds(), "rows/s")
	b.ReportMetric(fast.Seconds()/slow.Seconds(), "x-no-latency")
	b.ReportMetric(float64(commitsSlow)/float64(b.N), "commits/op")
}

// writeOnce writes benchRows events through a new writer on a new table and returns its commits.
func writeOnce(b *testing.B, rowsPerBatch int, tune func(*slowCatalog), opts ...iceberg.Option) int64 {
	ctx := context.Background()
	b.StopTimer()
	batches := seedBatches(b, rowsPerBatch)
	cat := &slowCatalog{Catalog: openCatalog(b)}
	if tune != nil {
		tune(cat)
	}
	b.StartTimer()
	w, err := iceberg.NewWriter(ctx, cat, table.Identifier{"bench", "once"}, append([]iceberg.Option{iceberg.WithCreate(seed.Schema)}, opts...)...)
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
	return w.Stats().Commits
}

func benchWriter(b *testing.B, rowsPerBatch int, tune func(*slowCatalog), opts ...iceberg.Option) float64 {
	ctx := context.Background()
	batches := seedBatches(b, rowsPerBatch)
	cat := &slowCatalog{Catalog: openCatalog(b)}
	if tune != nil {
		tune(cat)
	}
	var commits int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ident := table.Identifier{"bench", fmt.Sprintf("t%d", i)}
		w, err := iceberg.NewWriter(ctx, cat, ident, append([]iceberg.Option{iceberg.WithCreate(seed.Schema)}, opts...)...)
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
		commits += w.Stats().Commits
	}
	rate := reportRows(b, benchRows)
	b.ReportMetric(float64(commits)/float64(b.N), "commits/op")
	return rate
}

func reportRows(b *testing.B, rows int) float64 {
	rate := float64(rows) * float64(b.N) / b.Elapsed().Seconds()
	b.ReportMetric(rate, "rows/s")
	return rate
}

// heapPeak starts sampling the Go heap every 2 ms (after a collection, so the start is the live heap); the
// function it returns stops sampling and returns the peak growth over the start, in bytes.
func heapPeak() func() uint64 {
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
		}
	}()
	return func() uint64 {
		close(stop)
		wg.Wait()
		if p := peak.Load(); p > base.HeapAlloc {
			return p - base.HeapAlloc
		}
		return 0
	}
}

// BenchmarkWriterLargeCall writes one call of benchRows seed rows, twice the flush policy's rows
// (WithFlushRows(benchRows/2)), Close included, and reports x-parts: its rate with the default two encoder slots
// (the batch written as two parts at once, two files) over its rate with one (WithMaxInFlight(1): one part, one
// file), measured alternately in the same iterations, and the same by CPU time (x-parts-cpu: what the second
// encoder costs). files and files-one-slot are the data files each wrote.
func BenchmarkWriterLargeCall(b *testing.B) {
	rec := seed.New(0, 7).Batch(benchRows)
	defer rec.Release()
	ctx := context.Background()
	var dur, cpu [2]time.Duration
	var files [2]int64
	for i := 0; i < b.N; i++ {
		for run, slots := range []int{2, 1} {
			w, err := iceberg.NewWriter(ctx, openCatalog(b), table.Identifier{"bench", fmt.Sprintf("large%d", run)},
				iceberg.WithCreate(seed.Schema), iceberg.WithFlushRows(benchRows/2), iceberg.WithMaxInFlight(slots))
			if err != nil {
				b.Fatal(err)
			}
			start, startCPU := time.Now(), cpuTime()
			if err := w.Write(ctx, rec); err != nil {
				b.Fatal(err)
			}
			if err := w.Close(ctx); err != nil {
				b.Fatal(err)
			}
			dur[run] += time.Since(start)
			cpu[run] += cpuTime() - startCPU
			files[run] = w.Stats().FilesWritten
		}
	}
	b.ReportMetric(float64(benchRows)*float64(b.N)/dur[0].Seconds(), "rows/s")
	b.ReportMetric(dur[1].Seconds()/dur[0].Seconds(), "x-parts")
	b.ReportMetric(cpu[1].Seconds()/cpu[0].Seconds(), "x-parts-cpu")
	b.ReportMetric(float64(files[0]), "files")
	b.ReportMetric(float64(files[1]), "files-one-slot")
}
