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

// TestReview2CopyOnWriteCoalescedModel: random Write/Upsert/Delete batches (keys repeating inside and across
// batches) on a copy-on-write table whose commits are slow, so that many batches coalesce into runs split into
// several segments; v2 and v3, partitioned and not. The table must equal the sequential model at every Flush
// and at the end (v3: every _row_id non-null, checked by readLineage).
func TestReview2CopyOnWriteCoalescedModel(t *testing.T) {
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

// TestReview2CopyOnWriteV3CoalescedLineage: v3, keys unique in the table (Write only new keys), slow commits so
// batches coalesce into split runs. After each round: the model, unique non-null row ids, untouched rows keep
// their lineage, and a key that held a row at the start of the round and was only upserted (never deleted) in
// it keeps its _row_id.
func TestReview2CopyOnWriteV3CoalescedLineage(t *testing.T) {
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
