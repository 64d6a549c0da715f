package kafka_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/icewriter/iceberg/kafka"
)

// addPartitions grows the topic to n partitions (CreatePartitions, as kadm does); records go to them from then on.
func (h *harness) addPartitions(n int64) {
	h.t.Helper()
	req := kmsg.NewPtrCreatePartitionsRequest()
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = topic, int32(n)
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 5000
	resp, err := req.RequestWith(h.ctx, h.prod)
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		h.t.Fatalf("create partitions: %v", err)
	}
	// A new producer: the old one's metadata still has the old count, and it rejects a record for a partition
	// it does not know of.
	prod, err := kgo.NewClient(kgo.SeedBrokers(h.cluster.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(prod.Close)
	h.prod = prod
	h.mu.Lock()
	h.parts = n
	h.mu.Unlock()
}

// seeNewPartitions makes a member's client refresh its metadata often, so that it notices added partitions.
func seeNewPartitions(c *kafka.Config) {
	c.ClientOptions = append(c.ClientOptions, kgo.MetadataMinAge(100*time.Millisecond),
		kgo.MetadataMaxAge(200*time.Millisecond))
}

// TestSinkPartitionsAdded grows the topic from 4 to 6 partitions while two members consume: the group assigns
// the new partitions (the leader notices them and rebalances), their records are written from their start, and
// the table holds every record of all six partitions exactly once.
func TestSinkPartitionsAdded(t *testing.T) {
	h := newHarness(t)
	h.produce(200)
	a, b := h.startWith("member-a", seeNewPartitions), h.startWith("member-b", seeNewPartitions)
	h.waitStable(2)
	h.waitCommitted(1)

	h.addPartitions(6)
	h.produce(300) // records on all six partitions
	h.waitStable(2)
	h.produce(300)
	h.waitCommitted(1)
	h.stop(a)
	h.stop(b)
	h.check()
}

// TestSinkRebalanceMidCommit holds a member's table commit at the catalog while a second member joins: the
// cooperative rebalance revokes partitions from the first member in the middle of its commit (its revocation
// waits for the commit before the partitions are released), the commit then lands, and the new owner resumes
// right after it. The table holds every record exactly once.
func TestSinkRebalanceMidCommit(t *testing.T) {
	h := newHarness(t)
	gated := newGatedCatalog(h.cat)
	h.produce(200)
	a := h.startWith("member-a", func(c *kafka.Config) { c.Catalog = gated })
	h.waitStable(1)
	h.waitCommitted(1)

	gated.close()
	h.produce(200)
	select {
	case <-gated.blocked: // member-a's commit of the new records waits at the catalog
	case <-h.ctx.Done():
		t.Fatal("member-a never committed the new records")
	}
	b := h.start("member-b")
	// The first round of the cooperative rebalance is done when both are members and some partitions are
	// unassigned: member-a now revokes them, and its revocation waits for the commit held at the catalog.
	if _, err := h.cluster.WaitGroupInfo(h.ctx, group, func(g *kfake.GroupInfo) bool {
		return g != nil && len(g.Members) == 2 && g.State == "Stable" && g.NumAssigned() < parts
	}); err != nil {
		t.Fatalf("the rebalance did not reach its revocation: %v", err)
	}
	gated.open()
	h.waitStable(2)
	h.produce(200)
	h.waitCommitted(1)
	h.stop(a)
	h.stop(b)
	h.check()
}
