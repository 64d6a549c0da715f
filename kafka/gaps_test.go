package kafka_test

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/kafka"
)

// memberLog collects a member's log lines and the gaps it reports.
type memberLog struct {
	out  lockedBuffer
	mu   sync.Mutex
	gaps []kafka.Gap
}

func (g *memberLog) onGap(gap kafka.Gap) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gaps = append(g.gaps, gap)
}

func (g *memberLog) reported() []kafka.Gap {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]kafka.Gap(nil), g.gaps...)
}

// watch makes the member log into g and report its gaps to it.
func (g *memberLog) watch(c *kafka.Config) {
	c.Logger = slog.New(slog.NewTextHandler(&g.out, nil))
	c.OnGap = g.onGap
}

// forget drops a partition's records in [from, to) from the model: they were deleted before the sink read them.
func (h *harness) forget(partition, from, to int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for off := from; off < to; off++ {
		delete(h.produced, [2]int64{partition, off})
	}
}

// stopsWith waits for the member to stop by itself and checks its error: it wraps sentinel and says each of says.
func (h *harness) stopsWith(m *member, sentinel error, says ...string) {
	h.t.Helper()
	var err error
	select {
	case err = <-m.done:
	case <-h.ctx.Done():
		h.t.Fatalf("the member did not stop with %v", sentinel)
	}
	if !errors.Is(err, sentinel) {
		h.t.Fatalf("Run: %v, want %v", err, sentinel)
	}
	for _, s := range says {
		if !strings.Contains(err.Error(), s) {
			h.t.Errorf("Run: %q does not say %q", err, s)
		}
	}
}

// commitOnce produces n records and runs a member until the table holds them.
func (h *harness) commitOnce(n int) {
	h.t.Helper()
	h.produce(n)
	m := h.start("member-0")
	h.waitStable(1)
	h.waitCommitted(1)
	h.stop(m)
}

// retentionGap commits 100 records of each partition, produces 100 more, and deletes partition 0's records up
// to offset 150 (as retention would): the table's position 100 is now before the log start 150.
func retentionGap(h *harness) {
	h.t.Helper()
	h.commitOnce(4 * 100)
	h.produce(4 * 100)
	if err := h.cluster.DeleteRecords(topic, 0, 150); err != nil {
		h.t.Fatal(err)
	}
}

// TestSinkStopsAtARetentionGap: a partition whose log starts after the table's position (records deleted by
// retention before the sink read them) stops the member before it reads anything, with ErrRetentionGap naming
// the topic, partition, table position, log start and the option; the table keeps what it had.
func TestSinkStopsAtARetentionGap(t *testing.T) {
	h := newHarness(t)
	retentionGap(h)
	before := h.want()
	for k := range before {
		if k[1] >= 100 {
			delete(before, k)
		}
	}
	h.stopsWith(h.start("member-1"), kafka.ErrRetentionGap,
		`topic "orders", partition 0`, "offset 100", "starts at 150", "Config.AcceptRetentionGaps")
	h.mu.Lock()
	h.produced = before
	h.ends = [maxParts]int64{100, 100, 100, 100}
	h.mu.Unlock()
	h.check()
}

// TestSinkSkipsAnAcceptedRetentionGap: with AcceptRetentionGaps the member resumes partition 0 at the log start,
// logs the skip (Warn) and reports it through OnGap; the table holds every other record exactly once.
func TestSinkSkipsAnAcceptedRetentionGap(t *testing.T) {
	h := newHarness(t)
	retentionGap(h)
	var g memberLog
	m := h.startWith("member-1", func(c *kafka.Config) { c.AcceptRetentionGaps = true; g.watch(c) })
	h.waitStable(1)
	h.waitCommitted(1)
	h.stop(m)
	h.forget(0, 100, 150)
	h.check()
	id := h.topicID()
	want := []kafka.Gap{{Topic: topic, Partition: 0, Reason: kafka.GapRetention, Table: kafka.Position{Offset: 100, TopicID: id},
		Resume: kafka.Position{Offset: 150, TopicID: id}, Skipped: 50}}
	if got := g.reported(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("OnGap got %+v, want %+v", got, want)
	}
	if out := g.out.String(); !strings.Contains(out, "level=WARN msg=\"kafka: records deleted before the sink read them") ||
		!strings.Contains(out, "skipped=50") {
		t.Errorf("no warning of the skip in the log:\n%s", out)
	}
}

