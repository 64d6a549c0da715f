package kafka_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/tabletest"
	"github.com/icewriter/iceberg/kafka"
)

const (
	topic = "orders"
	parts = 4 // the topic's partitions at the start
	// maxParts bounds the partitions a test may add.
	maxParts = 8
	group    = "sink"
)

// eventsSchema is the test table: the value's columns (id, payload) and three metadata columns.
var eventsSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "payload", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "_partition", Type: arrow.PrimitiveTypes.Int32},
	{Name: "_offset", Type: arrow.PrimitiveTypes.Int64},
	{Name: "_topic", Type: arrow.BinaryTypes.String},
}, nil)

var meta = kafka.MetadataColumns{Topic: "_topic", Partition: "_partition", Offset: "_offset"}

// harness is one kfake cluster, one table, a producer and the members started on them.
type harness struct {
	t       *testing.T
	ctx     context.Context
	cluster *kfake.Cluster
	be      backend // the catalog, for member processes too
	cat     icecatalog.Catalog
	ident   table.Identifier
	prod    *kgo.Client

	// keys, when not 0, makes records keyed: record n has id n % keys (its key, which also picks its
	// partition) and payload "p-n"; the table is then upserted by id. Otherwise record n has id n.
	keys int64

	mu       sync.Mutex
	produced map[[2]int64]int64 // (partition, offset) -> record number: the model
	next     int64              // the next record number
	ends     [maxParts]int64    // each partition's next offset
	parts    int64              // the topic's partitions now (addPartitions)
	closedID string             // the topic's ID, kept by closeCluster for check
}

// newHarness starts a cluster and creates the table (with create's options) in an embedded catalog.
func newHarness(t *testing.T, create ...iceberg.CreateOption) *harness {
	t.Helper()
	return newHarnessOn(t, embedded(t), table.Identifier{"kafka", "events"}, create...)
}

// newHarnessOn starts a cluster and creates the table ident (with create's options) in be's catalog.
func newHarnessOn(t *testing.T, be backend, ident table.Identifier, create ...iceberg.CreateOption) *harness {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(parts, topic),
		kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cat := be.cat
	setup, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(eventsSchema, create...))
	if err != nil {
		t.Fatal(err)
	}
	if err := setup.Close(ctx); err != nil {
		t.Fatal(err)
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prod.Close)
	return &harness{t: t, ctx: ctx, cluster: c, be: be, cat: cat, ident: ident, prod: prod,
		produced: map[[2]int64]int64{}, parts: parts}
}

// partitions is the topic's number of partitions now.
func (h *harness) partitions() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.parts
}

// idOf is the id of record n.
func (h *harness) idOf(n int64) int64 {
	if h.keys > 0 {
		return n % h.keys
	}
	return n
}

