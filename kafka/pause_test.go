package kafka_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/kafka"
)

// gatedCatalog holds every CommitTable while its gate is closed: a member whose commit is in flight when the
// process stops (a GC pause, a frozen VM, a network partition).
type gatedCatalog struct {
	icecatalog.Catalog
	mu      sync.Mutex
	gate    chan struct{} // nil: open
	blocked chan struct{} // receives once per commit that waits at the gate
}

func newGatedCatalog(cat icecatalog.Catalog) *gatedCatalog {
	return &gatedCatalog{Catalog: cat, blocked: make(chan struct{}, 64)}
}

func (g *gatedCatalog) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gate = make(chan struct{})
}

func (g *gatedCatalog) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gate != nil {
		close(g.gate)
		g.gate = nil
	}
}

func (g *gatedCatalog) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement,
	updates []table.Update) (table.Metadata, string, error) {
	g.mu.Lock()
	gate := g.gate
	g.mu.Unlock()
	if gate != nil {
		select {
		case g.blocked <- struct{}{}:
		default:
		}
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, "", ctx.Err()
		}
	}
	return g.Catalog.CommitTable(ctx, ident, reqs, updates)
}

// attemptHook reports a member's run commits once armed: refused because a partition's position moved, or
// applied.
type attemptHook struct {
	armed   atomic.Bool
	moved   chan error
	applied chan struct{}
}

func newAttemptHook() *attemptHook {
	return &attemptHook{moved: make(chan error, 1), applied: make(chan struct{}, 1)}
}

func (h *attemptHook) OnCommitAttempt(a iceberg.CommitAttempt) {
	if !h.armed.Load() || a.Kind != iceberg.KindRun {
		return
	}
	switch {
	case errors.Is(a.Err, iceberg.ErrPositionMoved):
		select {
		case h.moved <- a.Err:
		default:
		}
	case a.Err == nil:
		select {
		case h.applied <- struct{}{}:
		default:
		}
	}
}

// pauseHeartbeats makes the cluster drop the heartbeats of the member with client ID id (its connection is
// closed, as a paused process's would time out) until the returned function is called.
func pauseHeartbeats(t *testing.T, c *kfake.Cluster, id string) (resume func()) {
	t.Helper()
	var memberID string
	for _, m := range c.GroupInfo(group).Members {
		if m.ClientID == id {
			memberID = m.MemberID
		}
	}
	if memberID == "" {
		t.Fatalf("no member with client ID %s", id)
	}
	var mu sync.Mutex
	paused := true
	c.ControlKey(int16(kmsg.Heartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		if hb, ok := req.(*kmsg.HeartbeatRequest); ok && paused && hb.MemberID == memberID {
			return nil, errors.New("member paused"), true
		}
		return nil, nil, false
	})
	return func() {
		mu.Lock()
		defer mu.Unlock()
		paused = false
	}
}

// TestSinkPausedMemberIsFenced pauses a member with a commit in flight past its session timeout: the group
// moves its partitions to another member, which resumes from the table and commits the same records. When the
// paused member comes back, its commit is refused (iceberg.ErrPositionMoved): it either stops with that error
// or, having learnt from the group that its partitions were lost, drops its rows and rejoins. The table holds
// every produced record exactly once and each partition's position at its end.
func TestSinkPausedMemberIsFenced(t *testing.T) {
	h := newHarness(t)
	gated := newGatedCatalog(h.cat)
	attempts := newAttemptHook()
	short := []kgo.Opt{kgo.SessionTimeout(time.Second), kgo.HeartbeatInterval(100 * time.Millisecond),
		kgo.RebalanceTimeout(2 * time.Second)}
	h.produce(200)
	a := h.startWith("member-a", func(c *kafka.Config) {
		c.Catalog = gated
		c.WriterOptions = append(c.WriterOptions, iceberg.WithHooks(attempts))
		c.ClientOptions = append(c.ClientOptions, short...)
	})
	h.waitStable(1)
	h.waitCommitted(1)

	// member-a pauses with records polled and a commit in flight.
	gated.close()
	h.produce(200)
	select {
	case <-gated.blocked:
	case <-h.ctx.Done():
		t.Fatal("member-a never committed the second records")
	}
	resume := pauseHeartbeats(t, h.cluster, "member-a")

	// The group expires member-a and gives every partition to member-b, which commits the same records.
	b := h.startWith("member-b", func(c *kafka.Config) { c.ClientOptions = append(c.ClientOptions, short...) })
	if _, err := h.cluster.WaitGroupInfo(h.ctx, group, func(g *kfake.GroupInfo) bool {
		return g != nil && g.State == "Stable" && len(g.Members) == 1 && g.Members[0].ClientID == "member-b" &&
			g.NumAssigned() == int(h.partitions())
	}); err != nil {
		t.Fatalf("member-b never took every partition: %v", err)
	}
	h.waitCommitted(1)

	// member-a comes back: its commit is refused.
	attempts.armed.Store(true)
	gated.open()
	resume()
	select {
	case err := <-attempts.moved:
		t.Logf("member-a's commit refused: %v", err)
	case <-attempts.applied:
		t.Fatal("member-a committed records that member-b had committed")
	case <-h.ctx.Done():
		t.Fatal("member-a's commit was not refused with ErrPositionMoved")
	}
	h.produce(200)
	h.waitCommitted(1)
	select {
	case err := <-a.done:
		if !errors.Is(err, iceberg.ErrPositionMoved) {
			t.Fatalf("member-a's Run: %v, want ErrPositionMoved", err)
		}
	default:
		h.stop(a) // it dropped its rows and rejoined
	}
	h.stop(b)
	h.check()
}
