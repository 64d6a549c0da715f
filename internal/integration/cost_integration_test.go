//go:build integration

package integration_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	icecatalog "github.com/apache/iceberg-go/catalog"

	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/benchpair"
	"github.com/icewriter/iceberg/internal/faultproxy"
	"github.com/icewriter/iceberg/internal/seed"
	"github.com/icewriter/iceberg/internal/testenv"
)

// The remote-cost workload: costCommits commits of costCommitRows rows each, written in costCallRows-row calls.
// Keyed cases upsert, and each commit's first tenth of rows updates the previous commit's last tenth.
const (
	costCommits    = 20
	costCommitRows = 50_000
	costCallRows   = 10_000
)

// costCommitCount is costCommits, or ICEWRITER_COST_COMMITS: 20 commits run no background pass (small-file
// compaction is due every 32 commits on the tables the writer creates), 64 run two, and what they cost
// is then the difference from the 20-commit figures.
func costCommitCount(b *testing.B) int {
	v := os.Getenv("ICEWRITER_COST_COMMITS")
	if v == "" {
		return costCommits
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("ICEWRITER_COST_COMMITS=%q: want a positive number of commits", v)
	}
	return n
}

// costCase is one table layout whose remote cost is measured.
type costCase struct {
	name    string
	mode    iceberg.Mode
	keyed   bool
	version int
}

var costCases = []costCase{
	{"append-v2", iceberg.MergeOnRead, false, 2},
	{"merge-on-read-v2", iceberg.MergeOnRead, true, 2},
	{"merge-on-read-v3", iceberg.MergeOnRead, true, 3},
	{"copy-on-write-v2", iceberg.CopyOnWrite, true, 2},
}

// costRun is what one run of the workload cost: the writer process's CPU, the commits it made, the bytes of
// the files those commits added, and what the proxies in front of the catalog and S3 saw during the writes
// (setup, the table's creation, is counted apart).
type costRun struct {
	cpu                time.Duration
	usage              procUsage // the process's user and system CPU, syscalls and context switches
	allocBytes         uint64    // bytes the process allocated on the Go heap during the writes
	rows, commits      int64
	fileBytes          int64
	setupCat, setupS3  faultproxy.Tally
	catalog, s3        faultproxy.Tally
	wall               time.Duration
	attempts, conflict int
}

// costCPURuns is how many runs of each catalog, interleaved, the CPU figures take the least of. Other
// processes on the machine inflate a run's CPU time (shared caches and cores) but never deflate it, so the
// least of a few runs is the steadiest estimate of the writer's own cost, and interleaving exposes both
// catalogs to the same spells of load.
const costCPURuns = 2

// leastCPU returns whichever run used less CPU (a zero run counts as none yet).
func leastCPU(a, b costRun) costRun {
	if a.rows == 0 || b.cpu < a.cpu {
		return b
	}
	return a
}

// procUsage is what this process has used so far: the writer's own, never the servers' (they run in other
// processes). User and system CPU apart, because the servers' side of a loopback socket charges the kernel's
// work to whichever process makes the call; read and write syscalls (/proc/self/io, Linux; zero elsewhere),
// sockets and files alike; context switches the process's threads gave up (waits: a futex, epoll or sleep).
type procUsage struct {
	user, sys             time.Duration
	readCalls, writeCalls int64
	voluntary             int64
}

// cpu is user + system CPU.
func (u procUsage) cpu() time.Duration { return u.user + u.sys }

func (u procUsage) sub(v procUsage) procUsage {
	return procUsage{user: u.user - v.user, sys: u.sys - v.sys, readCalls: u.readCalls - v.readCalls,
		writeCalls: u.writeCalls - v.writeCalls, voluntary: u.voluntary - v.voluntary}
}

// processUsage reads the process's usage so far.
func processUsage() procUsage {
	var u procUsage
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		u.user, u.sys = time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
		u.voluntary = ru.Nvcsw
	}
	if data, err := os.ReadFile("/proc/self/io"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			k, v, ok := strings.Cut(line, ": ")
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			switch {
			case ok && k == "syscr":
				u.readCalls = n
			case ok && k == "syscw":
				u.writeCalls = n
			}
		}
	}
	return u
}

