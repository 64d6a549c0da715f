package iceberg_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/seed"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// BenchmarkCommitLatencyFlat makes many small commits (10 rows, Flush each) to a format-v2 table the writer
// created (keeping the last 100 snapshots) and reports the mean Flush latency of the last tenth against the
// first tenth: metadata maintenance must keep it flat (goal: at most 1.5x). It also reports the live Go heap
// (after a collection) once the first tenth committed and after the last commit: a long-running writer's memory
// must stay flat too (goal: last/first at most 1.5; it grew with every commit while committed metadata kept the
// files of every commit before it). ICEWRITER_BENCH_COMMITS sets the number of commits (default 10,000).
func BenchmarkCommitLatencyFlat(b *testing.B) {
	commits := envInt("ICEWRITER_BENCH_COMMITS", 10_000)
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		cat := openCatalog(b)
		w, err := iceberg.NewWriter(ctx, cat, table.Identifier{"bench", "flat"},
			iceberg.WithCreate(seed.Schema, iceberg.FormatVersion(2)), iceberg.WithKeepSnapshots(100))
		if err != nil {
			b.Fatal(err)
		}
		g := seed.New(0, 1)
		lat := make([]time.Duration, commits)
		var heapFirst uint64
		for c := 0; c < commits; c++ {
			if c == commits/10 {
				heapFirst = liveHeap()
			}
			rec := g.Batch(10)
			start := time.Now()
			if err := w.Write(ctx, rec); err != nil {
				b.Fatal(err)
			}
			if err := w.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			lat[c] = time.Since(start)
			rec.Release()
		}
		heapLast := liveHeap()
		if err := w.Close(ctx); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(heapFirst)/(1<<20), "live-heap-first-MiB")
		b.ReportMetric(float64(heapLast)/(1<<20), "live-heap-last-MiB")
		b.ReportMetric(float64(heapLast)/float64(heapFirst), "heap-last/first")
		tenth := commits / 10
		first, last := mean(lat[:tenth]), mean(lat[commits-tenth:])
		b.ReportMetric(float64(first.Microseconds())/1000, "first-tenth-ms")
		b.ReportMetric(float64(last.Microseconds())/1000, "last-tenth-ms")
		b.ReportMetric(float64(last)/float64(first), "last/first")
		tbl := w.Table()
		b.ReportMetric(float64(len(tbl.Metadata().Snapshots())), "snapshots")
	}
}

// liveHeap is the Go heap a collection leaves: what the process holds reachable.
func liveHeap() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func mean(ds []time.Duration) time.Duration {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds))
}

// BenchmarkPeakRSS runs a child process that generates and writes ICEWRITER_BENCH_RSS_ROWS seed events
// (default 10,000,000) with a 256 MiB memory limit and reports its peak RSS (VmHWM); goal: under 600 MiB.
func BenchmarkPeakRSS(b *testing.B) {
	rows := envInt("ICEWRITER_BENCH_RSS_ROWS", 10_000_000)
	for i := 0; i < b.N; i++ {
		dir := b.TempDir()
		cmd := exec.Command(os.Args[0], "-test.run=^TestRSSChild$")
		cmd.Env = append(os.Environ(), "ICEWRITER_RSS_DIR="+dir, fmt.Sprintf("ICEWRITER_RSS_ROWS=%d", rows))
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("child: %v\n%s", err, out)
		}
		var hwm float64
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "VmHWM-KiB "); ok {
				kib, _ := strconv.ParseFloat(v, 64)
				hwm = kib / 1024
			}
		}
		if hwm == 0 {
			b.Fatalf("child reported no VmHWM:\n%s", out)
		}
		b.ReportMetric(hwm, "peak-RSS-MiB")
		b.ReportMetric(float64(rows)/1e6, "Mrows")
	}
}

// TestRSSChild is the process BenchmarkPeakRSS measures.
func TestRSSChild(t *testing.T) {
	dir := os.Getenv("ICEWRITER_RSS_DIR")
	if dir == "" {
		t.Skip("run by BenchmarkPeakRSS")
	}
	rows := envInt("ICEWRITER_RSS_ROWS", 10_000_000)
	ctx := context.Background()
	cat := openCatalogAt(t, filepath.Join(dir, "catalog.db"))
	w, err := iceberg.NewWriter(ctx, cat, table.Identifier{"bench", "rss"}, iceberg.WithCreate(seed.Schema),
		iceberg.WithMemoryLimit(int64(envInt("ICEWRITER_RSS_LIMIT_MB", 256))<<20))
	if err != nil {
		t.Fatal(err)
	}
	g := seed.New(0, 1)
	for n := 0; n < rows; n += 10_000 {
		rec := g.Batch(10_000)
		if err := w.Write(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := w.Stats().RowsCommitted; got != int64(rows) {
		t.Fatalf("committed %d rows, want %d", got, rows)
	}
	status, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			fmt.Printf("VmHWM-KiB %s\n", strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
		}
	}
}

// BenchmarkCommitResponseDecode parses the table metadata a REST catalog returns with every commit
// (iceberg-go's REST client parses it whole; the writer builds its next commit on it), for tables of 20 and
// 100 snapshots made by the writer: the part of a commit's CPU that grows with the table's history.
func BenchmarkCommitResponseDecode(b *testing.B) {
	ctx := context.Background()
	for _, snapshots := range []int{20, 100} {
		b.Run(fmt.Sprintf("snapshots=%d", snapshots), func(b *testing.B) {
			cat := openCatalog(b)
			w, err := iceberg.NewWriter(ctx, cat, table.Identifier{"bench", "decode"},
				iceberg.WithCreate(seed.Schema, iceberg.FormatVersion(2)), iceberg.WithKeepSnapshots(snapshots))
			if err != nil {
				b.Fatal(err)
			}
			g := seed.New(0, 1)
			for c := 0; c < snapshots; c++ {
				rec := g.Batch(10)
				err := w.Write(ctx, rec)
				rec.Release()
				if err == nil {
					err = w.Flush(ctx)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			raw, err := json.Marshal(w.Table().Metadata())
			if err != nil {
				b.Fatal(err)
			}
			if err := w.Close(ctx); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := table.ParseMetadataBytes(raw); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(raw))/1024, "metadata-KiB")
		})
	}
}
