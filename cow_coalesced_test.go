package iceberg_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
)

// TestCopyOnWriteCoalescedModel: random Write/Upsert/Delete batches (keys repeating inside and across
// batches) on a copy-on-write table whose commits are slow, so that many batches coalesce into runs split into
// several segments; v2 and v3, partitioned and not. The table must equal the sequential model at every Flush
// and at the end (v3: every _row_id non-null, checked by readLineage).
func TestCopyOnWriteCoalescedModel(t *testing.T) {
	for trial := 0; trial < 4; trial++ {
		version := 2 + trial%2
		parts := trial >= 2
		t.Run(fmt.Sprintf("v%d/partitioned=%v", version, parts), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(trial), 77))
			ctx := context.Background()
			cat := &slowCatalog{Catalog: openCatalog(t), latency: 25 * time.Millisecond}
			ident := table.Identifier{"cow", "coalesced"}
			create := []iceberg.CreateOption{iceberg.IdentifierFields("id"), iceberg.FormatVersion(version)}
			if parts {
				create = append(create, iceberg.PartitionBy("bucket(3, id)"))
			}
			w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(kvSchema, create...),
				iceberg.WithMode(iceberg.CopyOnWrite), iceberg.WithFlushRows(1+rng.IntN(8)),
				iceberg.WithMaxInFlight(4), iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompaction(0))
			if err != nil {
				t.Fatal(err)
			}
			model := kvModel{}
			ops := &kvOps{rng: rng, keySpace: 30, maxRows: 5, writes: 3}
			for op := 0; op < 90; op++ {
				ops.apply(t, ctx, w, model)
				if rng.IntN(40) == 0 {
					if err := w.Flush(ctx); err != nil {
						t.Fatal(err)
					}
					compareKV(t, readKV(t, cat, ident), model)
					if version >= 3 {
						readLineage(t, cat, ident)
					}
				}
			}
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
			compareKV(t, readKV(t, cat, ident), model)
			if version >= 3 {
				readLineage(t, cat, ident)
			}
			st := w.Stats()
			t.Logf("commits %d, rewritten %d", st.Commits, st.FilesRewritten)
		})
	}
}

// TestCopyOnWriteSplitRunRetry: a run coalesced from three batches and split into two segments (Upsert 5;
// Write 300; Upsert 5, 6, 300) whose first commit attempt fails before applying, applies but loses its reply,
// or meets a concurrent copy-on-write commit of another writer (upserting 6 and 7, in the same table file).
// The retry re-plans from scratch: the table equals the model, and on v3 row ids are unique and upserted keys
// keep theirs.
func TestCopyOnWriteSplitRunRetry(t *testing.T) {
	for _, v := range []int{2, 3} {
		for _, mode := range []string{"fail", "lose", "concurrent"} {
			t.Run(fmt.Sprintf("v%d/%s", v, mode), func(t *testing.T) { copyOnWriteSplitRunRetry(t, v, mode) })
		}
	}
}

func copyOnWriteSplitRunRetry(t *testing.T, v int, mode string) {
	ctx := context.Background()
	w0, _, cat, ident := cowTable(t, ctx, 4, 50, false,
		iceberg.WithCreate(kvSchema, iceberg.IdentifierFields("id"), iceberg.FormatVersion(v)))
	if err := w0.Close(ctx); err != nil {
		t.Fatal(err)
	}
	model := kvModel{}
	for id := int64(0); id < 200; id++ {
		model.insert(id, id)
	}
	var s0 tableState
	if v >= 3 {
		s0 = observe(t, cat, ident, model)
	}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithMode(iceberg.CopyOnWrite),
		iceberg.WithFlushRows(1), iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompaction(0))
	if err != nil {
		t.Fatal(err)
	}
	other, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithMode(iceberg.CopyOnWrite),
		iceberg.WithSmallFileCompaction(0))
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
