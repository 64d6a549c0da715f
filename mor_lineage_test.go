package iceberg_test

import (
	"context"
	"testing"

	"github.com/apache/iceberg-go/table"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// TestMergeOnReadKeepsRowIDs: on a format-version 3 table a merge-on-read upsert keeps the replaced row's
// _row_id (the new row is written with it), as an update does, across commits (a key upserted again keeps its
// id again, from the file that carried it), while inserted keys and keys re-inserted after a delete get new
// ids, and no two rows share an id. Read back with iceberg-go's scanner with row lineage.
func TestMergeOnReadKeepsRowIDs(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"mor", "lineage"}
	w := mergeOnReadV3Writer(t, ctx, cat, ident)
	first := readRowIDs(t, cat, ident)
	check := func(step string, kept, fresh []int64, vals map[int64]int64) map[int64]tabletest.KeyRow {
		t.Helper()
		got := readRowIDs(t, cat, ident)
		seen := map[int64]int64{}
		for id, r := range got {
			if other, dup := seen[r.RowID]; dup {
				t.Fatalf("%s: keys %d and %d share _row_id %d", step, id, other, r.RowID)
			}
			seen[r.RowID] = id
		}
		for _, id := range kept {
			if got[id].RowID != first[id].RowID {
				t.Errorf("%s: key %d has _row_id %d, want %d (the replaced row's)", step, id, got[id].RowID, first[id].RowID)
			}
		}
		for _, id := range fresh {
			if r, ok := got[id]; ok && r.RowID == first[id].RowID && first[id] != (tabletest.KeyRow{}) {
				t.Errorf("%s: key %d kept _row_id %d after a delete", step, id, r.RowID)
			}
		}
		for id, v := range vals {
			if got[id].V != v {
				t.Errorf("%s: key %d has v=%d, want %d", step, id, got[id].V, v)
			}
		}
		return got
	}
	must(t, w.Upsert(ctx, kvBatch([]int64{1, 50, 99}, []int64{-1, -50, -99})))
	must(t, w.Flush(ctx))
	check("first upsert", []int64{1, 50, 99}, nil, map[int64]int64{1: -1, 50: -50, 99: -99})

	// Key 1 now lives in a file that carries its id; key 2 in the first file; 1000 is new.
	must(t, w.Upsert(ctx, kvBatch([]int64{1, 2, 1000}, []int64{-11, -2, 1000})))
	must(t, w.Flush(ctx))
	check("second upsert", []int64{1, 2, 50, 99}, nil, map[int64]int64{1: -11, 2: -2, 1000: 1000})

	must(t, w.Delete(ctx, keyBatch([]int64{50})))
	must(t, w.Flush(ctx))
	must(t, w.Upsert(ctx, kvBatch([]int64{50, 1, 3}, []int64{5000, -111, -3})))
	must(t, w.Close(ctx))
	check("after a delete", []int64{1, 2, 3, 99}, []int64{50}, map[int64]int64{1: -111, 3: -3, 50: 5000})
	if live := liveDeletes(t, cat, ident); live.Eq != 0 {
		t.Fatalf("%d equality delete files; want deletion vectors only", live.Eq)
	}
}

// TestMergeOnReadLineageReadsNoDataFile: through the Writer, a format-v3 merge-on-read upsert's commit keeps the
// replaced rows' _row_id without reading any Parquet file: the encoder wrote the ids with the batch (before, the
// commit read the uploaded file whole to write it again with them: on S3 7 GETs, a second PUT and a DELETE).
func TestMergeOnReadLineageReadsNoDataFile(t *testing.T) {
	ctx := context.Background()
	cat, reads := tabletest.CountedCatalog(t)
	ident := table.Identifier{"mor", "lineage_reads"}
	w := mergeOnReadV3Writer(t, ctx, cat, ident)
	first := readRowIDs(t, cat, ident)
	before := reads()
	must(t, w.Upsert(ctx, kvBatch([]int64{1, 50, 1000}, []int64{-1, -50, 1000})))
	must(t, w.Flush(ctx))
	if n := reads() - before; n != 0 {
		t.Errorf("the upsert's commit read Parquet files %d times, want 0", n)
	}
	must(t, w.Close(ctx))
	got := readRowIDs(t, cat, ident)
	for _, id := range []int64{1, 50} {
		if got[id].RowID != first[id].RowID || got[id].V != -id {
			t.Errorf("key %d: %+v, want _row_id %d (the replaced row's) and v=%d", id, got[id], first[id].RowID, -id)
		}
	}
	for id, r := range first {
		if id != 1 && id != 50 && got[id] != r {
			t.Errorf("key %d: %+v, want %+v (unchanged)", id, got[id], r)
		}
		if r.RowID == got[1000].RowID {
			t.Errorf("key 1000 has _row_id %d, key %d's before", r.RowID, id)
		}
	}
	if _, ok := got[1000]; !ok {
		t.Error("key 1000 missing")
	}
}
