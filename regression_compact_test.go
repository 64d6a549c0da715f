package iceberg_test

import (
	"context"
	"testing"

	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
)

// TestCompactLostReplyDropsKeyIndex: a compaction whose reply is lost applied; the retry finds nothing to do
// and returns success without re-indexing. The key index still points at the rewritten-away files and
// foreignSince ignores the writer's own compaction snapshot, so the next upsert's deletion vector targets a dead
// file and the old row survives in the compacted file.
func TestCompactLostReplyDropsKeyIndex(t *testing.T) {
	ctx := context.Background()
	cat := &slowCatalog{Catalog: openCatalog(t)}
	ident := table.Identifier{"review", "compact"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(kvSchema, iceberg.IdentifierFields("id"),
		iceberg.FormatVersion(3)), iceberg.WithFlushInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	ids := func(from, to int64) ([]int64, []int64) {
		var a, b []int64
		for i := from; i < to; i++ {
			a = append(a, i)
			b = append(b, 0)
		}
		return a, b
	}
	upsert := func(from, to, v int64) {
		a, b := ids(from, to)
		for i := range b {
			b[i] = v
		}
		rec := kvBatch(a, b)
		defer rec.Release()
		if err := w.Upsert(ctx, rec); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	upsert(0, 100, 1)
	upsert(0, 50, 2)
	cat.mu.Lock()
	cat.loseReplies = 1
	cat.mu.Unlock()
	res, err := w.Compact(ctx)
	t.Logf("compact: %+v err=%v", res, err)
	upsert(10, 11, 3)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got := readKV(t, cat, ident)
	if len(got[10]) != 1 || got[10][0] != 3 {
		t.Fatalf("id 10 has values %v, want [3]", got[10])
	}
	for id := int64(0); id < 100; id++ {
		if len(got[id]) != 1 {
			t.Fatalf("id %d has %d rows: %v", id, len(got[id]), got[id])
		}
	}
}
