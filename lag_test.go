package iceberg_test

import (
	"context"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/seed"
)

// within fails unless at lies in [from, to].
func within(t *testing.T, what string, at, from, to time.Time) {
	t.Helper()
	if at.Before(from) || at.After(to) {
		t.Fatalf("%s at %v, want within %v..%v", what, at, from, to)
	}
}

// TestStatsFreshness: Stats tells when the oldest row not yet committed was accepted (what a freshness gauge
// reads) and when the latest commit returned, and a commit clears the first.
func TestStatsFreshness(t *testing.T) {
	ctx := context.Background()
	cat := &slowCatalog{Catalog: openCatalog(t)}
	w, err := iceberg.NewWriter(ctx, cat, table.Identifier{"lag", "fresh"}, iceberg.WithCreate(seed.Schema),
		iceberg.WithFlushInterval(0), iceberg.WithFlushRows(150))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	if st := w.Stats(); !st.OldestUncommitted.IsZero() || !st.LastCommit.IsZero() {
		t.Fatalf("a new writer: %+v", st)
	}
	g := seed.New(0, 1)
	cat.hold() // the batch sealed below stays uncommitted
	before := time.Now()
	writeSeed(t, w, g, 100)
	between := time.Now()
	writeSeed(t, w, g, 100) // seals the first 200 rows into a batch; the next ones open a new buffer
	writeSeed(t, w, g, 10)
	within(t, "oldest uncommitted row", w.Stats().OldestUncommitted, before, between)
	cat.release()
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	flushed := time.Now()
	st := w.Stats()
	if !st.OldestUncommitted.IsZero() {
		t.Fatalf("after Flush the oldest uncommitted row is from %v", st.OldestUncommitted)
	}
	within(t, "last commit", st.LastCommit, between, flushed)
}

// TestPositionLags: per source partition, the newest position accepted and committed, and since when the
// committed one trails; a commit catches the partitions up, and later checkpoints trail again.
func TestPositionLags(t *testing.T) {
	ctx := context.Background()
	cat := &slowCatalog{Catalog: openCatalog(t)}
	w, err := iceberg.NewWriter(ctx, cat, table.Identifier{"lag", "positions"}, iceberg.WithCreate(seed.Schema),
		iceberg.WithFlushInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	if lags := w.PositionLags(); len(lags) != 0 {
		t.Fatalf("a new writer: %+v", lags)
	}
	g := seed.New(0, 1)
	a, b := w.Source("a"), w.Source("b")
	write := func(s *iceberg.Source, pos string) {
		t.Helper()
		rec := g.Batch(10)
		defer rec.Release()
		if err := s.Write(ctx, rec); err != nil {
			t.Fatal(err)
		}
		if err := s.Checkpoint(ctx, pos); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Now()
	write(a, "5")
	t1 := time.Now()
	write(b, "1")
	write(a, "7")
	lags := w.PositionLags()
	if len(lags) != 2 || lags[0].Partition != "a" || lags[0].Accepted != "7" || lags[0].Committed != "" ||
		lags[1].Partition != "b" || lags[1].Accepted != "1" || lags[1].Committed != "" {
		t.Fatalf("before any commit: %+v", lags)
	}
	within(t, "a's oldest pending checkpoint", lags[0].Since, t0, t1)
	within(t, "b's oldest pending checkpoint", lags[1].Since, t1, time.Now())

	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, l := range w.PositionLags() {
		if l.Committed != l.Accepted || !l.Since.IsZero() {
			t.Fatalf("after Flush: %+v", l)
		}
	}

	// A sealed batch whose commit is held trails as an open checkpoint does.
	cat.hold()
	t2 := time.Now()
	write(a, "9")
	go w.Flush(ctx)
	if !cat.held(10 * time.Second) {
		t.Fatal("the commit did not reach the gate")
	}
	lags = w.PositionLags()
	if lags[0].Accepted != "9" || lags[0].Committed != "7" || lags[1].Committed != "1" || !lags[1].Since.IsZero() {
		t.Fatalf("with a's commit held: %+v", lags)
	}
	within(t, "a's held checkpoint", lags[0].Since, t2, time.Now())
	cat.release()
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if l := w.PositionLags()[0]; l.Committed != "9" || !l.Since.IsZero() {
		t.Fatalf("after the held commit: %+v", l)
	}
}
