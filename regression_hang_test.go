package iceberg_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/seed"
)

// gateCommitter blocks its first Commit until released.
type gateCommitter struct {
	inner   iceberg.Committer
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (g *gateCommitter) Commit(ctx context.Context, run *iceberg.Run) (*iceberg.CommitResult, error) {
	first := false
	g.once.Do(func() { first = true })
	if first {
		close(g.entered)
		<-g.release
	}
	return g.inner.Commit(ctx, run)
}

// TestFlushReturnsAfterAbort: a Flush waiting for a batch that Abort discards never returns (it ignores
// w.closed), until its own ctx expires.
func TestFlushReturnsAfterAbort(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"review", "abort"}
	setup, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema))
	if err != nil {
		t.Fatal(err)
	}
	_ = setup.Close(ctx)
	gc := &gateCommitter{inner: iceberg.NewCatalogCommitter(cat, time.Minute), entered: make(chan struct{}), release: make(chan struct{})}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCommitter(gc), iceberg.WithFlushInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	g := seed.New(0, 1)
	writeSeed(t, w, g, 100)
	go func() { _ = w.Flush(ctx) }() // seals batch 1; its commit blocks in the committer
	<-gc.entered
	writeSeed(t, w, g, 100)
	flushErr := make(chan error, 1)
	go func() {
		fctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		flushErr <- w.Flush(fctx) // waits for batch 2
	}()
	time.Sleep(100 * time.Millisecond)
	abortDone := make(chan error, 1)
	go func() { abortDone <- w.Abort(ctx) }()
	time.Sleep(100 * time.Millisecond)
	close(gc.release)
	if err := <-abortDone; err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = <-flushErr
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Flush hung after Abort for %v and returned %v; want ErrClosed promptly", time.Since(start), err)
	}
	t.Logf("flush returned %v", err)
}

// TestCheckpointsWriteDoesNotDeadlock: with WithCheckpoints, batches sealed by policy after the last token can
// never commit, yet they count against WithMaxUncommitted: Write blocks forever, and a single-threaded caller
// never reaches its next Checkpoint.
func TestCheckpointsWriteDoesNotDeadlock(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"review", "ckpt"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema), iceberg.WithWriterID("c"),
		iceberg.WithCheckpoints(), iceberg.WithFlushRows(100), iceberg.WithMaxUncommitted(4))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort(ctx)
	g := seed.New(0, 1)
	for i := 0; i < 10; i++ { // 1,000 rows between two checkpoints
		rec := g.Batch(100)
		wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := w.Write(wctx, rec)
		cancel()
		rec.Release()
		if err != nil {
			t.Fatalf("Write %d between checkpoints: %v (deadlock: only Checkpoint could unblock it)", i, err)
		}
	}
	if err := w.Checkpoint(ctx, "t1"); err != nil {
		t.Fatal(err)
	}
}
