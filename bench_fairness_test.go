package iceberg_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/seed"
)

// BenchmarkTwoWritersStall runs two writer IDs that commit continuously on one table (10 rows and a Flush in a
// loop each, embedded catalog) for 10 s and reports the longest time either went without a commit (goal: under
// 1 s) and the fewer commits of the two, beside the baseline of the same run: one writer alone for 5 s, its
// median and longest time between commits.
func BenchmarkTwoWritersStall(b *testing.B) {
	for i := 0; i < b.N; i++ {
		alone := commitGaps(b, 1, 5*time.Second)
		both := commitGaps(b, 2, 10*time.Second)
		b.ReportMetric(ms(median(alone[0])), "alone-median-ms")
		b.ReportMetric(ms(slicesMax(alone[0])), "alone-longest-ms")
		var longest time.Duration
		fewest := len(both[0])
		for _, g := range both {
			longest = max(longest, slicesMax(g))
			fewest = min(fewest, len(g))
		}
		b.ReportMetric(ms(longest), "two-longest-stall-ms")
		b.ReportMetric(float64(fewest), "two-fewest-commits")
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	slices.Sort(s)
	return s[len(s)/2]
}

func slicesMax(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

// commitGaps runs n writer IDs committing continuously on one new table for d and returns, per writer, the
// times between its commits (the first measured from the start).
func commitGaps(b *testing.B, n int, d time.Duration) [][]time.Duration {
	ctx := context.Background()
	cat := openCatalog(b)
	ident := table.Identifier{"bench", "fair"}
	createTable(b, ctx, cat, ident, seed.Schema)
	gaps := make([][]time.Duration, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithWriterID(string(rune('a'+i))), iceberg.WithFlushInterval(0),
			iceberg.WithSmallFileCompaction(0), iceberg.WithKeepSnapshots(0))
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer w.Close(ctx)
			g := seed.New(int64(i)*1_000_000_000, 1)
			last := start
			for time.Since(start) < d {
				if err := seedCommit(ctx, w, g, 10); err != nil {
					b.Error(err)
					return
				}
				now := time.Now()
				gaps[i] = append(gaps[i], now.Sub(last))
				last = now
			}
		}()
	}
	wg.Wait()
	return gaps
}
