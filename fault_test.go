package iceberg_test

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/seed"
)

// TestLostReplyNotCommittedTwice: the catalog applies a commit but the reply is lost; the writer must find
// its marker and not commit the batch again.
func TestLostReplyNotCommittedTwice(t *testing.T) {
	ctx := context.Background()
	cat := &slowCatalog{Catalog: openCatalog(t)}
	ident := table.Identifier{"fault", "lost"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema), iceberg.WithWriterID("lost"))
	if err != nil {
		t.Fatal(err)
	}
	g := seed.New(0, 1)
	writeSeed(t, w, g, 1000)
	cat.mu.Lock()
	cat.loseReplies = 1
	cat.mu.Unlock()
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	writeSeed(t, w, g, 500)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	counts, _ := readRows(t, cat, ident)
	assertIDs(t, counts, 0, 1500)
	if st := w.Stats(); st.Retries == 0 {
		t.Fatalf("expected a retry, stats %+v", st)
	}
}

// TestFailedCommitRetried: a commit that fails without applying is retried and lands once.
func TestFailedCommitRetried(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := &slowCatalog{Catalog: openCatalog(t)}
	ident := table.Identifier{"fault", "retry"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema))
	if err != nil {
		t.Fatal(err)
	}
	g := seed.New(0, 1)
	cat.mu.Lock()
	cat.failBefore = 3
	cat.mu.Unlock()
	writeSeed(t, w, g, 2000)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	counts, _ := readRows(t, cat, ident)
	assertIDs(t, counts, 0, 2000)
}

// TestCommitStateUnknown: a catalog that keeps failing past the commit timeout stops the writer with
// ErrCommitStateUnknown when an attempt may have applied; the writer refuses further work.
func TestCommitStateUnknown(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := &slowCatalog{Catalog: openCatalog(t)}
	ident := table.Identifier{"fault", "unknown"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema),
		iceberg.WithCommitTimeout(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	cat.mu.Lock()
	cat.failBefore = 1_000_000
	cat.mu.Unlock()
	writeSeed(t, w, seed.New(0, 1), 100)
	err = w.Flush(ctx)
	if !errors.Is(err, iceberg.ErrWriterFailed) || !errors.Is(err, iceberg.ErrCommitStateUnknown) {
		t.Fatalf("Flush: got %v, want ErrWriterFailed wrapping ErrCommitStateUnknown", err)
	}
	if err := w.Write(ctx, seed.New(100, 1).Batch(10)); !errors.Is(err, iceberg.ErrWriterFailed) {
		t.Fatalf("Write after failure: got %v", err)
	}
	_ = w.Close(ctx)
	// The run's outcome is unknown, so its data file is kept.
	loc := strings.TrimPrefix(w.Table().Location(), "file://")
	var parquet int
	_ = filepath.WalkDir(loc, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".parquet") {
			parquet++
		}
		return nil
	})
	if parquet == 0 {
		t.Fatalf("the data file of a commit in unknown state was deleted (looked under %s)", loc)
	}
}

// TestSlowFirstCommitAttemptIsRetried: a run's first attempt that takes longer than the whole commit timeout
// and is refused (another writer's commit landed first: the catalog answered) is retried once, and the retry's
// reload shows it did not apply and commits it, instead of the writer stopping with ErrCommitStateUnknown.
// A timeout of 1ns makes every attempt slower than it without waiting for one.
func TestSlowFirstCommitAttemptIsRetried(t *testing.T) {
	ctx := context.Background()
	cat := &slowCatalog{Catalog: openCatalog(t)}
	ident := table.Identifier{"fault", "slowfirst"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema),
		iceberg.WithCommitTimeout(time.Nanosecond))
	if err != nil {
		t.Fatal(err)
	}
	other, err := iceberg.NewWriter(ctx, cat, ident)
	if err != nil {
		t.Fatal(err)
	}
	commitBeforeNext(t, ctx, cat, other, other.Write, seed.New(1000, 2).Batch(10))
	writeSeed(t, w, seed.New(0, 1), 100)
	if err := w.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v; want the run committed by its retry", err)
	}
	if st := w.Stats(); st.Retries != 1 {
		t.Errorf("%d retries, want 1 (the refused first attempt)", st.Retries)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := other.Close(ctx); err != nil {
		t.Fatal(err)
	}
	counts, _ := readRows(t, cat, ident)
	want := map[int64]int{}
	for id := int64(0); id < 100; id++ {
		want[id] = 1
	}
	for id := int64(1000); id < 1010; id++ {
		want[id] = 1
	}
	if !maps.Equal(counts, want) {
		t.Fatalf("table holds %d ids, want ids 0..99 (the retried run) and 1000..1009 (the other writer's) once each", len(counts))
	}
}

