package iceberg_test

import (
	"context"
	"fmt"
	"testing"

	iceberg "github.com/icewriter/iceberg"
)

// TestCopyOnWriteSplitRunRetry: a run coalesced from three batches and split into two segments (Upsert 5;
// Write 300; Upsert 5, 6, 300) whose first commit attempt fails before applying, applies but loses its reply,
// or meets a concurrent copy-on-write commit of another writer (upserting 6 and 7, in the same table file).
// The retry re-plans from scratch: the table equals the model, and on v3 row ids are unique and upserted keys
// keep theirs.
func TestCopyOnWriteSplitRunRetry(t *testing.T) {
	t.Parallel() // see TestMain
	for _, v := range []int{2, 3} {
		for _, mode := range []string{"fail", "lose", "concurrent"} {
			t.Run(fmt.Sprintf("v%d/%s", v, mode), func(t *testing.T) { copyOnWriteSplitRunRetry(t, v, mode) })
		}
	}
}

func copyOnWriteSplitRunRetry(t *testing.T, v int, mode string) {
	ctx := context.Background()
	cat, ident, model := closedCowTable(t, ctx, v)
	var s0 tableState
	if v >= 3 {
		s0 = observe(t, cat, ident, model)
	}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithMode(iceberg.CopyOnWrite),
		iceberg.WithFlushRows(1), iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompactionEvery(0))
	if err != nil {
		t.Fatal(err)
	}
	other, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithMode(iceberg.CopyOnWrite),
		iceberg.WithSmallFileCompactionEvery(0))
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	second := func() {
		cat.before = nil
		switch mode {
		case "fail":
			cat.failBefore = 1
		case "lose":
			cat.loseReplies = 1
		case "concurrent":
			commitMeanwhile(t, ctx, cat, other, other.Upsert, kvBatch([]int64{6, 7}, []int64{66, 77}))
		}
	}
	cat.mu.Lock()
	cat.before = func() {
		close(entered)
		<-release
		cat.before = second
	}
	cat.mu.Unlock()
	model.insert(1000, 1000)
	if err := w.Write(ctx, kvBatch([]int64{1000}, []int64{1000})); err != nil {
		t.Fatal(err)
	}
	<-entered
	model.upsert(5, -5)
	if err := w.Upsert(ctx, kvBatch([]int64{5}, []int64{-5})); err != nil {
		t.Fatal(err)
	}
	model.insert(300, 300)
	if err := w.Write(ctx, kvBatch([]int64{300}, []int64{300})); err != nil {
		t.Fatal(err)
	}
	if mode == "concurrent" {
		model.upsert(7, 77)
	}
	for _, id := range []int64{5, 6, 300} {
		model.upsert(id, -6)
	}
	if err := w.Upsert(ctx, kvBatch([]int64{5, 6, 300}, []int64{-6, -6, -6})); err != nil {
		t.Fatal(err)
	}
	waitStaged(t, w, 4)
	close(release)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	_ = other.Close(ctx)
	if st := w.Stats(); st.Retries == 0 || st.Commits != 2 {
		t.Fatalf("want two commits, the second retried: %+v", st)
	}
	compareKV(t, readKV(t, cat, ident), model)
	if v >= 3 {
		s1 := observe(t, cat, ident, model)
		for _, id := range []int64{5, 6, 7} {
			if s1.byID[id].rowID != s0.byID[id].rowID {
				t.Errorf("id %d: _row_id %d, was %d", id, s1.byID[id].rowID, s0.byID[id].rowID)
			}
		}
		if _, held := s0.rowIDs[s1.byID[300].rowID]; held {
			t.Errorf("id 300 (new) got a _row_id held before")
		}
	}
}
