package kafka_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/catalog"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// backend is where a test's table lives: the catalog member processes open (URI and properties) and the
// test's own handle on it.
type backend struct {
	uri   string
	props map[string]string
	cat   icecatalog.Catalog
}

// embedded is a fresh embedded catalog (SQLite, local folder).
func embedded(t testing.TB) backend {
	t.Helper()
	uri := "sqlite://" + filepath.Join(t.TempDir(), "catalog.db")
	cat, err := catalog.Open(context.Background(), uri)
	if err != nil {
		t.Fatal(err)
	}
	return backend{uri: uri, cat: cat}
}

// benchParts is the topic's partitions in the benchmarks: an even share for 1, 2 and 4 members.
const benchParts = 8

// benchRecords is how many records a benchmark run writes: ICEWRITER_KAFKA_BENCH_RECORDS, default 1,000,000.
func benchRecords() int {
	if n, err := strconv.Atoi(os.Getenv("ICEWRITER_KAFKA_BENCH_RECORDS")); err == nil && n > 0 {
		return n
	}
	return 1_000_000
}

// holdFetches makes the cluster hold every fetch until the returned function is called: the members join the
// group and get their partitions before any of them reads a record.
func holdFetches(c *kfake.Cluster) (release func()) {
	released := make(chan struct{})
	c.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		select {
		case <-released:
			c.DropControl()
		default:
			c.KeepControl()
			c.SleepControl(func() { <-released }) // kgo fetches on a connection of their own
		}
		return nil, nil, false
	})
	return sync.OnceFunc(func() { close(released) })
}

// benchFlush is the members' flush interval: ICEWRITER_KAFKA_BENCH_FLUSH (a duration), default the writer's 1s.
func benchFlush() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("ICEWRITER_KAFKA_BENCH_FLUSH")); err == nil && d > 0 {
		return d
	}
	return iceberg.DefaultFlushInterval
}

// BenchmarkSinkMembers is the embedded-catalog variant of the scale-out benchmark (SQLite catalog, local
// folder): see benchMembers. Run with -benchtime 1x.
func BenchmarkSinkMembers(b *testing.B) {
	benchMembers(b, func(b *testing.B) backend { return embedded(b) })
}

// benchMembers runs 1, 2 and 4 member processes (this test binary, re-executed) writing one table. The
// records are produced first, and the cluster holds every fetch until the group is stable with every member
// assigned its share of the partitions. It reports per member count:
//   - rows/s: records per second from the fetches' release until the table's positions cover them all (read
//     every 50 ms);
//   - conflicts/commit: catalog conflicts the members' commits met, per commit;
//   - cpu-s/Mrec: the member processes' CPU (user + system, from their rusage, start to exit) per million
//     records; broker-cpu-s/Mrec the benchmark process's own while the members ran (the in-process cluster
//     serving their fetches, and the positions polling);
//   - commit-ms: mean duration of a commit (run formed to committed, retries included); attempt-ms: mean
//     duration of the attempt that applied (build and catalog commit).
func benchMembers(b *testing.B, open func(b *testing.B) backend) {
	for _, n := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			for range b.N {
				runMembersBench(b, open(b), n)
			}
		})
	}
}

// selfCPU is this process's CPU time so far (user + system): the in-process cluster's, mostly.
func selfCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func runMembersBench(b *testing.B, be backend, members int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	records := benchRecords()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(benchParts, topic),
		kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	defer prod.Close()
	var ends [benchParts]int64
	const chunk = 10_000
	for done := 0; done < records; done += chunk {
		recs := make([]*kgo.Record, min(chunk, records-done))
		for i := range recs {
			id := done + i
			recs[i] = &kgo.Record{Topic: topic, Partition: int32(id % benchParts),
				Value: fmt.Appendf(nil, `{"id": %d, "payload": "p-%d"}`, id, id)}
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
		for _, r := range recs {
			ends[r.Partition] = max(ends[r.Partition], r.Offset+1)
		}
	}
	ident := table.Identifier{"kafka_bench", "events_" + uuid.NewString()[:8]}
	w, err := iceberg.NewWriter(ctx, be.cat, ident, iceberg.WithCreate(eventsSchema))
	if err != nil {
		b.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		b.Fatal(err)
	}

	dir := b.TempDir()
	ps := make([]*process, members)
	release := holdFetches(c)
	defer release()
	for i := range ps {
		ps[i] = spawn(b, memberSpec{Brokers: c.ListenAddrs(), Catalog: be.uri, CatalogProps: be.props, Table: ident,
			WriterID: fmt.Sprintf("member-%d", i), MaxPoll: 10_000, FlushInterval: benchFlush(),
			SessionTimeout: 10 * time.Second, Report: filepath.Join(dir, fmt.Sprintf("member-%d.json", i))})
	}
	if _, err := c.WaitGroupInfo(ctx, group, func(g *kfake.GroupInfo) bool {
		return g != nil && g.State == "Stable" && len(g.Members) == members && g.NumAssigned() == benchParts
	}); err != nil {
		b.Fatal(err)
	}
	parentBefore := selfCPU(b)
	release()
	start := time.Now()
	// Follow the table's positions until they cover every record.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		pos, err := iceberg.Positions(ctx, be.cat, ident)
		if err != nil {
			b.Fatal(err)
		}
		var got int64
		for p := range benchParts {
			n := offsetOf(pos[fmt.Sprintf("%s/%d", topic, p)])
			got += min(n, ends[p])
		}
		if got >= int64(records) {
			break
		}
		select {
		case <-ctx.Done():
			b.Fatalf("positions cover %d of %d records", got, records)
		case <-tick.C:
		}
	}
	total := time.Since(start)
	parent := selfCPU(b) - parentBefore
	var cpu time.Duration
	var rep memberReport
	for i, p := range ps {
		p.stop(ctx)
		if ru, ok := p.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			cpu += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
		data, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("member-%d.json", i)))
		if err != nil {
			b.Fatal(err)
		}
		var r memberReport
		if err := json.Unmarshal(data, &r); err != nil {
			b.Fatal(err)
		}
		rep.Commits += r.Commits
		rep.Conflicts += r.Conflicts
		rep.Rows += r.Rows
		rep.CommitNanos += r.CommitNanos
		rep.AppliedNanos += r.AppliedNanos
		rep.Attempts += r.Attempts
	}
	tbl := tabletest.Load(b, be.cat, ident)
	if got := tbl.CurrentSnapshot().Summary.Properties["total-records"]; got != strconv.Itoa(records) {
		b.Fatalf("table holds %s records, want %d", got, records)
	}
	b.ReportMetric(float64(records)/total.Seconds(), "rows/s")
	b.ReportMetric(cpu.Seconds()*1e6/float64(records), "cpu-s/Mrec")
	b.ReportMetric(parent.Seconds()*1e6/float64(records), "broker-cpu-s/Mrec")
	if rep.Commits > 0 {
		b.ReportMetric(float64(rep.Conflicts)/float64(rep.Commits), "conflicts/commit")
		b.ReportMetric(float64(rep.CommitNanos)/float64(rep.Commits)/1e6, "commit-ms")
		b.ReportMetric(float64(rep.AppliedNanos)/float64(rep.Commits)/1e6, "attempt-ms")
		b.ReportMetric(float64(rep.Commits), "commits")
	}
}
