package iceberg_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// Copy-on-write on format-version 3 tables: a rewritten data file must carry its surviving rows' row lineage
// (_row_id and _last_updated_sequence_number) over, so that a reader sees the same lineage for every row the
// mutation did not touch. These tests read the table back the way a user would, with iceberg-go's scanner and
// table.WithRowLineage().

// cowV3Writer creates a v3 kv table keyed on id and opens a copy-on-write writer on it that writes one file per
// flushRows rows and never merges small files.
func cowV3Writer(t *testing.T, ctx context.Context, cat icecatalog.Catalog, ident table.Identifier, flushRows int, create ...iceberg.CreateOption) *iceberg.Writer {
	t.Helper()
	create = append([]iceberg.CreateOption{iceberg.IdentifierFields("id"), iceberg.FormatVersion(3)}, create...)
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(kvSchema, create...),
		iceberg.WithMode(iceberg.CopyOnWrite), iceberg.WithFlushRows(flushRows), iceberg.WithFlushInterval(0),
		iceberg.WithSmallFileCompactionEvery(0))
	if err != nil {
		t.Fatalf("NewWriter (v3, copy-on-write): %v", err)
	}
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	if v := w.Table().Metadata().Version(); v != 3 {
		t.Fatalf("created table has format version %d, want 3", v)
	}
	return w
}

// mustV3 fails the test on err, saying plainly when the cause is that copy-on-write Upsert/Delete is not
// supported yet on format-version 3 tables.
func mustV3(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if errors.Is(err, iceberg.ErrNotSupported) {
		t.Fatalf("%s: copy-on-write Upsert/Delete on a format-version 3 table is not supported yet "+
			"(row lineage must be carried over by the rewrite): %v", what, err)
	}
	t.Fatalf("%s: %v", what, err)
}

// tableState is what the checks compare across a mutation.
type tableState struct {
	rows      []lineageRow
	byID      map[int64]lineage // valid when every id holds one row (all these tests keep keys unique)
	rowIDs    map[int64]int64   // _row_id -> id of the row that holds it
	snapshots map[int64]bool
	lastSeq   int64
	nextRowID int64
}

// observe reads the table back and checks what must hold of any v3 table state: the rows equal the model, every
// id holds one row, every _row_id is unique and below the table's next-row-id, and no data file has a delete
// file applied to it (copy-on-write never writes one).
func observe(t *testing.T, cat icecatalog.Catalog, ident table.Identifier, model kvModel) tableState {
	t.Helper()
	tbl := tabletest.Load(t, cat, ident)
	meta := tbl.Metadata()
	st := tableState{rows: readLineage(t, cat, ident), byID: map[int64]lineage{}, rowIDs: map[int64]int64{},
		snapshots: map[int64]bool{}, lastSeq: meta.LastSequenceNumber(), nextRowID: meta.NextRowID()}
	for _, s := range meta.Snapshots() {
		st.snapshots[s.SnapshotID] = true
	}
	got := map[int64][]int64{}
	for _, r := range st.rows {
		got[r.id] = append(got[r.id], r.v)
	}
	for k := range got {
		slices.Sort(got[k])
	}
	compareKV(t, got, model) // (a)
	for _, r := range st.rows {
		if _, dup := st.byID[r.id]; dup {
			t.Fatalf("id %d holds more than one row", r.id)
		}
		st.byID[r.id] = r.lineage
		if other, dup := st.rowIDs[r.rowID]; dup { // (c)
			t.Fatalf("_row_id %d is held by id %d and by id %d: row ids must be unique across the table",
				r.rowID, other, r.id)
		}
		st.rowIDs[r.rowID] = r.id
		if r.rowID < 0 || r.rowID >= st.nextRowID {
			t.Fatalf("id %d: _row_id %d outside [0, next-row-id %d)", r.id, r.rowID, st.nextRowID)
		}
		if r.seq <= 0 || r.seq > st.lastSeq {
			t.Fatalf("id %d: _last_updated_sequence_number %d outside [1, last-sequence-number %d]",
				r.id, r.seq, st.lastSeq)
		}
	}
	if tbl.CurrentSnapshot() != nil { // (e)
		for _, task := range tabletest.LiveDataFiles(t, tbl) {
			if n := len(task.DeleteFiles) + len(task.EqualityDeleteFiles) + len(task.DeletionVectorFiles); n != 0 {
				t.Fatalf("data file %s has %d position, %d equality and %d deletion-vector delete files; "+
					"copy-on-write must write none", task.File.FilePath(), len(task.DeleteFiles),
					len(task.EqualityDeleteFiles), len(task.DeletionVectorFiles))
			}
		}
		if n := tbl.CurrentSnapshot().Summary.Properties["total-delete-files"]; n != "" && n != "0" {
			t.Fatalf("current snapshot summary: total-delete-files=%s in copy-on-write mode, want 0", n)
		}
	}
	return st
}

