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
// commit, a lost reply after a commit applied, or a failure before it.
type slowCatalog struct {
	icecatalog.Catalog
	latency time.Duration

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
}

func (c *slowCatalog) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	tbl, err := c.Catalog.LoadTable(ctx, ident)
	c.mu.Lock()
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

func (c *slowCatalog) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
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

type injectedError struct{}

func (injectedError) Error() string { return "injected: connection reset by peer" }

var errInjected error = injectedError{}
