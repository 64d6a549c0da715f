package iceberg_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/benchpair"
	"github.com/icewriter/iceberg/internal/seed"
)

// BenchmarkWriterSmallCalls writes the seed events through Write calls of 1, 10 and 1,000 rows (Close
// included), as sources that deliver one record at a time do. Goal (issue 13): 1-row calls at least 250,000
// rows/s; 10-row calls at least half the 1,000-row rate.
func BenchmarkWriterSmallCalls(b *testing.B) {
	const rows = 50_000
	for _, per := range []int{1, 10, 1000} {
		b.Run(fmt.Sprintf("rows=%d", per), func(b *testing.B) {
			ctx := context.Background()
			g := seed.New(0, 7)
			big := g.Batch(rows)
			defer big.Release()
			cat := openCatalog(b)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				w, err := iceberg.NewWriter(ctx, cat, table.Identifier{"bench", fmt.Sprintf("s%d", i)}, iceberg.WithCreate(seed.Schema))
				if err != nil {
					b.Fatal(err)
				}
				// The caller's records are made outside the timer, a few thousand at a time: what is measured is
				// Write, not arrow-go's slicing.
				for off := int64(0); off < rows; {
					b.StopTimer()
					var calls []arrow.RecordBatch
					for ; off < rows && len(calls) < 5000; off += int64(per) {
						calls = append(calls, big.NewSlice(off, off+int64(per)))
					}
					b.StartTimer()
					for _, r := range calls {
						if err := w.Write(ctx, r); err != nil {
							b.Fatal(err)
						}
					}
					b.StopTimer()
					for _, r := range calls {
						r.Release()
					}
					b.StartTimer()
				}
				if err := w.Close(ctx); err != nil {
					b.Fatal(err)
				}
			}
			reportRows(b, rows)
		})
	}
}

// BenchmarkCheckpointEvery400 writes 200,000 events in 400-row calls with a Checkpoint after each (as a Kafka
// consumer that checkpoints every poll does), default flush policy, Close included, and the same rows without
// checkpoints, as a pair in each iteration (which of the two runs first alternates). It reports files/op (goal:
// at most 5: checkpoints do not end files) and x-no-checkpoints, the rate over the run without them (goal: at
// least 0.9), as the median of the pairs' ratios by wall time and by the process's CPU time (x-no-checkpoints-cpu:
// steadier on a shared machine, where one 0.2 s run's wall time moves by 10–20%).
func BenchmarkCheckpointEvery400(b *testing.B) {
	ctx := context.Background()
	batches := seedBatches(b, 400)
	cat := openCatalog(b)
	wall, cpu := map[bool][]float64{}, map[bool][]float64{}
	var files int64
	for i := 0; i < b.N; i++ {
		order := []bool{false, true}
		if i%2 == 1 {
			order = []bool{true, false}
		}
		for _, ckpt := range order {
			// Both with a writer ID (its fence is a commit of its own), so the checkpoints are the difference.
			opts := []iceberg.Option{iceberg.WithCreate(seed.Schema), iceberg.WithWriterID(fmt.Sprintf("poll-%d", i))}
			if ckpt {
				opts = append(opts, iceberg.WithCheckpoints())
			}
			runtime.GC() // each run starts on a collected heap, not on the garbage of the one before
			start, cpu0 := time.Now(), benchpair.CPUTime()
			w, err := iceberg.NewWriter(ctx, cat, table.Identifier{"bench", fmt.Sprintf("ckpt%d-%t", i, ckpt)}, opts...)
			if err != nil {
				b.Fatal(err)
			}
			for j, r := range batches {
				if err := w.Write(ctx, r); err != nil {
					b.Fatal(err)
				}
				if ckpt {
					if err := w.Checkpoint(ctx, strconv.Itoa(j)); err != nil {
						b.Fatal(err)
					}
				}
			}
			if err := w.Close(ctx); err != nil {
				b.Fatal(err)
			}
			wall[ckpt] = append(wall[ckpt], time.Since(start).Seconds())
			cpu[ckpt] = append(cpu[ckpt], (benchpair.CPUTime() - cpu0).Seconds())
			if ckpt {
				files += w.Stats().FilesWritten
			}
		}
	}
	b.ReportMetric(float64(benchRows)/benchpair.Median(wall[true]), "rows/s")
	b.ReportMetric(benchpair.Ratio(wall[false], wall[true]), "x-no-checkpoints")
	b.ReportMetric(benchpair.Ratio(cpu[false], cpu[true]), "x-no-checkpoints-cpu")
	b.ReportMetric(float64(files)/float64(b.N), "files/op")
}
