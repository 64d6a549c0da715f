package iceberg_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
)

// slowCatalog wraps a real catalog to inject what a real server cannot produce on demand: latency on every
// commit, commits held at a gate, a lost reply after a commit applied, or a failure before it.
type slowCatalog struct {
	icecatalog.Catalog
	latency time.Duration

	// gate, while not nil, holds every commit until release (or gateLimit).
	gateMu    sync.Mutex
	gate      *commitGate
	gateWaits int // commits that waited at the gate
	gateLate  int // commits that gave up waiting after gateLimit

	mu sync.Mutex
	// loseReplies makes the next n commits apply and then report an error (a reply lost on the way back).
	loseReplies int
	// failBefore makes the next n commits fail without applying.
	failBefore int
	commits    int
	// before runs (with mu held) before the next commit reaches the catalog.
	before func()
	// afterLost runs (without mu) after a commit applied and before its reply is dropped: what happens
	// elsewhere while the writer cannot hear back (another writer commits and expires snapshots).
	afterLost func()
	// afterLoad runs (without mu) after each of the next loadHooks table loads, before the caller sees the
	// table: the table moves on while the caller plans against what it loaded.
	afterLoad func()
	loadHooks int
	loads     int // table loads so far
}

func (c *slowCatalog) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	tbl, err := c.Catalog.LoadTable(ctx, ident)
	c.mu.Lock()
	c.loads++
	hook := c.afterLoad
	if c.loadHooks <= 0 {
		hook = nil
	} else {
		c.loadHooks--
	}
	c.mu.Unlock()
	if err == nil && hook != nil {
		hook()
	}
	return tbl, err
}

// loadCount returns the table loads so far.
func (c *slowCatalog) loadCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.loads
}

// gateLimit bounds a commit's wait at a held gate: a test that holds commits and then blocks (a Write waiting
// for commits) fails instead of hanging.
const gateLimit = 30 * time.Second

// commitGate is one hold of the gate: open is closed by release, arrived when the first commit waits.
type commitGate struct {
	open, arrived chan struct{}
	anyArrived    bool
}

// hold makes commits wait at the gate until release.
func (c *slowCatalog) hold() {
	c.gateMu.Lock()
	defer c.gateMu.Unlock()
	if c.gate == nil {
		c.gate = &commitGate{open: make(chan struct{}), arrived: make(chan struct{})}
	}
}

// release lets the commits waiting at the gate, and every later one, through.
func (c *slowCatalog) release() {
	c.gateMu.Lock()
	defer c.gateMu.Unlock()
	if c.gate != nil {
		close(c.gate.open)
		c.gate = nil
	}
}

// held waits until a commit waits at the held gate (true), or the gate is not held, or d passes (false).
func (c *slowCatalog) held(d time.Duration) bool {
	c.gateMu.Lock()
	g := c.gate
	c.gateMu.Unlock()
	if g == nil {
		return false
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-g.arrived:
		return true
	case <-g.open:
	case <-timer.C:
	}
	return false
}

// gateCounts returns how many commits waited at the gate and how many of them gave up after gateLimit.
func (c *slowCatalog) gateCounts() (waits, late int) {
	c.gateMu.Lock()
	defer c.gateMu.Unlock()
	return c.gateWaits, c.gateLate
}

// waitGate waits while the gate is held.
func (c *slowCatalog) waitGate(ctx context.Context) error {
	c.gateMu.Lock()
	g := c.gate
	if g != nil {
		c.gateWaits++
		if !g.anyArrived {
			g.anyArrived = true
			close(g.arrived)
		}
	}
	c.gateMu.Unlock()
	if g == nil {
		return nil
	}
	timer := time.NewTimer(gateLimit)
	defer timer.Stop()
	select {
	case <-g.open:
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		c.gateMu.Lock()
		c.gateLate++
		c.gateMu.Unlock()
	}
	return nil
}

func (c *slowCatalog) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
	if err := c.waitGate(ctx); err != nil {
		return nil, "", err
	}
	if c.latency > 0 {
		time.Sleep(c.latency)
	}
	c.mu.Lock()
	if c.before != nil {
		c.before()
	}
	c.commits++
	fail := c.failBefore > 0
	if fail {
		c.failBefore--
	}
	c.mu.Unlock()
	if fail {
		return nil, "", errInjected
	}
	meta, loc, err := c.Catalog.CommitTable(ctx, ident, reqs, updates)
	c.mu.Lock()
	lose := err == nil && c.loseReplies > 0
	if lose {
		c.loseReplies--
	}
	after := c.afterLost
	c.mu.Unlock()
	if lose {
		if after != nil {
			after()
		}
		return nil, "", errInjected
	}
	return meta, loc, err
}

// commitMeanwhile is for a before hook, which runs with c.mu held on the hooked writer's commit goroutine: it
// releases mu while other commits rec through op (its Write or Upsert) and a Flush, so that other's commit lands
// just before the hooked one. Errors go to t.Error.
func commitMeanwhile(t *testing.T, ctx context.Context, c *slowCatalog, other *iceberg.Writer, op func(context.Context, arrow.RecordBatch) error, rec arrow.RecordBatch) {
	c.mu.Unlock()
	defer c.mu.Lock()
	if err := op(ctx, rec); err != nil {
		t.Error(err)
	}
	if err := other.Flush(ctx); err != nil {
		t.Error(err)
	}
}

// commitBeforeNext has other's op(rec) and a Flush of it land just before the next commit reaches the catalog
// (once): that commit was built on a head that has moved, as if another process committed first.
func commitBeforeNext(t *testing.T, ctx context.Context, c *slowCatalog, other *iceberg.Writer, op func(context.Context, arrow.RecordBatch) error, rec arrow.RecordBatch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.before = func() {
		c.before = nil
		commitMeanwhile(t, ctx, c, other, op, rec)
	}
}

type injectedError struct{}

func (injectedError) Error() string { return "injected: connection reset by peer" }

var errInjected error = injectedError{}
