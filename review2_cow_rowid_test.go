package iceberg_test

import (
	"context"
	"testing"

	"github.com/apache/iceberg-go/table"
)

// TestReview2CopyOnWriteV3UpsertThenWriteSameKey: on a v3 copy-on-write table, a batch that upserts key 5 and
// then plainly writes key 5 again (a Write after an Upsert keeps both rows, as the sequential model says) must
// not give both new rows the _row_id of the row the upsert replaced: row ids are unique across the table.
func TestReview2CopyOnWriteV3UpsertThenWriteSameKey(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"cowv3", "dup"}
	w := cowV3Writer(t, ctx, cat, ident, 1000)
	model := kvModel{}
	ids := []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	for _, id := range ids {
		model.insert(id, id)
	}
	mustV3(t, "Write", w.Write(ctx, kvBatch(ids, ids)))
	mustV3(t, "Flush", w.Flush(ctx))
	// One batch: Upsert 5, then Write 5 (and Delete 6, then Write 6 twice).
	model.upsert(5, -5)
	mustV3(t, "Upsert", w.Upsert(ctx, kvBatch([]int64{5}, []int64{-5})))
	model.insert(5, 7)
	mustV3(t, "Write", w.Write(ctx, kvBatch([]int64{5}, []int64{7})))
	model.del(6)
	mustV3(t, "Delete", w.Delete(ctx, keyBatch([]int64{6})))
	model.insert(6, 60)
	model.insert(6, 61)
	mustV3(t, "Write", w.Write(ctx, kvBatch([]int64{6, 6}, []int64{60, 61})))
	mustV3(t, "Flush", w.Flush(ctx))
	rows := readLineage(t, cat, ident)
	held := map[int64]lineageRow{}
	for _, r := range rows {
		if o, dup := held[r.rowID]; dup {
			t.Errorf("_row_id %d held by id %d (v=%d) and id %d (v=%d)", r.rowID, o.id, o.v, r.id, r.v)
		}
		held[r.rowID] = r
	}
	compareKV(t, readKV(t, cat, ident), model)
}