// TestCloseAbortErrClosed covers the end of a writer's life.
func TestCloseAbortErrClosed(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"life", "events"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema), iceberg.WithFlushInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	g := seed.New(0, 1)
	writeSeed(t, w, g, 300)
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	writeSeed(t, w, g, 300) // discarded by Abort
	if err := w.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.DiscardedRows != 300 {
		t.Fatalf("discarded %d rows, want 300", st.DiscardedRows)
	}
	for name, call := range map[string]func() error{
		"Write":      func() error { return w.Write(ctx, g.Batch(1)) },
		"Flush":      func() error { return w.Flush(ctx) },
		"Checkpoint": func() error { return w.Checkpoint(ctx, "x") },
		"Close":      func() error { return w.Close(ctx) },
		"Abort":      func() error { return w.Abort(ctx) },
	} {
		if err := call(); !errors.Is(err, iceberg.ErrClosed) {
			t.Fatalf("%s after Abort: got %v, want ErrClosed", name, err)
		}
	}
	counts, _ := readRows(t, cat, ident)
	assertIDs(t, counts, 0, 300)
}

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

// TestFlushReturnsAfterAbort: a Flush waiting for a batch that Abort discards returns once Abort has, not when
// its own ctx (3 s) expires.
func TestFlushReturnsAfterAbort(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"life", "abort"}
	createTable(t, ctx, cat, ident, seed.Schema)
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
	if err := iceberg.WaitFor(ctx, w, func() bool { return w.Stats().Batches == 2 }); err != nil { // Flush sealed batch 2
		t.Fatal(err)
	}
	abortDone := make(chan error, 1)
	go func() { abortDone <- w.Abort(ctx) }()
	if err := iceberg.WaitFor(ctx, w, func() bool { return iceberg.Closing(w) }); err != nil {
		t.Fatal(err)
	}
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

// TestFlushIntervalCommits: rows below every size threshold still commit once the interval passes.
func TestFlushIntervalCommits(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"life", "interval"}
	commits := make(chan iceberg.CommitInfo, 10)
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema),
		iceberg.WithFlushInterval(50*time.Millisecond),
		iceberg.WithOnCommit(func(ci iceberg.CommitInfo) { commits <- ci }))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	writeSeed(t, w, seed.New(0, 1), 10)
	select {
	case ci := <-commits:
		if ci.Rows != 10 || ci.SnapshotID == 0 {
			t.Fatalf("commit info %+v", ci)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no commit after the flush interval")
	}
}

// TestBackpressure: with the memory limit reached and the catalog stalled, Write blocks until ctx is done, and
// returns ctx's error without accepting the rows.
func TestBackpressure(t *testing.T) {
	ctx := context.Background()
	cat := &slowCatalog{Catalog: openCatalog(t)}
	ident := table.Identifier{"life", "pressure"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema),
		iceberg.WithMaxUncommitted(1), iceberg.WithFlushRows(100), iceberg.WithCommitTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	cat.hold()
	g := seed.New(0, 1)
	defer w.Close(ctx)
	writeSeed(t, w, g, 100) // sealed: its commit waits at the gate
	if !cat.held(10 * time.Second) {
		t.Fatal("the commit did not reach the gate")
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	rec := g.Batch(100)
	err = w.Write(short, rec)
	rec.Release()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Write under backpressure: got %v, want DeadlineExceeded", err)
	}
	cat.release()
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	counts, _ := readRows(t, cat, ident)
	assertIDs(t, counts, 0, 100)
}