// produce sends n JSON records, spread over the partitions by id, and records them in the model.
func (h *harness) produce(n int) {
	h.t.Helper()
	recs := make([]*kgo.Record, n)
	nums := make(map[*kgo.Record]int64, n)
	for i := range recs {
		num := h.next
		h.next++
		id := h.idOf(num)
		recs[i] = &kgo.Record{Topic: topic, Partition: int32(id % h.partitions()),
			Value: fmt.Appendf(nil, `{"id": %d, "payload": "p-%d"}`, id, num)}
		nums[recs[i]] = num
	}
	if err := h.prod.ProduceSync(h.ctx, recs...).FirstErr(); err != nil {
		h.t.Fatal(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range recs {
		h.produced[[2]int64{int64(r.Partition), r.Offset}] = nums[r]
		h.ends[r.Partition] = max(h.ends[r.Partition], r.Offset+1)
	}
}

// member is one started sink and the end of its Run.
type member struct {
	sink   *kafka.Sink
	cancel context.CancelFunc
	done   chan error
}

func (h *harness) start(id string, opts ...iceberg.Option) *member {
	h.t.Helper()
	return h.startWith(id, func(c *kafka.Config) { c.WriterOptions = append(c.WriterOptions, opts...) })
}

// startWith starts a member whose config edit changed from the harness's (client ID: the writer ID).
func (h *harness) startWith(id string, edit func(*kafka.Config)) *member {
	h.t.Helper()
	cfg := kafka.Config{
		Brokers: h.cluster.ListenAddrs(), Group: group, Topics: []string{topic},
		Catalog: h.cat, Table: h.ident, WriterID: id, Metadata: meta, MaxPollRecords: 50,
		WriterOptions: []iceberg.Option{iceberg.WithFlushInterval(20 * time.Millisecond)},
		ClientOptions: []kgo.Opt{kgo.FetchMaxWait(100 * time.Millisecond), kgo.ClientID(id)},
	}
	if edit != nil {
		edit(&cfg)
	}
	s, err := kafka.New(h.ctx, cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(h.ctx)
	m := &member{sink: s, cancel: cancel, done: make(chan error, 1)}
	go func() { m.done <- s.Run(ctx) }()
	return m
}

// stop ends the member gracefully and checks Run's result.
func (h *harness) stop(m *member) {
	h.t.Helper()
	m.cancel()
	if err := <-m.done; err != nil {
		h.t.Fatalf("Run: %v", err)
	}
}

// waitStable waits for the group to be stable with n members, each assigned some partitions.
func (h *harness) waitStable(n int) {
	h.t.Helper()
	if _, err := h.cluster.WaitGroupInfo(h.ctx, group, func(g *kfake.GroupInfo) bool {
		return g != nil && g.State == "Stable" && len(g.Members) == n && g.NumAssigned() == int(h.partitions())
	}); err != nil {
		h.t.Fatalf("group not stable with %d members: %v", n, err)
	}
}

// waitCommitted waits until the table's positions reach at least the given fraction of the produced records.
func (h *harness) waitCommitted(fraction float64) {
	h.t.Helper()
	h.mu.Lock()
	ends := h.ends
	h.mu.Unlock()
	var want int64
	for _, e := range ends {
		want += int64(float64(e) * fraction)
	}
	id := h.topicID()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		pos, err := iceberg.Positions(h.ctx, h.cat, h.ident)
		if err != nil {
			h.t.Fatal(err)
		}
		var got int64
		for p := range h.partitions() {
			if tp, err := kafka.ParsePosition(pos[fmt.Sprintf("%s/%d", topic, p)]); err == nil && tp.TopicID == id {
				got += min(tp.Offset, ends[p]) // a position of an older topic of the name covers nothing
			}
		}
		if got >= want {
			return
		}
		select {
		case <-h.ctx.Done():
			h.t.Fatalf("table positions cover %d records, want %d: %v", got, want, pos)
		case <-tick.C:
		}
	}
}

// recreateTopic deletes the topic and creates it again with as many partitions: a new topic ID, offsets from 0.
// The model then holds the new topic's records only (the old ones are in oldIDs); record numbers go on.
func (h *harness) recreateTopic() (oldIDs map[int64]bool) {
	h.t.Helper()
	h.mu.Lock()
	oldIDs = map[int64]bool{}
	for _, num := range h.produced {
		oldIDs[h.idOf(num)] = true
	}
	h.produced, h.ends = map[[2]int64]int64{}, [maxParts]int64{}
	h.mu.Unlock()
	if err := h.cluster.DeleteTopic(topic); err != nil {
		h.t.Fatal(err)
	}
	if err := h.cluster.CreateTopic(topic, int32(h.partitions()), nil); err != nil {
		h.t.Fatal(err)
	}
	// A new producer: the old one refuses the topic's new ID.
	prod, err := kgo.NewClient(kgo.SeedBrokers(h.cluster.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(prod.Close)
	h.prod = prod
	return oldIDs
}

// checkIDs reads the table back and compares its ids with want: each once, no other (for tests whose model is
// not by partition and offset, as a recreated topic's offsets repeat).
func (h *harness) checkIDs(want map[int64]bool) {
	h.t.Helper()
	tbl := tabletest.Load(h.t, h.cat, h.ident)
	_, it := tabletest.Records(h.t, tbl)
	seen := map[int64]int{}
	for rec := range it {
		ids := rec.Column(rec.Schema().FieldIndices("id")[0]).(*array.Int64)
		for r := range int(rec.NumRows()) {
			seen[ids.Value(r)]++
		}
	}
	missing, dup, bad := 0, 0, 0
	for id := range want {
		switch seen[id] {
		case 0:
			missing++
		case 1:
		default:
			dup++
		}
	}
	for id := range seen {
		if !want[id] {
			bad++
		}
	}
	if missing > 0 || dup > 0 || bad > 0 {
		h.t.Errorf("table: %d of %d ids missing, %d duplicated, %d that should not be there", missing, len(want), dup, bad)
	}
}

// topicID is the topic's ID as positions carry it.
func (h *harness) topicID() string {
	h.t.Helper()
	if h.closedID != "" {
		return h.closedID
	}
	info := h.cluster.TopicInfo(topic)
	if info == nil {
		h.t.Fatalf("topic %q does not exist", topic)
	}
	return base64.RawURLEncoding.EncodeToString(info.TopicID[:])
}

// closeCluster stops the cluster (its brokers stop answering), keeping the topic's ID for check.
func (h *harness) closeCluster() {
	h.t.Helper()
	h.closedID = h.topicID()
	h.cluster.Close()
}

// want is the model of the table: the records it must hold, by (partition, offset) -> record number. Appended:
// every record produced; upserted (keys): the last record of each key.
func (h *harness) want() map[[2]int64]int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.keys == 0 {
		return maps.Clone(h.produced)
	}
	last := map[int64][2]int64{} // id -> (partition, offset) of its last record: one partition per key
	for k, num := range h.produced {
		id := h.idOf(num)
		if l, ok := last[id]; !ok || k[1] > l[1] {
			last[id] = k
		}
	}
	out := make(map[[2]int64]int64, len(last))
	for _, k := range last {
		out[k] = h.produced[k]
	}
	return out
}

// check reads the table back and compares it with the model (want): each record it must hold exactly once, with
// its id and payload, no other row, and the positions at each partition's end.
func (h *harness) check() {
	h.t.Helper()
	want := h.want()
	tbl := tabletest.Load(h.t, h.cat, h.ident)
	sc, it := tabletest.Records(h.t, tbl)
	col := func(name string) int { return sc.FieldIndices(name)[0] }
	seen := map[[2]int64]int{}
	bad := 0
	for rec := range it {
		ids, pays := rec.Column(col("id")).(*array.Int64), rec.Column(col("payload")).(*array.String)
		ps, offs := rec.Column(col("_partition")).(*array.Int32), rec.Column(col("_offset")).(*array.Int64)
		tops := rec.Column(col("_topic")).(*array.String)
		for r := range int(rec.NumRows()) {
			k := [2]int64{int64(ps.Value(r)), offs.Value(r)}
			seen[k]++
			num, ok := want[k]
			switch {
			case !ok:
				bad++
				if bad <= 5 {
					h.t.Errorf("row of %s/%d@%d (id %d, payload %q) should not be in the table", tops.Value(r), k[0],
						k[1], ids.Value(r), pays.Value(r))
				}
			case ids.Value(r) != h.idOf(num) || pays.Value(r) != fmt.Sprintf("p-%d", num) || tops.Value(r) != topic:
				h.t.Errorf("row of %d@%d: id %d payload %q topic %q, want id %d payload p-%d", k[0], k[1], ids.Value(r),
					pays.Value(r), tops.Value(r), h.idOf(num), num)
			}
		}
	}
	missing, dup := 0, 0
	for k := range want {
		switch seen[k] {
		case 0:
			missing++
		case 1:
		default:
			dup++
			if dup <= 5 {
				h.t.Errorf("record %d@%d is %d times in the table", k[0], k[1], seen[k])
			}
		}
	}
	if missing > 0 || dup > 0 || bad > 0 {
		h.t.Errorf("%d of %d records missing, %d duplicated, %d rows that should not be there", missing, len(want),
			dup, bad)
	}
	pos, err := iceberg.Positions(h.ctx, h.cat, h.ident)
	if err != nil {
		h.t.Fatal(err)
	}
	id := h.topicID()
	for p := range h.partitions() {
		if got, want := pos[fmt.Sprintf("%s/%d", topic, p)], (kafka.Position{Offset: h.ends[p], TopicID: id}).String(); got != want {
			h.t.Errorf("partition %d at position %q, want %s", p, got, want)
		}
	}
}

// TestSinkAcrossRebalancesAndACrash runs a group of members over four partitions: two start, a third joins
// mid-stream (cooperative-sticky moves partitions to it: the revoked ones' rows commit before release), one is
// killed (its uncommitted rows die with it; its partitions' new owners resume from the table), one leaves
// gracefully. The table ends holding every produced record exactly once, and each partition's position is its
// end offset.
func TestSinkAcrossRebalancesAndACrash(t *testing.T) {
	h := newHarness(t)
	const batch = 400
	h.produce(batch)
	m0, m1 := h.start("member-0"), h.start("member-1")
	h.waitStable(2)
	h.produce(batch)
	h.waitCommitted(0.5)

	m2 := h.start("member-2") // a rebalance while records flow
	h.produce(batch)
	h.waitStable(3)
	h.produce(batch)
	h.waitCommitted(0.6)

	m1.sink.Crash(h.ctx) // killed mid-stream: no commit on its way out
	if err := <-m1.done; !errors.Is(err, kafka.ErrCrashed) {
		t.Fatalf("crashed member's Run: %v", err)
	}
	h.produce(batch)
	h.waitStable(2)
	h.produce(batch)
	h.waitCommitted(0.9)

	h.stop(m2) // leaves gracefully: member-0 takes everything
	h.produce(batch)
	h.waitStable(1)
	h.waitCommitted(1)
	h.stop(m0)
	h.check()

	// The group offsets followed the table: for monitoring, they equal the positions.
	g := h.cluster.GroupInfo(group)
	for p := range h.partitions() {
		if c := g.Commits[topic][int32(p)]; c.Offset != h.ends[p] {
			t.Errorf("group offset of partition %d is %d, want %d", p, c.Offset, h.ends[p])
		}
	}
}

// TestSinkResumesFromTheTable restarts the whole group: new members (other writer IDs) resume every partition
// from the table's positions, not from the start, and the table holds each record once.
func TestSinkResumesFromTheTable(t *testing.T) {
	h := newHarness(t)
	h.produce(200)
	m := h.start("first")
	h.waitStable(1)
	h.waitCommitted(1)
	h.stop(m)
	h.produce(200)
	m = h.start("second")
	h.waitStable(1)
	h.waitCommitted(1)
	h.stop(m)
	h.check()
}

// TestSinkFencedMemberStops starts a second process with a member's writer ID (a restarted member while the old
// one still runs): the old one stops with an error wrapping iceberg.ErrFenced, which says so once.
func TestSinkFencedMemberStops(t *testing.T) {
	h := newHarness(t)
	h.produce(40)
	m := h.start("member-0")
	h.waitStable(1)
	h.waitCommitted(1)
	newer, err := iceberg.NewWriter(h.ctx, h.cat, h.ident, iceberg.WithWriterID("member-0"))
	if err != nil {
		t.Fatal(err)
	}
	defer newer.Close(h.ctx)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		h.produce(4)
		select {
		case err := <-m.done:
			if !errors.Is(err, iceberg.ErrFenced) {
				t.Fatalf("Run: %v, want ErrFenced", err)
			}
			const says = `kafka: member with writer ID "member-0" stops: a newer process took the ID over: `
			if n := strings.Count(err.Error(), says); n != 1 || !strings.HasPrefix(err.Error(), says) {
				t.Fatalf("Run: %q, want it to start with %q, once", err, says)
			}
			return
		case <-h.ctx.Done():
			t.Fatal("the fenced member did not stop")
		case <-tick.C:
		}
	}
}
