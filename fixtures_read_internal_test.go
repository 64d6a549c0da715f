package iceberg

import (
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// Reading the internal tests' tables back: names by id, the model a bulk phase must leave, and row ids kept
// across an upsert.

// readNamed reads a writer's idNameSchema table back: per id, its names, sorted.
func readNamed(t *testing.T, w *Writer) map[int64][]string {
	t.Helper()
	return readNamedTable(t, w.Table())
}

// readNamedTable reads an idNameSchema table back: per id, its names, sorted.
func readNamedTable(t *testing.T, tbl *table.Table) map[int64][]string {
	t.Helper()
	_, recs := tabletest.Records(t, tbl)
	got := map[int64][]string{}
	for rec := range recs {
		ids, names := rec.Column(0).(*array.Int64), rec.Column(1).(*array.String)
		for i := 0; i < int(rec.NumRows()); i++ {
			got[ids.Value(i)] = append(got[ids.Value(i)], names.Value(i))
		}
	}
	for _, v := range got {
		slices.Sort(v)
	}
	return got
}

// requireIndexedModel requires a table of idNameRows/namedRows rows to hold model (names by id) exactly, with
// the upserts and deletes made after a bulk phase as deletion vectors, never equality deletes: the key index
// covered the bulk files.
func requireIndexedModel(t *testing.T, tbl *table.Table, model map[int64][]string) {
	t.Helper()
	got := readNamedTable(t, tbl)
	if len(got) != len(model) {
		t.Fatalf("table has %d ids, model %d", len(got), len(model))
	}
	for id, names := range model {
		if !slices.Equal(got[id], names) {
			t.Fatalf("id %d: %v, model %v", id, got[id], names)
		}
	}
	var dvs int
	for _, task := range tabletest.LiveDataFiles(t, tbl) {
		if len(task.EqualityDeleteFiles) > 0 {
			t.Fatalf("equality deletes on %s: the key index did not cover the bulk file", task.File.FilePath())
		}
		dvs += len(task.DeletionVectorFiles)
	}
	if dvs == 0 {
		t.Fatal("no deletion vector after upserts and deletes of bulk rows")
	}
}

// checkRowIDs compares the _row_id of each key after an upsert with before: kept keys have the same, fresh keys
// one no row had before, any other key its own, and no two rows share one.
func checkRowIDs(t *testing.T, before, after map[int64]int64, kept, fresh []int64) {
	t.Helper()
	old := map[int64]bool{}
	for _, rid := range before {
		old[rid] = true
	}
	seen := map[int64]int64{}
	for id, rid := range after {
		if other, dup := seen[rid]; dup {
			t.Errorf("keys %d and %d share _row_id %d", id, other, rid)
		}
		seen[rid] = id
		switch {
		case slices.Contains(kept, id):
			if rid != before[id] {
				t.Errorf("key %d has _row_id %d, want %d (the replaced row's)", id, rid, before[id])
			}
		case slices.Contains(fresh, id):
			if old[rid] {
				t.Errorf("key %d has _row_id %d, an id the table gave before; want a new one", id, rid)
			}
		case rid != before[id]:
			t.Errorf("key %d has _row_id %d, want %d (unchanged)", id, rid, before[id])
		}
	}
	for _, id := range append(slices.Clone(kept), fresh...) {
		if _, ok := after[id]; !ok {
			t.Errorf("key %d missing after the upsert", id)
		}
	}
}
