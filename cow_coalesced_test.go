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
			next := int64(0)
			for op := 0; op < 90; op++ {
				n := 1 + rng.IntN(5)
				ids := make([]int64, n)
				vs := make([]int64, n)
				for i := range ids {
					ids[i] = rng.Int64N(30)
					next++
					vs[i] = next
				}
				switch k := rng.IntN(10); {
				case k < 3:
					err = w.Write(ctx, kvBatch(ids, vs))
					for i := range ids {
						model.insert(ids[i], vs[i])
					}
				case k < 8:
					err = w.Upsert(ctx, kvBatch(ids, vs))
					for i := range ids {
						model.upsert(ids[i], vs[i])
					}
				default:
					err = w.Delete(ctx, keyBatch(ids))
					for i := range ids {
						model.del(ids[i])
					}
				}
				if err != nil {
					t.Fatal(err)
				}
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

// TestCopyOnWriteV3CoalescedLineage: v3, keys unique in the table (Write only new keys), slow commits so
// batches coalesce into split runs. After each round: the model, unique non-null row ids, untouched rows keep
// their lineage, and a key that held a row at the start of the round and was only upserted (never deleted) in
// it keeps its _row_id.
func TestCopyOnWriteV3CoalescedLineage(t *testing.T) {
	for trial := 0; trial < 2; trial++ {
		t.Run(fmt.Sprintf("partitioned=%v", trial == 1), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(trial), 91))
			ctx := context.Background()
			cat := &slowCatalog{Catalog: openCatalog(t), latency: 25 * time.Millisecond}
			ident := table.Identifier{"cowv3", "coalesced"}
			var create []iceberg.CreateOption
			if trial == 1 {
				create = append(create, iceberg.PartitionBy("bucket(3, id)"))
			}
			create = append([]iceberg.CreateOption{iceberg.IdentifierFields("id"), iceberg.FormatVersion(3)}, create...)
			w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(kvSchema, create...),
				iceberg.WithMode(iceberg.CopyOnWrite), iceberg.WithFlushRows(1+rng.IntN(6)),
				iceberg.WithMaxInFlight(4), iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompaction(0))
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close(ctx)
			model := kvModel{}
			nextKey, nextV := int64(0), int64(1000)
			var ids []int64
			for ; nextKey < 40; nextKey++ {
				ids = append(ids, nextKey)
				model.insert(nextKey, nextKey)
			}
			mustV3(t, "Write", w.Write(ctx, kvBatch(ids, ids)))
			mustV3(t, "Flush", w.Flush(ctx))
			state := observe(t, cat, ident, model)
			for round := 0; round < 3; round++ {
				touched, deleted, upserted := map[int64]bool{}, map[int64]bool{}, map[int64]bool{}
				for op := 0; op < 25; op++ {
					n := 1 + rng.IntN(4)
					seen := map[int64]bool{}
					var ks []int64
					for len(ks) < n {
						if k := rng.Int64N(nextKey + 3); !seen[k] {
							seen[k] = true
							ks = append(ks, k)
						}
					}
					switch k := rng.IntN(10); {
					case k < 2:
						var ws, vs []int64
						for i := 0; i < n; i++ {
							nextV++
							ws, vs = append(ws, nextKey), append(vs, nextV)
							model.insert(nextKey, nextV)
							touched[nextKey] = true
							nextKey++
						}
						mustV3(t, "Write", w.Write(ctx, kvBatch(ws, vs)))
					case k < 8:
						for _, id := range ks {
							nextKey = max(nextKey, id+1)
							upserted[id] = true
						}
						upsertKeys(t, ctx, w, model, ks, &nextV, touched)
					default:
						for _, id := range ks {
							deleted[id] = true
						}
						deleteKeys(t, ctx, w, model, ks, touched)
					}
				}
				mustV3(t, "Flush", w.Flush(ctx))
				after := observe(t, cat, ident, model)
				checkLineageKept(t, state, after, touched)
				for id := range upserted {
					was, existed := state.byID[id]
					now, live := after.byID[id]
					if existed && live && !deleted[id] && now.rowID != was.rowID {
						t.Errorf("round %d: id %d only upserted: _row_id %d, was %d", round, id, now.rowID, was.rowID)
					}
				}
				state = after
			}
			t.Logf("commits %d, rewritten %d", w.Stats().Commits, w.Stats().FilesRewritten)
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
			cat.mu.Unlock()
			defer cat.mu.Lock()
			if err := other.Upsert(ctx, kvBatch([]int64{6, 7}, []int64{66, 77})); err != nil {
				t.Error(err)
			}
			if err := other.Flush(ctx); err != nil {
				t.Error(err)
			}
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
	for deadline := time.Now().Add(10 * time.Second); w.Stats().FilesWritten < 4; {
		if time.Now().After(deadline) {
			t.Fatalf("not encoded: %+v", w.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // and staged: slack for a loaded machine
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
