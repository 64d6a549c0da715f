package iceberg_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/seed"
)

// BenchmarkPartitionFanout is a user's high-cardinality partitioning: 200,000 seed events (user_id uniform in
// [0, 100000): 86,360 distinct values) written in 1,000-row Writes to a table partitioned by identity(user_id),
// with a 256 MiB memory limit and the default flush policy, Close included. Each iteration runs in a child
// process (TestPartitionFanoutChild) so that its peak RSS is its own: gc=default as a user runs it, gomemlimit
// with GOMEMLIMIT at 1.5 times the memory limit (the bound WithMemoryLimit's doc tells users to set).
//
// It reports rows/s (goal: at least 100,000), peak-RSS-MiB and rss/limit (goal: at most 1.5), the peak Go heap
// growth, the data files written (one per partition: Iceberg puts a file in one partition), encode-s and
// commit-s (Close's commit of them), and the floor: floor-files/s, the rate at which the machine writes the
// same two-row Parquet files (zstd, the table's codec) into new partition folders with nothing else
// (GOMAXPROCS goroutines, measured after the child), and x-floor, the writer's files/s while encoding over it.
// On a shared machine wall-clock rates swing with the load; the CPU figures swing less: cpu-us/file (the
// child's user and system CPU per file written), floor-cpu-us/file and rows/cpu-s.
// ICEWRITER_BENCH_FANOUT_ROWS sets the rows.
func BenchmarkPartitionFanout(b *testing.B) {
	rows := envInt("ICEWRITER_BENCH_FANOUT_ROWS", benchRows)
	const limit = iceberg.DefaultMemoryLimit
	for _, gc := range []struct{ name, env string }{
		{"gc=default", ""},
		{"gc=gomemlimit", fmt.Sprintf("GOMEMLIMIT=%d", limit*3/2)},
	} {
		b.Run(gc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				got := fanoutChild(b, rows, limit, gc.env)
				rss := got["VmHWM-KiB"] * 1024
				encodeRate := got["files"] / got["encode-seconds"]
				floor, floorCPU := smallFileFloor(b, 5000)
				b.ReportMetric(float64(rows)/got["seconds"], "rows/s")
				b.ReportMetric(rss/(1<<20), "peak-RSS-MiB")
				b.ReportMetric(rss/limit, "rss/limit")
				b.ReportMetric(got["peak-heap"]/(1<<20), "peak-heap-MiB")
				b.ReportMetric(got["files"], "files")
				b.ReportMetric(got["encode-seconds"], "encode-s")
				b.ReportMetric(got["seconds"]-got["encode-seconds"], "commit-s")
				b.ReportMetric(floor, "floor-files/s")
				b.ReportMetric(encodeRate/floor, "x-floor")
				cpuPerFile := got["cpu-seconds"] / got["files"]
				b.ReportMetric(cpuPerFile*1e6, "cpu-us/file")
				b.ReportMetric(floorCPU*1e6, "floor-cpu-us/file")
				b.ReportMetric(float64(rows)/got["cpu-seconds"], "rows/cpu-s")
			}
		})
	}
}

// fanoutChild runs TestPartitionFanoutChild with env added and returns the figures it printed.
func fanoutChild(b *testing.B, rows int, limit int64, env string) map[string]float64 {
	cmd := exec.Command(os.Args[0], "-test.run=^TestPartitionFanoutChild$")
	cmd.Env = append(os.Environ(), "ICEWRITER_FANOUT_DIR="+b.TempDir(), fmt.Sprintf("ICEWRITER_FANOUT_ROWS=%d", rows),
		fmt.Sprintf("ICEWRITER_FANOUT_LIMIT=%d", limit))
	if env != "" {
		cmd.Env = append(cmd.Env, env)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("child: %v\n%s", err, out)
	}
	got := map[string]float64{
		"cpu-seconds": (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds(),
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "fanout "); ok {
			if name, v, ok := strings.Cut(rest, " "); ok {
				got[name], _ = strconv.ParseFloat(v, 64)
			}
		}
	}
	if got["seconds"] == 0 || got["VmHWM-KiB"] == 0 || got["encode-seconds"] == 0 {
		b.Fatalf("child reported no figures:\n%s", out)
	}
	return got
}