// heapAllocated is how many bytes this process has allocated on the Go heap so far.
func heapAllocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// runCost writes the workload into a new table of cat. The proxies, when given, are tallied around it.
func runCost(b *testing.B, cat icecatalog.Catalog, tc costCase, catP, s3P *faultproxy.Proxy) costRun {
	b.Helper()
	ctx := context.Background()
	tally := func() (faultproxy.Tally, faultproxy.Tally) {
		if catP == nil {
			return faultproxy.Tally{}, faultproxy.Tally{}
		}
		return catP.Tally(), s3P.Tally()
	}
	var run costRun
	cat0, s30 := tally()
	create := []iceberg.CreateOption{iceberg.FormatVersion(tc.version)}
	if tc.keyed {
		create = append(create, iceberg.IdentifierFields("id"))
	}
	w, err := iceberg.NewWriter(ctx, cat, newIdent("cost"), iceberg.WithCreate(seed.Schema, create...),
		iceberg.WithMode(tc.mode), iceberg.WithFlushInterval(0), iceberg.WithFlushRows(costCommitRows),
		iceberg.WithOnCommit(func(ci iceberg.CommitInfo) {
			run.fileBytes += ci.FileBytes
			run.attempts += ci.Attempts
			run.conflict += ci.Conflicts
		}))
	if err != nil {
		b.Fatal(err)
	}
	cat1, s31 := tally()
	run.setupCat, run.setupS3 = cat1.Sub(cat0), s31.Sub(s30)
	if dir := os.Getenv("ICEWRITER_COST_CPUPROFILE"); dir != "" && catP == nil {
		stop := startCPUProfile(b, dir, tc.name, cat)
		defer stop()
	}
	use0, alloc0, start := processUsage(), heapAllocated(), time.Now()
	for c, commits := 0, costCommitCount(b); c < commits; c++ {
		// Keys are consecutive: a keyed commit starts a tenth of a commit before the previous one ended, so
		// its first tenth updates the previous commit's last tenth.
		first := int64(c) * costCommitRows
		if tc.keyed {
			first = int64(c) * (costCommitRows - costCommitRows/10)
		}
		for off := 0; off < costCommitRows; off += costCallRows {
			rec := seed.New(first+int64(off), uint64(c*100+off)).Batch(costCallRows)
			if tc.keyed {
				err = w.Upsert(ctx, rec)
			} else {
				err = w.Write(ctx, rec)
			}
			rec.Release()
			if err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Flush(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		b.Fatal(err)
	}
	run.usage, run.allocBytes, run.wall = processUsage().sub(use0), heapAllocated()-alloc0, time.Since(start)
	run.cpu = run.usage.cpu()
	st := w.Stats()
	run.rows, run.commits = st.RowsCommitted, st.Commits
	cat2, s32 := tally()
	run.catalog, run.s3 = cat2.Sub(cat1), s32.Sub(s31)
	return run
}

// BenchmarkRemoteCost measures what writing costs against a real REST catalog and S3 (SeaweedFS on loopback)
// beside the embedded catalog in the same run: the writer's own CPU per million rows (process CPU; the servers
// run in other processes), split into user and system time, with the process's read and write syscalls and
// waits (voluntary context switches) per commit; catalog and S3 requests by kind per commit and per million rows, counted by a proxy
// in front of each server, and the bytes uploaded against the bytes of the files the commits added. Run it with
//
//	bash scripts/integration.sh bench -run '^$' -bench RemoteCost
func BenchmarkRemoteCost(b *testing.B) {
	defer slog.SetLogLoggerLevel(slog.SetLogLoggerLevel(slog.LevelWarn)) // no line per commit
	restAddr := strings.TrimPrefix(testenv.Get(b, testenv.RESTURI), "rest://")
	catP, err := faultproxy.Start(restAddr, faultproxy.Config{Classify: traced(faultproxy.RESTKind)})
	if err != nil {
		b.Fatal(err)
	}
	defer catP.Close()
	s3P, err := faultproxy.Start(testenv.Get(b, testenv.SeaweedS3Endpoint), faultproxy.Config{Classify: traced(faultproxy.S3Kind)})
	if err != nil {
		b.Fatal(err)
	}
	defer s3P.Close()
	// The proxies run in this process, so their CPU would count as the writer's: CPU is measured on a run
	// straight to the servers, requests on a run through the proxies.
	direct := openREST(b)
	rest := openRESTAt(b, catP.Addr(), s3P.URL())
	embedded := openEmbedded(b)
	// ICEWRITER_COST_ONLY=rest or embedded runs only that catalog's CPU runs and no proxied run: a whole-process
	// profiler (perf record, perf stat, strace -c) then sees one catalog's writer alone. ICEWRITER_COST_ONLY=requests
	// runs only the proxied run: the request counts, which do not depend on the machine's load, in a fifth of
	// the time (its CPU metrics are then NaN: no CPU run).
	only := os.Getenv("ICEWRITER_COST_ONLY")
	if only != "" && only != "rest" && only != "embedded" && only != "requests" {
		b.Fatalf("ICEWRITER_COST_ONLY=%q: want rest, embedded or requests", only)
	}
	type result struct {
		tc                costCase
		emb, direct, rest costRun
	}
	var results []result
	for _, tc := range costCases {
		r := result{tc: tc}
		b.Run(tc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				r.emb, r.direct = costRun{}, costRun{}
				for k := 0; k < costCPURuns && only != "requests"; k++ {
					if only != "rest" {
						r.emb = leastCPU(r.emb, runCost(b, embedded, tc, nil, nil))
					}
					if only != "embedded" {
						r.direct = leastCPU(r.direct, runCost(b, direct, tc, nil, nil))
					}
				}
				if only == "" || only == "requests" {
					r.rest = runCost(b, rest, tc, catP, s3P)
				}
			}
			perM := func(d time.Duration, rows int64) float64 { return d.Seconds() / float64(rows) * 1e6 }
			b.ReportMetric(perM(r.emb.cpu, r.emb.rows), "emb-cpu-s/Mrows")
			b.ReportMetric(perM(r.direct.cpu, r.direct.rows), "rest-cpu-s/Mrows")
			b.ReportMetric(r.direct.cpu.Seconds()/r.emb.cpu.Seconds(), "cpu-x-embedded")
			// The split of the two runs' CPU, and the syscalls behind the system part.
			b.ReportMetric(perM(r.emb.usage.user, r.emb.rows), "emb-user-s/Mrows")
			b.ReportMetric(perM(r.emb.usage.sys, r.emb.rows), "emb-sys-s/Mrows")
			b.ReportMetric(perM(r.direct.usage.user, r.direct.rows), "rest-user-s/Mrows")
			b.ReportMetric(perM(r.direct.usage.sys, r.direct.rows), "rest-sys-s/Mrows")
			perC := func(n int64, commits int64) float64 { return float64(n) / float64(commits) }
			b.ReportMetric(perC(r.emb.usage.writeCalls, r.emb.commits), "emb-writes/commit")
			b.ReportMetric(perC(r.direct.usage.writeCalls, r.direct.commits), "rest-writes/commit")
			b.ReportMetric(perC(r.emb.usage.readCalls, r.emb.commits), "emb-reads/commit")
			b.ReportMetric(perC(r.direct.usage.readCalls, r.direct.commits), "rest-reads/commit")
			b.ReportMetric(perC(r.emb.usage.voluntary, r.emb.commits), "emb-waits/commit")
			b.ReportMetric(perC(r.direct.usage.voluntary, r.direct.commits), "rest-waits/commit")
			perCommit := func(bytes uint64, commits int64) float64 { return float64(bytes) / float64(commits) / (1 << 20) }
			b.ReportMetric(perCommit(r.emb.allocBytes, r.emb.commits), "emb-alloc-MiB/commit")
			b.ReportMetric(perCommit(r.direct.allocBytes, r.direct.commits), "rest-alloc-MiB/commit")
			b.ReportMetric(float64(r.rest.catalog.Total())/float64(r.rest.commits), "catalog-req/commit")
			b.ReportMetric(float64(r.rest.s3.Total())/float64(r.rest.commits), "s3-req/commit")
			b.ReportMetric(float64(r.rest.s3.Total())/float64(r.rest.rows)*1e6, "s3-req/Mrows")
			if r.rest.fileBytes > 0 {
				var up int64
				for _, n := range r.rest.s3.BytesIn {
					up += n
				}
				b.ReportMetric(float64(up)/float64(r.rest.fileBytes), "upload-x-files")
			}
		})
		results = append(results, r)
	}
	// Printed, not logged: a parent benchmark's log is dropped when its sub-benchmarks pass.
	for _, r := range results {
		x := r.rest
		if x.commits == 0 {
			continue // not selected by -bench
		}
		fmt.Printf("\n== %s: %d rows, %d commits (%d attempts, %d conflicts); writer CPU %.2fs (user %.2fs, sys %.2fs), wall %.1fs (embedded %.2fs (%.2fs, %.2fs), %.1fs)\n",
			r.tc.name, x.rows, x.commits, x.attempts, x.conflict, r.direct.cpu.Seconds(), r.direct.usage.user.Seconds(),
			r.direct.usage.sys.Seconds(), r.direct.wall.Seconds(), r.emb.cpu.Seconds(), r.emb.usage.user.Seconds(),
			r.emb.usage.sys.Seconds(), r.emb.wall.Seconds())
		fmt.Printf("   connections: catalog %d, s3 %d; setup (create): catalog %v, s3 %v\n",
			x.catalog.Connections, x.s3.Connections, sorted(x.setupCat.Requests), sorted(x.setupS3.Requests))
		fmt.Printf("   %-26s %10s %12s %14s\n", "request", "total", "per commit", "per M rows")
		for _, side := range []struct {
			name string
			t    faultproxy.Tally
		}{{"catalog", x.catalog}, {"s3", x.s3}} {
			for _, k := range slices.Sorted(maps.Keys(side.t.Requests)) {
				n := side.t.Requests[k]
				fmt.Printf("   %-26s %10d %12.2f %14.1f\n", side.name+" "+k, n, float64(n)/float64(x.commits),
					float64(n)/float64(x.rows)*1e6)
			}
		}
		var up int64
		for _, n := range x.s3.BytesIn {
			up += n
		}
		fmt.Printf("   uploaded %.1f MiB for %.1f MiB of files the commits added\n", float64(up)/(1<<20), float64(x.fileBytes)/(1<<20))
	}
}

