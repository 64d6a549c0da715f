package iceberg_test

import (
	"context"
	"fmt"
	"io"
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
				fw, err := pqarrow.NewFileWriter(seed.Schema, io.Discard,
					parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd)),
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
			reportRows(b, benchRows)
		})
	}
}

// BenchmarkWriterAppend writes the same events through a Writer with default options into the embedded
// catalog (SQLite and a local folder), Close included, so every row is committed when the iteration ends.
func BenchmarkWriterAppend(b *testing.B) {
	for _, rows := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("batch=%d", rows), func(b *testing.B) {
			benchWriter(b, rows, nil)
		})
	}
}

// BenchmarkWriterAppendSlowCatalog injects 50 ms of latency into every catalog commit, with a flush every
// 1,000 rows: throughput must stay near the rate without latency (commit latency must not bound throughput).
func BenchmarkWriterAppendSlowCatalog(b *testing.B) {
	for _, latency := range []time.Duration{0, 50 * time.Millisecond} {
		b.Run(fmt.Sprintf("latency=%s", latency), func(b *testing.B) {
			benchWriter(b, 1000, func(cat *slowCatalog) { cat.latency = latency }, iceberg.WithFlushRows(1000))
		})
	}
}

func benchWriter(b *testing.B, rowsPerBatch int, tune func(*slowCatalog), opts ...iceberg.Option) {
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
	reportRows(b, benchRows)
	b.ReportMetric(float64(commits)/float64(b.N), "commits/op")
}

func reportRows(b *testing.B, rows int) {
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