// checkLineageKept compares two states across a mutation that touched the keys in touched (inserted, upserted
// or deleted): every row of an untouched key keeps exactly its earlier _row_id and
// _last_updated_sequence_number (b); every row of a touched key carries either its own earlier _row_id (kept
// across the update) or a fresh one that no row held before, and a sequence number newer than anything before
// the mutation (d).
func checkLineageKept(t *testing.T, before, after tableState, touched map[int64]bool) {
	t.Helper()
	for id, now := range after.byID {
		was, existed := before.byID[id]
		if !touched[id] {
			if !existed {
				t.Fatalf("id %d appeared without being written", id)
			}
			if now != was {
				t.Fatalf("untouched id %d: (_row_id, _last_updated_sequence_number) went from (%d, %d) to (%d, %d); "+
					"a copy-on-write rewrite must keep both", id, was.rowID, was.seq, now.rowID, now.seq)
			}
			continue
		}
		if owner, held := before.rowIDs[now.rowID]; held && owner != id {
			t.Fatalf("written id %d got _row_id %d, which id %d held before the mutation: want its own earlier "+
				"row id or a fresh one", id, now.rowID, owner)
		}
		if now.seq <= before.lastSeq {
			t.Fatalf("written id %d: _last_updated_sequence_number %d, want newer than %d (the last sequence "+
				"number before the mutation)", id, now.seq, before.lastSeq)
		}
	}
	for id := range before.byID {
		if _, ok := after.byID[id]; !ok && !touched[id] {
			t.Fatalf("untouched id %d disappeared", id)
		}
	}
}

// checkUpdatesKeepRowIDs: an upserted key that held a row before the commit is an update, and its new version
// keeps that row's _row_id with a newer _last_updated_sequence_number (the spec's row lineage for updates); a
// key that held no row (new, or deleted by an earlier commit) gets a row id no row held before.
func checkUpdatesKeepRowIDs(t *testing.T, before, after tableState, upserted []int64) {
	t.Helper()
	for _, id := range upserted {
		now, ok := after.byID[id]
		if !ok {
			t.Fatalf("upserted id %d missing", id)
		}
		was, existed := before.byID[id]
		switch {
		case existed && now.rowID != was.rowID:
			t.Fatalf("updated id %d: _row_id went from %d to %d, want it kept", id, was.rowID, now.rowID)
		case existed && now.seq <= was.seq:
			t.Fatalf("updated id %d: _last_updated_sequence_number %d, want newer than %d", id, now.seq, was.seq)
		case !existed:
			if _, held := before.rowIDs[now.rowID]; held {
				t.Fatalf("inserted id %d got _row_id %d, which a row held before", id, now.rowID)
			}
		}
	}
}

// checkOverwriteCommitted checks (f): the mutation created at least one snapshot, and the current snapshot or
// one of the new ones is an overwrite.
func checkOverwriteCommitted(t *testing.T, cat icecatalog.Catalog, ident table.Identifier, before tableState) {
	t.Helper()
	tbl := tabletest.Load(t, cat, ident)
	var ops []table.Operation
	for _, s := range tbl.Metadata().Snapshots() {
		if before.snapshots[s.SnapshotID] {
			continue
		}
		if s.Summary == nil {
			t.Fatalf("snapshot %d has no summary", s.SnapshotID)
		}
		ops = append(ops, s.Summary.Operation)
	}
	if len(ops) == 0 {
		t.Fatalf("the mutation created no snapshot")
	}
	if cur := tbl.CurrentSnapshot(); cur.Summary != nil && cur.Summary.Operation == table.OpOverwrite {
		return
	}
	if !slices.Contains(ops, table.OpOverwrite) {
		t.Fatalf("the mutation's snapshots have operations %v, want one %q", ops, table.OpOverwrite)
	}
}

// upsertKeys upserts the keys ids (with values from *next on) in the writer and the model and marks them in
// touched.
func upsertKeys(t *testing.T, ctx context.Context, w *iceberg.Writer, model kvModel, ids []int64, next *int64, touched map[int64]bool) {
	t.Helper()
	vs := make([]int64, len(ids))
	for i, id := range ids {
		*next++
		vs[i] = *next
		model.upsert(id, vs[i])
		touched[id] = true
	}
	rec := kvBatch(ids, vs)
	err := w.Upsert(ctx, rec)
	rec.Release()
	mustV3(t, "Upsert", err)
}

// deleteKeys deletes the keys ids in the writer and the model and marks them in touched.
func deleteKeys(t *testing.T, ctx context.Context, w *iceberg.Writer, model kvModel, ids []int64, touched map[int64]bool) {
	t.Helper()
	for _, id := range ids {
		model.del(id)
		touched[id] = true
	}
	rec := keyBatch(ids)
	err := w.Delete(ctx, rec)
	rec.Release()
	mustV3(t, "Delete", err)
}

