package iceberg_test

import (
	"context"
	"testing"

	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/seed"
)

// TestSmallFileCompaction: 70 tiny commits to a table the writer created end in far fewer live files (merged by
// size tier inside the commit loop), every row read back once.
func TestSmallFileCompaction(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"small", "files"}
	passes := &compactionPasses{ended: make(chan struct{}, 4)}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema), iceberg.WithHooks(passes))
	if err != nil {
		t.Fatal(err)
	}
	g := seed.New(0, 1)
	for i := 0; i < 70; i++ { // two passes of the default compaction, every 32 commits: one alone leaves over 30 files
		writeSeed(t, w, g, 20)
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Passes run off the commit path, so Close can come before the pass due at commit 64 ran (the test failed
	// about one run in four under load): wait for both to end, as they would in a stream that goes on.
	passes.wait(t, 2)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	_, tasks := liveDataFiles(t, cat, ident)
	if len(tasks) > 30 {
		t.Fatalf("%d live data files after 70 commits, want the small ones merged", len(tasks))
	}
	counts, _ := readRows(t, cat, ident)
	assertIDs(t, counts, 0, 1400)

	// Off on request.
	off, err := iceberg.NewWriter(ctx, cat, table.Identifier{"small", "off"}, iceberg.WithCreate(seed.Schema),
		iceberg.WithSmallFileCompactionEvery(0))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 34; i++ { // past the default's 32
		writeSeed(t, off, g, 5)
		if err := off.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	_ = off.Close(ctx)
	if _, tasks := liveDataFiles(t, cat, table.Identifier{"small", "off"}); len(tasks) != 34 {
		t.Fatalf("%d files with small-file compaction off, want 34", len(tasks))
	}
}
