package iceberg_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/seed"
)

// What a long-running writer keeps of what it committed: the table's metadata, nothing more. iceberg-go's
// snapshot producer gives the snapshot it stages a parent id that points into the producer itself, and a
// catalog that applies the update in process (the SQL catalogs) returned metadata holding that snapshot: the
// producer with every file it committed, its transaction, and through it the table the transaction started
// from, whose metadata held the commit before the same way. Every file ever committed stayed reachable.

// liveCount counts tracked objects the garbage collector has not freed: track sets a finalizer that counts
// each one down.
type liveCount struct{ n atomic.Int64 }

func (c *liveCount) track(obj any) {
	c.n.Add(1)
	runtime.SetFinalizer(obj, func(any) { c.n.Add(-1) })
}

// afterGC collects until the count stops falling and returns it. Finalizers run on one goroutine, a cycle's
// batch after the one before: once a sentinel finalized in a cycle has run, every finalizer of the cycles before
// has too. An object only a finalized one kept is freed a cycle later: the count is final when it is the same
// after two cycles.
func (c *liveCount) afterGC(t *testing.T) int64 {
	prev := int64(-1)
	for {
		ran := make(chan struct{})
		runtime.SetFinalizer(new([64]byte), func(*[64]byte) { close(ran) })
		runtime.GC()
		select {
		case <-ran:
		case <-time.After(time.Minute):
			t.Fatal("no finalizer ran within a minute of a collection")
		}
		n := c.n.Load()
		if n == prev {
			return n
		}
		prev = n
	}
}

// trackingCommitter tracks the data files of every run it commits.
type trackingCommitter struct {
	iceberg.Committer
	live liveCount
}

func (c *trackingCommitter) Commit(ctx context.Context, run *iceberg.Run) (*iceberg.CommitResult, error) {
	for _, s := range run.Segments {
		for _, f := range s.DataFiles {
			c.live.track(f)
		}
	}
	return c.Committer.Commit(ctx, run)
}

// The data files a writer commits are garbage once committed: a writer committing many times holds no more of
// them than a writer committing once. Through the writer's own committer, and through NewCatalogCommitter as a
// coordinator of many writers runs it. It counts the tracked files themselves (finalizers), not the heap, so
// it runs beside other tests.
func TestCommittedFilesAreNotRetained(t *testing.T) {
	t.Parallel() // see TestMain
	for _, tc := range []struct {
		name string
		opts func(cat icecatalog.Catalog, tracker *trackingCommitter) []iceberg.Option
	}{
		{"writer", func(_ icecatalog.Catalog, tracker *trackingCommitter) []iceberg.Option {
			return []iceberg.Option{iceberg.WithCommitterWrapForTest(func(c iceberg.Committer) iceberg.Committer {
				tracker.Committer = c
				return tracker
			})}
		}},
		{"catalog-committer", func(cat icecatalog.Catalog, tracker *trackingCommitter) []iceberg.Option {
			tracker.Committer = iceberg.NewCatalogCommitter(cat, 0)
			return []iceberg.Option{iceberg.WithCommitter(tracker)}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			cat := openCatalog(t)
			ident := table.Identifier{"db", "retained"}
			tracker := &trackingCommitter{}
			// Without small-file compaction, whose commits are not the runs' and whose rewrite frees what it
			// replaced: the runs' commits alone must not keep their files.
			opts := append(tc.opts(cat, tracker), iceberg.WithCreate(seed.Schema), iceberg.WithSmallFileCompactionEvery(0))
			w, err := iceberg.NewWriter(ctx, cat, ident, opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close(ctx)
			const commits = 40
			commitSeed(t, w, seed.New(0, 1), commits, 10)
			if n := tracker.live.afterGC(t); n > 1 {
				t.Fatalf("%d of the %d data files committed (one a commit) are still reachable, want at most the "+
					"last commit's: committed metadata keeps them", n, commits)
			}
			counts, _ := readRows(t, cat, ident)
			assertIDs(t, counts, 0, commits*10)
		})
	}
}