// TestPartitionFanoutChild is the process BenchmarkPartitionFanout measures: rows are generated as they are
// written (a 1,000-row batch at a time), as a user's source would hand them over. The encoding ends when the
// files written stop growing (Stats, polled every 10 ms).
func TestPartitionFanoutChild(t *testing.T) {
	dir := os.Getenv("ICEWRITER_FANOUT_DIR")
	if dir == "" {
		t.Skip("run by BenchmarkPartitionFanout")
	}
	rows := envInt("ICEWRITER_FANOUT_ROWS", benchRows)
	limit := int64(envInt("ICEWRITER_FANOUT_LIMIT", iceberg.DefaultMemoryLimit))
	ctx := context.Background()
	cat := openCatalogAt(t, filepath.Join(dir, "catalog.db"))
	w, err := iceberg.NewWriter(ctx, cat, table.Identifier{"bench", "fanout"},
		iceberg.WithCreate(seed.Schema, iceberg.PartitionBy("identity(user_id)")), iceberg.WithMemoryLimit(limit))
	if err != nil {
		t.Fatal(err)
	}
	g := seed.New(0, 1)
	users := map[int64]struct{}{}
	if path := os.Getenv("ICEWRITER_FANOUT_PROFILE"); path != "" {
		defer profileAtPeakRSS(t, path)()
	}
	peak := heapPeak()
	start := time.Now()
	var encoded time.Duration
	stop := make(chan struct{})
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		var files int64
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			if n := w.Stats().FilesWritten; n != files {
				files, encoded = n, time.Since(start)
			}
		}
	}()
	for n := 0; n < rows; n += 1000 {
		rec := g.Batch(min(1000, rows-n))
		for _, u := range rec.Column(1).(*array.Int64).Int64Values() {
			users[u] = struct{}{}
		}
		if err := w.Write(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	close(stop)
	<-polled
	heap := peak()
	st := w.Stats()
	if st.RowsCommitted != int64(rows) {
		t.Fatalf("committed %d rows, want %d", st.RowsCommitted, rows)
	}
	fmt.Printf("fanout seconds %f\nfanout encode-seconds %f\nfanout peak-heap %d\nfanout files %d\nfanout partitions %d\n",
		elapsed.Seconds(), encoded.Seconds(), heap, st.FilesWritten, len(users))
	status, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			fmt.Printf("fanout VmHWM-KiB %s\n", strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
		}
	}
}

// smallFileFloor returns the files/s at which GOMAXPROCS goroutines write n two-row seed files with pqarrow
// (zstd, otherwise default properties), each into a folder of its own under a temporary name then renamed into
// place, as the writer's local storage does: the least one file per partition costs on this machine. cpu is
// the process's CPU seconds (user and system) per file meanwhile.
func smallFileFloor(b *testing.B, n int) (rate, cpu float64) {
	dir := b.TempDir()
	rec := seed.New(0, 1).Batch(2)
	defer rec.Release()
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd))
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	var failed error
	var mu sync.Mutex
	cpu0 := processCPU()
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				if err := writeSmallFile(filepath.Join(dir, "data", fmt.Sprintf("user_id=%d", i)), rec, props); err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	if failed != nil {
		b.Fatal(failed)
	}
	return float64(n) / time.Since(start).Seconds(), (processCPU() - cpu0) / float64(n)
}

// processCPU is the CPU seconds (user and system) the process has used.
func processCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func writeSmallFile(folder string, rec arrow.RecordBatch, props *parquet.WriterProperties) error {
	if err := os.MkdirAll(folder, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(folder, ".tmp")
	if err != nil {
		return err
	}
	fw, err := pqarrow.NewFileWriter(seed.Schema, f, props, pqarrow.DefaultWriterProps())
	if err != nil {
		return err
	}
	if err := fw.WriteBuffered(rec); err != nil {
		return err
	}
	if err := fw.Close(); err != nil { // closes f too
		return err
	}
	return os.Rename(f.Name(), filepath.Join(folder, "00000-0-data.parquet"))
}

// profileAtPeakRSS samples the process's resident set every 100 ms and, at each new high, writes a heap profile
// to path and the runtime's memory metrics to path+".metrics" (where RSS goes: live heap, the GC's goal, heap
// released or free, stacks, other runtime memory). The returned function stops it.
func profileAtPeakRSS(t *testing.T, path string) func() {
	stop, done := make(chan struct{}), make(chan struct{})
	names := []string{"/memory/classes/heap/objects:bytes", "/memory/classes/heap/unused:bytes",
		"/memory/classes/heap/free:bytes", "/memory/classes/heap/released:bytes", "/memory/classes/heap/stacks:bytes",
		"/memory/classes/total:bytes", "/gc/heap/goal:bytes", "/gc/heap/live:bytes", "/gc/cycles/total:gc-cycles"}
	go func() {
		defer close(done)
		var high int64
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			rss := residentBytes()
			if rss <= high {
				continue
			}
			high = rss
			f, err := os.Create(path)
			if err != nil {
				t.Error(err)
				return
			}
			_ = pprof.WriteHeapProfile(f)
			f.Close()
			samples := make([]metrics.Sample, len(names))
			for i, n := range names {
				samples[i].Name = n
			}
			metrics.Read(samples)
			var out strings.Builder
			fmt.Fprintf(&out, "rss %d\n", rss)
			for _, s := range samples {
				fmt.Fprintf(&out, "%s %d\n", s.Name, s.Value.Uint64())
			}
			_ = os.WriteFile(path+".metrics", []byte(out.String()), 0o644)
		}
	}()
	return func() {
		close(stop)
		<-done
	}
}

// residentBytes is the process's resident set (VmRSS), 0 when unknown.
func residentBytes() int64 {
	status, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024
		}
	}
	return 0
}
