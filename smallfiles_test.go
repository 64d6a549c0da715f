package iceberg_test

import (
	"context"
	"testing"

	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/seed"
)

// TestSmallFileCompaction: tiny commits to a table the writer created end in far fewer live files (merged by
// size tier inside the commit loop), every row read back once: two passes, every 8 commits (ICEWRITER_SOAK=1:
// the default, every 32, over 70 commits).
func TestSmallFileCompaction(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"small", "files"}
	passes := &compactionPasses{ended: make(chan struct{}, 4)}
	every := iceberg.SoakForTest(t, 8, 32)
	// Two passes; one alone leaves more than the limit: the newer commits plus the merged files.
	commits, limit := 2*every+6, iceberg.SoakForTest(t, 10, 30)
	opts := []iceberg.Option{iceberg.WithCreate(seed.Schema), iceberg.WithHooks(passes)}
	if every != 32 { // the soak runs the default
		opts = append(opts, iceberg.WithSmallFileCompactionEvery(every))
	}
	w, err := iceberg.NewWriter(ctx, cat, ident, opts...)
	if err != nil {
		t.Fatal(err)
	}
	g := seed.New(0, 1)
	for i := 0; i < commits; i++ {
		writeSeed(t, w, g, 20)
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Passes run off the commit path, so Close can come before the second pass ran (the test failed
	// about one run in four under load): wait for both to end, as they would in a stream that goes on.
	passes.wait(t, 2)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	_, tasks := liveDataFiles(t, cat, ident)
	if len(tasks) > limit {
		t.Fatalf("%d live data files after %d commits, want the small ones merged (at most %d)", len(tasks), commits, limit)
	}
	counts, _ := readRows(t, cat, ident)
	assertIDs(t, counts, 0, int64(commits*20))

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