// mutate upserts ups, then deletes dels, then flushes, and returns the keys it touched.
func mutate(t *testing.T, ctx context.Context, w *iceberg.Writer, model kvModel, ups, dels []int64, next *int64) map[int64]bool {
	t.Helper()
	touched := map[int64]bool{}
	upsertKeys(t, ctx, w, model, ups, next, touched)
	deleteKeys(t, ctx, w, model, dels, touched)
	mustV3(t, "Flush", w.Flush(ctx))
	return touched
}

// TestCopyOnWriteV3PreservesRowLineage: on a v3 table of 5 files (ids 0..999), copy-on-write upserts and deletes
// spread over 4 of the files (one left alone), then a second round on the files already rewritten. After each
// round, read back with row lineage: the rows equal the model; every row not upserted or deleted keeps its
// _row_id and _last_updated_sequence_number; row ids are non-null and unique; upserted rows carry their own
// earlier row id or a fresh one, with a new sequence number; no delete file exists; and the mutation committed
// an overwrite snapshot.
func TestCopyOnWriteV3PreservesRowLineage(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"cowv3", "lineage"}
	const files, perFile = 5, 200
	w := cowV3Writer(t, ctx, cat, ident, perFile)
	model := kvModel{}
	for f := 0; f < files; f++ {
		ids := make([]int64, perFile)
		for i := range ids {
			ids[i] = int64(f*perFile + i)
			model.insert(ids[i], ids[i])
		}
		rec := kvBatch(ids, ids)
		err := w.Write(ctx, rec)
		rec.Release()
		if err != nil {
			t.Fatalf("Write file %d: %v", f, err)
		}
		if err := w.Flush(ctx); err != nil {
			t.Fatalf("Flush file %d: %v", f, err)
		}
	}
	tbl := tabletest.Load(t, cat, ident)
	if tasks := tabletest.LiveDataFiles(t, tbl); len(tasks) != files {
		t.Fatalf("setup: %d data files, want %d", len(tasks), files)
	}
	s0 := observe(t, cat, ident, model)
	if len(s0.rows) != files*perFile {
		t.Fatalf("setup: %d rows, want %d", len(s0.rows), files*perFile)
	}
	next := int64(10_000)

	// Round 1: files 0, 1, 3 and 4 are touched (file 2, ids 400..599, is not); 1000 and 1001 are new keys.
	t.Log("round 1: upserts and deletes over 4 of 5 files")
	touched1 := mutate(t, ctx, w, model,
		[]int64{5, 6, 150, 210, 399, 800, 801, 999, 1000, 1001},
		[]int64{7, 300, 650}, &next)
	s1 := observe(t, cat, ident, model)
	checkLineageKept(t, s0, s1, touched1)
	checkOverwriteCommitted(t, cat, ident, s0)
	checkUpdatesKeepRowIDs(t, s0, s1, []int64{5, 6, 150, 210, 399, 800, 801, 999, 1000, 1001})

	// Round 2: on files rewritten in round 1 — an id upserted again (150), survivors of rewritten files
	// (151, 220, 850), a new key of round 1 (1000), a re-insert of an id deleted in round 1 (7), and deletes of
	// an id upserted in round 1 (5) and of a survivor (152).
	t.Log("round 2: upserts and deletes on rewritten files")
	touched2 := mutate(t, ctx, w, model,
		[]int64{150, 151, 220, 850, 1000, 7},
		[]int64{5, 152}, &next)
	s2 := observe(t, cat, ident, model)
	checkLineageKept(t, s1, s2, touched2)
	checkOverwriteCommitted(t, cat, ident, s1)
	checkUpdatesKeepRowIDs(t, s1, s2, []int64{150, 151, 220, 850, 1000, 7})
	// Rows untouched by both rounds still carry their original lineage.
	for id, was := range s0.byID {
		if touched1[id] || touched2[id] {
			continue
		}
		if now := s2.byID[id]; now != was {
			t.Fatalf("id %d, untouched by both rounds: lineage went from (%d, %d) to (%d, %d)",
				id, was.rowID, was.seq, now.rowID, now.seq)
		}
	}
	// No row holds a row id that another key held at the start (e.g. a deleted row's id handed out again).
	for id, now := range s2.byID {
		if owner, ok := s0.rowIDs[now.rowID]; ok && owner != id {
			t.Fatalf("id %d holds _row_id %d, which id %d held before both rounds", id, now.rowID, owner)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// TestCopyOnWriteV3UpsertThenWriteSameKey: on a v3 copy-on-write table, a batch that upserts key 5 and
// then plainly writes key 5 again (a Write after an Upsert keeps both rows, as the sequential model says) must
// not give both new rows the _row_id of the row the upsert replaced: row ids are unique across the table.
func TestCopyOnWriteV3UpsertThenWriteSameKey(t *testing.T) {
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
