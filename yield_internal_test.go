package iceberg

import (
	"context"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/icewriter/iceberg/internal/commit"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// TestYieldWait: a writer yields before a run commit only when it made the last two or more snapshots of the
// branch in a row and a writer of another process committed within commit.YieldWindow;
// writers taking turns, a writer alone since long, and one whose rival commits from this process never yield.
func TestYieldWait(t *testing.T) {
	ctx := context.Background()
	cat := tabletest.TempCatalog(t)
	ident := table.Identifier{"b", "turns"}
	open := func(id string) *Writer {
		w, err := NewWriter(ctx, cat, ident, WithCreate(idNameSchema), WithWriterID(id), WithFlushInterval(0),
			WithSmallFileCompactionEvery(0))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = w.Close(ctx) })
		return w
	}
	commitN := func(w *Writer, n int) {
		t.Helper()
		for i := range n {
			if err := w.Write(ctx, idNameRows(i, 1)); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	a, b := open("a"), open("b") // each NewWriter commits a fence snapshot
	yields := func(id string, after time.Duration) bool {
		t.Helper()
		tbl, err := cat.LoadTable(ctx, ident)
		if err != nil {
			t.Fatal(err)
		}
		// a and b stand for writers of two processes; the gates take turns between writers of one.
		return commit.YieldWait(tbl.Metadata(), "main", id, time.Now().Add(after), func(string) bool { return false }, time.Second, time.Hour) > 0
	}
	if yields("a", 0) || yields("b", 0) {
		t.Fatal("a yields after one snapshot of b's")
	}
	commitN(a, 1)
	if yields("a", 0) {
		t.Fatal("a yields with a streak of one")
	}
	commitN(a, 2)
	if !yields("a", 0) {
		t.Fatal("a does not yield after a streak of three, b's fence just before")
	}
	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	if d := commit.YieldWait(tbl.Metadata(), "main", "a", time.Now(), func(string) bool { return false }, time.Second, time.Hour); d < 2*time.Second {
		t.Fatalf("a yields %v after a streak of three, want at least the second retry's wait (2 s with minWait 1 s)", d)
	}
	if d := commit.YieldWait(tbl.Metadata(), "main", "a", time.Now(), func(id string) bool { return id == "b" }, time.Second, time.Hour); d != 0 {
		t.Fatalf("a yields %v to b, a writer of its own process", d)
	}
	if yields("a", commit.YieldWindow+time.Second) {
		t.Fatal("a yields although b's last commit is older than YieldWindow")
	}
	if yields("b", 0) {
		t.Fatal("b yields although a made the last snapshots")
	}
	commitN(b, 1)
	if yields("a", 0) || yields("b", 0) {
		t.Fatal("a yields after b's commit, or b with a streak of one")
	}
}