// recreated commits 100 records of each partition, then deletes the topic, creates it again and produces 100
// records into each partition of the new topic (offsets 0 to 99 again). It returns the old records' ids.
func recreated(h *harness) map[int64]bool {
	h.t.Helper()
	h.commitOnce(4 * 100)
	old := h.recreateTopic()
	h.produce(4 * 100)
	return old
}

// TestSinkStopsOnARecreatedTopic: the table's positions carry the topic ID; a topic deleted and created again
// (another ID) stops the member before it reads the new topic from the old offsets, with ErrTopicRecreated
// naming both IDs and the option.
func TestSinkStopsOnARecreatedTopic(t *testing.T) {
	h := newHarness(t)
	old := recreated(h)
	h.stopsWith(h.start("member-1"), kafka.ErrTopicRecreated,
		`topic "orders"`, "the topic's ID is now "+h.topicID(), "Config.RestartRecreatedTopics")
	h.checkIDs(old)
}

// TestSinkRestartsARecreatedTopic: with RestartRecreatedTopics the member reads the new topic from its start
// (logged, and reported through OnGap for each partition): the table holds the old topic's records and every
// one of the new topic's, once, and the positions carry the new ID.
func TestSinkRestartsARecreatedTopic(t *testing.T) {
	h := newHarness(t)
	old := recreated(h)
	var g memberLog
	m := h.startWith("member-1", func(c *kafka.Config) { c.RestartRecreatedTopics = true; g.watch(c) })
	h.waitStable(1)
	h.waitCommitted(1)
	h.stop(m)
	want := old
	for _, num := range h.want() {
		want[h.idOf(num)] = true
	}
	h.checkIDs(want)
	if gaps := g.reported(); len(gaps) != parts || gaps[0].Reason != kafka.GapTopicRecreated || gaps[0].Resume.TopicID != h.topicID() {
		t.Errorf("OnGap got %+v, want one recreated-topic gap per partition", gaps)
	}
	if out := g.out.String(); !strings.Contains(out, "level=WARN msg=\"kafka: topic deleted and created again") {
		t.Errorf("no warning of the restart in the log:\n%s", out)
	}
}

