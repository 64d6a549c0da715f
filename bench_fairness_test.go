package iceberg_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/seed"
)

// BenchmarkTwoWritersStall runs two writer IDs that commit continuously on one table (10 rows and a Flush in a
// loop each, embedded catalog) for 10 s and reports the longest time either went without a commit (goal: under
// 1 s) and the fewer commits of the two, beside the baseline of the same run: one writer alone for 5 s, its
// median and longest time between commits. The writers run in this process ("goroutines": the writers of one
// process also take turns at the table after conflicts) or in two child processes sharing the catalog file
// ("processes": only their jittered waits between attempts keep them fair).
func BenchmarkTwoWritersStall(b *testing.B) {
	for _, procs := range []bool{false, true} {
		b.Run(map[bool]string{false: "goroutines", true: "processes"}[procs], func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				alone := commitGaps(b, 1, 5*time.Second, procs)
				both := commitGaps(b, 2, 10*time.Second, procs)
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
		})
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

// commitGaps runs n writer IDs committing continuously on one new table for d, as goroutines or as child
// processes (TestCommitLoopChild), and returns, per writer, the times between its commits (the first measured
// from the start).
func commitGaps(b *testing.B, n int, d time.Duration, procs bool) [][]time.Duration {
	ctx := context.Background()
	dir := b.TempDir()
	cat := openCatalogAt(b, filepath.Join(dir, "catalog.db"))
	ident := table.Identifier{"bench", "fair"}
	createTable(b, ctx, cat, ident, seed.Schema)
	gaps := make([][]time.Duration, n)
	var wg sync.WaitGroup
	for i := range n {
		id := string(rune('a' + i))
		if !procs {
			wg.Go(func() {
				var err error
				if gaps[i], err = commitLoop(ctx, cat, ident, id, d, 0); err != nil {
					b.Error(err)
				}
			})
			continue
		}
		cmd := childProcess(b, dir, "TestCommitLoopChild", "ICEWRITER_CHILD_ID="+id, "ICEWRITER_CHILD_FOR="+d.String())
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		wg.Go(func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if v, ok := strings.CutPrefix(sc.Text(), childGapPrefix); ok {
					g, _ := time.ParseDuration(v)
					gaps[i] = append(gaps[i], g)
				}
			}
			if err := cmd.Wait(); err != nil {
				b.Errorf("child %s: %v", id, err)
			}
		})
	}
	wg.Wait()
	return gaps
}

// childGapPrefix starts the lines in which TestCommitLoopChild reports the time between two of its commits.
const childGapPrefix = "commit gap: "

// TestCommitLoopChild is one of commitGaps's child processes: it runs commitLoop with its writer ID for its
// duration and prints each gap.
func TestCommitLoopChild(t *testing.T) {
	dir := os.Getenv("ICEWRITER_CHILD_DIR")
	d, err := time.ParseDuration(os.Getenv("ICEWRITER_CHILD_FOR"))
	if dir == "" || err != nil {
		t.Skip("run by BenchmarkTwoWritersStall")
	}
	cat := openCatalogAt(t, filepath.Join(dir, "catalog.db"))
	n, _ := strconv.Atoi(os.Getenv("ICEWRITER_CHILD_COMMITS")) // 0: no limit
	gaps, err := commitLoop(context.Background(), cat, table.Identifier{"bench", "fair"}, os.Getenv("ICEWRITER_CHILD_ID"), d, n)
	for _, g := range gaps {
		fmt.Printf("%s%s\n", childGapPrefix, g)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// commitLoop commits 10 rows at a time with writer ID id on ident for d, or until it made n commits when n > 0,
// and returns the times between its commits (the first measured from the start).
func commitLoop(ctx context.Context, cat catalog.Catalog, ident table.Identifier, id string, d time.Duration, n int) ([]time.Duration, error) {
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithWriterID(id), iceberg.WithFlushInterval(0),
		iceberg.WithSmallFileCompactionEvery(0), iceberg.WithKeepSnapshots(0),
		iceberg.WithLogger(slog.New(slog.DiscardHandler))) // every lost race logs a retry
	if err != nil {
		return nil, err
	}
	defer w.Close(ctx)
	g := seed.New(int64(id[0]-'a')*1_000_000_000, 1)
	var gaps []time.Duration
	start := time.Now()
	last := start
	for time.Since(start) < d && (n <= 0 || len(gaps) < n) {
		if err := seedCommit(ctx, w, g, 10); err != nil {
			return gaps, err
		}
		now := time.Now()
		gaps = append(gaps, now.Sub(last))
		last = now
	}
	return gaps, nil
}
