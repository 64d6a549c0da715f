package iceberg

import (
	"testing"
)

// TestMergeOnReadRowIDsReuseTheIndexKeys: carrying the replaced rows' _row_id into a format-v3 merge-on-read
// batch reads the batch's new data file once, to rewrite it, and never reads the rewritten file back: the keys
// of both are those the key index read back after the upload (before: the new file was read a second time to
// find a carried key, and the rewritten file read back for its keys; each read is two requests to S3). The
// upserted keys keep their row ids and the table and the index match the model.
func TestMergeOnReadRowIDsReuseTheIndexKeys(t *testing.T) {
	e := newStageEnv(t, 3)
	k := e.stage(false)
	ids := make([]int64, 100)
	for i := range ids {
		ids[i] = int64(i)
	}
	e.do(k, opInsert, ids, "a")
	before := readRowIDsByKey(t, e.tbl)

	b := e.encode(k, opUpsert, []int64{1, 50, 1000}, "b")
	if len(b.files) != 1 {
		t.Fatalf("the upsert wrote %d files, want 1", len(b.files))
	}
	orig := b.files[0].FilePath()
	var opens fileOpens
	e.commitOn(k, b, countOpens(t, e.tbl, &opens))
	if len(b.files) != 1 || b.files[0].FilePath() == orig {
		t.Fatalf("the batch's files after carrying row ids: %v, want one rewrite of %s", b.files, orig)
	}
	if n := opens.of(orig); n != 1 {
		t.Errorf("the uploaded file was opened %d times, want 1 (its rewrite)", n)
	}
	if n := opens.of(b.files[0].FilePath()); n != 0 {
		t.Errorf("the rewritten file was opened %d times, want 0 (its keys are the uploaded file's)", n)
	}
	e.check(k)
	after := readRowIDsByKey(t, e.tbl)
	for _, id := range []int64{1, 50} {
		if after[id] != before[id] {
			t.Errorf("key %d has _row_id %d, want %d (the replaced row's)", id, after[id], before[id])
		}
	}
	if _, ok := before[1000]; ok {
		t.Fatal("key 1000 before its insert")
	}
	for id, rid := range after {
		if id != 1000 && id != 1 && id != 50 && rid != before[id] {
			t.Errorf("key %d has _row_id %d, want %d (unchanged)", id, rid, before[id])
		}
	}
}