// TestSinkUnreachableBrokerIsAnError: a member whose brokers do not answer stops with ErrUnreachable after
// ConnectTimeout, naming the address, instead of waiting for records forever.
func TestSinkUnreachableBrokerIsAnError(t *testing.T) {
	h := newHarness(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	m := h.startWith("member-0", func(c *kafka.Config) {
		c.Brokers = []string{addr}
		c.ConnectTimeout = 500 * time.Millisecond
	})
	h.stopsWith(m, kafka.ErrUnreachable, addr, "Config.ConnectTimeout")
}

// TestSinkStopsWhenTheClusterIsLost: a member whose cluster goes away while it runs (kgo retries forever) logs
// the outage and stops with ErrUnreachable after ConnectTimeout, and what it committed before stays exact.
func TestSinkStopsWhenTheClusterIsLost(t *testing.T) {
	h := newHarness(t)
	h.produce(4 * 50)
	var l memberLog
	m := h.startWith("member-0", func(c *kafka.Config) {
		c.ConnectTimeout = time.Second
		l.watch(c)
	})
	h.waitStable(1)
	h.waitCommitted(1)
	h.closeCluster()
	h.stopsWith(m, kafka.ErrUnreachable, "Config.ConnectTimeout")
	if out := l.out.String(); !strings.Contains(out, "broker unreachable") {
		t.Errorf("no warning of the outage in the log:\n%s", out)
	}
	h.check()
}

// TestSinkLogsAssignmentRevocationAndTakeover: members log the partitions they are assigned, those revoked from
// them, and where they resume; with a short SessionTimeout a killed member's partitions are taken over, which
// the new owner logs.
func TestSinkLogsAssignmentRevocationAndTakeover(t *testing.T) {
	h := newHarness(t)
	h.produce(4 * 50)
	var l0, l1 memberLog
	short := func(l *memberLog) func(*kafka.Config) {
		return func(c *kafka.Config) { c.SessionTimeout = time.Second; l.watch(c) }
	}
	m0 := h.startWith("member-0", short(&l0))
	h.waitStable(1)
	h.waitCommitted(1)
	m1 := h.startWith("member-1", short(&l1))
	h.waitStable(2)
	m1.sink.Crash(h.ctx)
	if err := <-m1.done; !errors.Is(err, kafka.ErrCrashed) {
		t.Fatalf("crashed member's Run: %v", err)
	}
	h.produce(4 * 50)
	h.waitStable(1) // member-0 took member-1's partitions over
	h.waitCommitted(1)
	h.stop(m0)
	h.check()
	for _, want := range []struct {
		l    *memberLog
		line string
	}{
		{&l0, `msg="kafka: partitions assigned" writer=member-0 topic=orders partitions="[0 1 2 3]"`},
		{&l0, `msg="kafka: partitions revoked; their rows committed" writer=member-0 topic=orders`},
		{&l1, `msg="kafka: partitions assigned" writer=member-1 topic=orders`},
		{&l0, `msg="kafka: resuming assigned partitions from the table" writer=member-0 topic=orders`},
	} {
		if !strings.Contains(want.l.out.String(), want.line) {
			t.Errorf("log does not hold %s:\n%s", want.line, want.l.out.String())
		}
	}
	// The takeover: member-0 was assigned partitions again after member-1 died.
	if n := strings.Count(l0.out.String(), `msg="kafka: partitions assigned" writer=member-0`); n < 2 {
		t.Errorf("member-0 logged %d assignments, want the first and the takeover:\n%s", n, l0.out.String())
	}
}

// TestSinkStopsOnATopicRecreatedWhileRunning: a topic deleted and created again under a running member (kgo keeps
// the old ID and fetches nothing more) stops the member with ErrTopicRecreated, after it committed what it read
// of the old topic; started again with RestartRecreatedTopics, a member writes the new topic from its start.
func TestSinkStopsOnATopicRecreatedWhileRunning(t *testing.T) {
	h := newHarness(t)
	h.produce(4 * 100)
	m := h.start("member-0")
	h.waitStable(1)
	h.waitCommitted(1)
	old := h.recreateTopic()
	h.produce(4 * 100)
	// kgo may also see the topic go and come back as a rebalance: then the check at assignment stops the member.
	h.stopsWith(m, kafka.ErrTopicRecreated, `topic "orders"`, "Config.RestartRecreatedTopics")
	h.checkIDs(old)

	m = h.startWith("member-1", func(c *kafka.Config) { c.RestartRecreatedTopics = true })
	h.waitStable(1)
	h.waitCommitted(1)
	h.stop(m)
	for _, num := range h.want() {
		old[h.idOf(num)] = true
	}
	h.checkIDs(old)
}

// TestSinkAdoptsTheTopicIDOfOldPositions: a table whose positions have no topic ID (written before positions
// carried one: "100") is read on from them, neither a gap nor a recreated topic, and its next commit gives each
// position the topic's ID.
func TestSinkAdoptsTheTopicIDOfOldPositions(t *testing.T) {
	h := newHarness(t)
	h.produce(4 * 100)
	// The first 400 records as an older sink wrote them: rows and decimal positions, partition by partition.
	w, err := iceberg.NewWriter(h.ctx, h.cat, h.ident, iceberg.WithWriterID("older-sink"), iceberg.WithCheckpoints())
	if err != nil {
		t.Fatal(err)
	}
	model := h.want()
	for p := range int64(parts) {
		b := array.NewRecordBuilder(memory.DefaultAllocator, eventsSchema)
		for off := range int64(100) {
			num := model[[2]int64{p, off}]
			b.Field(0).(*array.Int64Builder).Append(h.idOf(num))
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("p-%d", num))
			b.Field(2).(*array.Int32Builder).Append(int32(p))
			b.Field(3).(*array.Int64Builder).Append(off)
			b.Field(4).(*array.StringBuilder).Append(topic)
		}
		rec := b.NewRecordBatch()
		src := w.Source(fmt.Sprintf("%s/%d", topic, p))
		if err := src.Write(h.ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		b.Release()
		if err := src.Checkpoint(h.ctx, "100"); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(h.ctx); err != nil {
		t.Fatal(err)
	}
	h.produce(4 * 100)
	m := h.start("member-0")
	h.waitStable(1)
	h.waitCommitted(1)
	h.stop(m)
	h.check() // every record once, positions "200@<topic ID>"
}
