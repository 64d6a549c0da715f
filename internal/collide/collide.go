// Package collide makes writers collide on one table, for the tests of conflicts, retries and what reports them
// (Stats, logs, hooks, the OpenTelemetry plugin): a catalog whose first commits all build on one head, and a
// runner of writers that commit at once.
package collide

import (
	"context"
	"errors"
	"sync"

	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/seed"
)

// Catalog is a catalog whose first n commits meet before any goes through: the first to arrive commits, then the
// others, all built on the head it moved, so each of them is rejected because the table moved (iceberg-go's SQL
// catalog says "requirement failed: branch "main" has changed"). Later commits go straight through. It records
// every commit the catalog rejects.
type Catalog struct {
	icecatalog.Catalog
	n int

	mu         sync.Mutex
	arrived    int
	all        chan struct{} // closed when n commits arrived
	leaderDone chan struct{} // closed when the first commit to arrive has returned
	rejected   []error
}

// NewCatalog wraps cat so that its first n commits collide.
func NewCatalog(cat icecatalog.Catalog, n int) *Catalog {
	return &Catalog{Catalog: cat, n: n, all: make(chan struct{}), leaderDone: make(chan struct{})}
}

// CommitTable holds the first n commits until all of them arrived, lets the first through, then the others.
func (c *Catalog) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
	c.mu.Lock()
	c.arrived++
	k := c.arrived
	if k == c.n {
		close(c.all)
	}
	c.mu.Unlock()
	if k <= c.n {
		wait := []chan struct{}{c.all, c.leaderDone}
		if k == 1 {
			wait = wait[:1] // the leader waits for the others to arrive, not for itself
		}
		for _, ch := range wait {
			select {
			case <-ch:
			case <-ctx.Done():
				return nil, "", ctx.Err()
			}
		}
	}
	meta, loc, err := c.Catalog.CommitTable(ctx, ident, reqs, updates)
	if k == 1 {
		close(c.leaderDone)
	}
	if err != nil {
		c.mu.Lock()
		c.rejected = append(c.rejected, err)
		c.mu.Unlock()
	}
	return meta, loc, err
}

// Rejected returns the errors of the commits the catalog rejected so far.
func (c *Catalog) Rejected() []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]error(nil), c.rejected...)
}

// Writers runs n writers with random IDs on the table ident of cat at once (no flush interval: one commit per
// Flush), each making commits commits of rows seed events (writer i's ids start at i*commits*rows), with opts(i)
// added (nil: none). It returns their Stats after Close, and the errors any of them met.
func Writers(ctx context.Context, cat icecatalog.Catalog, ident table.Identifier, n, commits, rows int,
	opts func(i int) []iceberg.Option) ([]iceberg.Stats, error) {
	stats := make([]iceberg.Stats, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := []iceberg.Option{iceberg.WithFlushInterval(0)}
			if opts != nil {
				o = append(o, opts(i)...)
			}
			w, err := iceberg.NewWriter(ctx, cat, ident, o...)
			if err != nil {
				errs[i] = err
				return
			}
			g := seed.New(int64(i*commits*rows), uint64(i))
			for range commits {
				rec := g.Batch(rows)
				err = w.Write(ctx, rec)
				rec.Release()
				if err == nil {
					err = w.Flush(ctx)
				}
				if err != nil {
					break
				}
			}
			errs[i] = errors.Join(err, w.Close(ctx))
			stats[i] = w.Stats()
		}()
	}
	wg.Wait()
	return stats, errors.Join(errs...)
}