// startCPUProfile profiles a run that goes straight to its servers into dir (ICEWRITER_COST_CPUPROFILE), one
// file per case and catalog (rest or embedded): where the writer's CPU goes on each, to compare with
// `go tool pprof -diff_base`. It returns the function that stops the profile.
func startCPUProfile(b *testing.B, dir, name string, cat icecatalog.Catalog) func() {
	b.Helper()
	kind := "embedded"
	if cat.CatalogType() == icecatalog.REST {
		kind = "rest"
	}
	stop, err := benchpair.StartCPUProfile(filepath.Join(dir, name+"-"+kind+".pprof"))
	if err != nil {
		b.Fatal(err)
	}
	return stop
}

// traced prints each request with its kind to stderr when ICEWRITER_COST_TRACE is set: where a count comes
// from.
func traced(kind func(*http.Request) string) func(*http.Request) string {
	if os.Getenv("ICEWRITER_COST_TRACE") == "" {
		return kind
	}
	return func(r *http.Request) string {
		k := kind(r)
		fmt.Fprintf(os.Stderr, "request %-24s %s %s %s\n", k, r.Method, r.URL.RequestURI(), r.Header.Get("Range"))
		return k
	}
}

// sorted prints a tally's counts in key order.
func sorted(m map[string]int64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}
