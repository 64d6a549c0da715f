package iceberg_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/seed"
)

// conflictRound is a catalog whose first n commits meet before any goes through: the first to arrive commits,
// then the others, all built on the head it moved, so each of them is rejected because the table moved. It
// records every commit the catalog rejects.
type conflictRound struct {
	icecatalog.Catalog
	n int

	mu         sync.Mutex
	arrived    int
	all        chan struct{} // closed when n commits arrived
	leaderDone chan struct{} // closed when the first commit to arrive has returned
	rejected   []error
}

func newConflictRound(cat icecatalog.Catalog, n int) *conflictRound {
	return &conflictRound{Catalog: cat, n: n, all: make(chan struct{}), leaderDone: make(chan struct{})}
}

func (c *conflictRound) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
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

// TestStatsConflictsCountEveryRejectedAttempt: with several writers on one SQLite table, Stats.Conflicts counts
// every attempt the catalog rejected because the table moved, whichever way the catalog words it (iceberg-go's
// SQL catalog answers a moved branch with "requirement failed: branch main has changed", which wraps no
// sentinel, and a lost compare-and-swap with table.ErrCommitFailed). Every rejected attempt is retried, so the
// writers' Retries add up to the same count.
func TestStatsConflictsCountEveryRejectedAttempt(t *testing.T) {
	ctx := context.Background()
	const writers, commits, rows = 4, 5, 200
	base := openCatalog(t)
	ident := table.Identifier{"conflicts", "events"}
	createTable(t, ctx, base, ident, seed.Schema)
	cat := newConflictRound(base, writers)

	stats := make([]iceberg.Stats, writers)
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithFlushInterval(0), iceberg.WithQuickRetriesForTest())
			if err != nil {
				errs <- err
				return
			}
			g := seed.New(int64(i*commits*rows), uint64(i))
			for range commits {
				rec := g.Batch(rows)
				err := w.Write(ctx, rec)
				rec.Release()
				if err == nil {
					err = w.Flush(ctx)
				}
				if err != nil {
					errs <- err
					break
				}
			}
			if err := w.Close(ctx); err != nil {
				errs <- err
			}
			stats[i] = w.Stats()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	var conflicts, retries int64
	for _, st := range stats {
		conflicts += st.Conflicts
		retries += st.Retries
	}
	cat.mu.Lock()
	rejected := cat.rejected
	cat.mu.Unlock()
	worded := 0 // rejections that wrap no sentinel: only their wording says the table moved
	for _, err := range rejected {
		if !errors.Is(err, table.ErrCommitFailed) {
			worded++
			if !strings.Contains(strings.ToLower(err.Error()), "requirement failed") {
				t.Errorf("a rejection that is no conflict: %v", err)
			}
		}
	}
	t.Logf("%d attempts rejected (%d by a requirement's wording), %d conflicts, %d retries", len(rejected), worded, conflicts, retries)
	if len(rejected) < writers-1 || worded == 0 {
		t.Fatalf("%d attempts rejected, %d of them by a requirement: the first round makes %d", len(rejected), worded, writers-1)
	}
	if conflicts != int64(len(rejected)) || retries != int64(len(rejected)) {
		t.Errorf("Stats: %d conflicts and %d retries, want %d each (the attempts the catalog rejected)", conflicts, retries, len(rejected))
	}
	counts, _ := readRows(t, base, ident)
	assertIDs(t, counts, 0, writers*commits*rows)
}
