package iceberg_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/seed"
)

// compactions is a HookCompaction that hands each compaction to a channel.
type compactions chan iceberg.Compaction

func (c compactions) OnCompaction(ev iceberg.Compaction) { c <- ev }

// TestCompactionDoesNotHoldLiveFlushes: a small-file compaction pass of the writer's maintenance is held after
// writing its files, before its commit. Meanwhile the writer goes on committing: flushes of new rows and of
// upserts of rows inside the very files the pass rewrites (equality deletes committed after the pass's
// snapshot) each return while the pass is held. Released, the pass commits its rewrite, and the table holds
// every row once with its newest values: the rewritten files kept the pass snapshot's sequence number, so the
// upserts' equality deletes still apply to them.
func TestCompactionDoesNotHoldLiveFlushes(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"compact", "live"}
	held, release := make(chan struct{}), make(chan struct{})
	undo := iceberg.HoldRewritesForTest(func() {
		close(held)
		<-release
	})
	defer undo()
	events := make(compactions, 4)
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema), iceberg.WithKeys("id"),
		iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompaction(8), iceberg.WithHooks(events),
		// Upserts as equality deletes, the case this test is about: no key index (on v2 it writes position
		// deletes on the held pass's files) and no conversion of the equality deletes (its position deletes
		// too): either makes the pass give up, since a position delete on a file it rewrote would be lost.
		iceberg.WithKeyIndexBytes(0), iceberg.WithDeleteConversion(0))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	var once sync.Once
	letGo := func() { once.Do(func() { close(release) }) }
	defer letGo() // before Close: a failed test must not leave the pass held
	g := seed.New(0, 1)
	rows := int64(0)
	// Eight commits of 50 rows: the pass after the eighth merges them.
	commitSeed(t, w, g, 8, 50)
	rows += 8 * 50
	select {
	case <-held:
	case <-time.After(time.Minute):
		t.Fatal("no compaction pass after 8 commits")
	}
	// While the pass is held: commits of new rows and of upserts of the rows it rewrites. Each flush must
	// return while the pass waits (a pass inside the commit loop would hold them until the timeout).
	upserts := seed.New(0, 99)
	want := map[int64]map[string]any{}
	for i := 0; i < 10; i++ {
		writeSeed(t, w, g, 20)
		rows += 20
		rec := upserts.Batch(30) // ids 30i..30i+29, in the held pass's files
		if err := w.Upsert(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := w.Flush(fctx)
		cancel()
		if err != nil {
			t.Fatalf("flush %d while a compaction pass is held: %v", i, err)
		}
	}
	_, model := readRows(t, cat, ident) // every upsert committed: the model the compaction must keep
	for id := int64(0); id < 300; id++ {
		want[id] = model[id]
	}
	letGo()
	ev := <-events
	if ev.Err != nil || ev.Result.SnapshotID == 0 || ev.Result.RewrittenDataFiles < 8 {
		t.Fatalf("compaction after the held commits: %+v", ev)
	}
	counts, got := readRows(t, cat, ident)
	assertIDs(t, counts, 0, rows)
	for id, row := range want {
		if got[id]["value"] != row["value"] || got[id]["info"] != row["info"] {
			t.Fatalf("id %d after the compaction: %v, want %v", id, got[id], row)
		}
	}
	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(planFiles(t, tbl)); n > 12 {
		t.Fatalf("%d data files after the compaction, want the 8 first ones merged", n)
	}
}
