package iceberg

import (
	"slices"
	"testing"

	"github.com/icewriter/iceberg/internal/tabletest"
)

// fileReads returns how often the file at path (of tabletest's counted scheme) was opened or read whole so far.
func fileReads(path string) int64 {
	o, w := tabletest.FileReads(path)
	return o + w
}

// TestMergeOnReadRowIDsWrittenWithTheBatch: a format-v3 merge-on-read upsert writes the replaced rows' _row_id
// into its data file when the batch is encoded (the key index knows them), so its commit adds the file as
// uploaded: it neither reads it back nor writes it again (before: the commit read the file whole, wrote a copy
// with the ids and deleted the first; on S3 7 GETs, a second data-file PUT and a DELETE a commit). Read with row
// lineage, the upserted keys keep their ids, the new key gets a new one, the others are unchanged.
func TestMergeOnReadRowIDsWrittenWithTheBatch(t *testing.T) {
	e, k, before := lineageStage(t)

	b := e.encode(k, opUpsert, []int64{1, 50, 1000}, "b")
	if len(b.enc.files) != 1 {
		t.Fatalf("the upsert wrote %d files, want 1", len(b.enc.files))
	}
	orig := b.enc.files[0].FilePath()
	read0 := fileReads(orig)
	e.commit(k, b)
	if len(b.enc.files) != 1 || b.enc.files[0].FilePath() != orig {
		t.Fatalf("the batch's files after the commit: %v, want %s as uploaded", b.enc.files, orig)
	}
	if n := fileReads(orig) - read0; n != 0 {
		t.Errorf("the commit opened the uploaded file %d times, want 0", n)
	}
	e.check(k)
	checkRowIDs(t, before, tabletest.RowIDs(t, e.tbl), []int64{1, 50}, []int64{1000})
}

// TestMergeOnReadRowIDsReuseTheIndexKeys: when the ids a v3 merge-on-read batch was encoded with are no longer
// right at its commit (a batch ahead of it deleted one of its keys: that key's row is new, and must not take
// the deleted row's id), the commit writes the file again with the ids the key index gives then. The rewrite
// reads the batch's uploaded file once and never reads the rewritten file back: the keys of both are those the
// key index learnt from the batch (each read is two requests to S3).
func TestMergeOnReadRowIDsReuseTheIndexKeys(t *testing.T) {
	t.Parallel() // see TestMain
	e, k, before := lineageStage(t)

	del := e.encode(k, opDelete, []int64{1}, "")
	b := e.encode(k, opUpsert, []int64{1, 50, 1000}, "b") // encoded while key 1 still had its row
	if len(b.keys.rowIDs) != 2 {
		t.Fatalf("the upsert was encoded with %d row ids, want 2 (keys 1 and 50)", len(b.keys.rowIDs))
	}
	e.commit(k, del)
	orig := b.enc.files[0].FilePath()
	read0 := fileReads(orig)
	e.commit(k, b)
	rewrite := checkRewritten(t, b, orig)
	if n := fileReads(orig) - read0; n != 1 {
		t.Errorf("the uploaded file was opened %d times, want 1 (its rewrite)", n)
	}
	if n := fileReads(rewrite); n != 0 {
		t.Errorf("the rewritten file was opened %d times, want 0 (its keys are the uploaded file's)", n)
	}
	e.check(k)
	checkRowIDs(t, before, tabletest.RowIDs(t, e.tbl), []int64{50}, []int64{1, 1000})
}

// TestMergeOnReadRowIDsIndexOffAtCommit: a v3 merge-on-read batch encoded with row ids while the key index was on,
// committed after the index went off (equality deletes), cannot have its ids checked: its file is written again
// without them, so its upserted keys get new ids, as when the index is off throughout, and none is shared.
func TestMergeOnReadRowIDsIndexOffAtCommit(t *testing.T) {
	e, k, before := lineageStage(t)

	b := e.encode(k, opUpsert, []int64{1, 50, 1000}, "b")
	if len(b.keys.rowIDs) != 2 {
		t.Fatalf("the upsert was encoded with %d row ids, want 2 (keys 1 and 50)", len(b.keys.rowIDs))
	}
	orig := b.enc.files[0].FilePath()
	k.drop("test", nil)
	e.commit(k, b)
	checkRewritten(t, b, orig)
	e.check(k)
	checkRowIDs(t, before, tabletest.RowIDs(t, e.tbl), nil, []int64{1, 50, 1000})
}

// checkRewritten checks that the key stage wrote batch b's one data file, orig, again: the batch's key part
// records the swap, and the batch's files (those removed should it never commit) are the rewrite, not orig.
// It returns the rewrite's path.
func checkRewritten(t *testing.T, b *batch, orig string) string {
	t.Helper()
	if len(b.keys.rewritten) != 1 || !slices.Equal(b.keys.replaced, []string{orig}) {
		t.Fatalf("the key stage replaced %v with %d files, want %s with one rewrite", b.keys.replaced, len(b.keys.rewritten), orig)
	}
	rewrite := b.keys.rewritten[0].FilePath()
	if paths := b.filePaths(); !slices.Equal(paths, []string{rewrite}) {
		t.Fatalf("the batch's files %v, want only the rewrite %s", paths, rewrite)
	}
	return rewrite
}
