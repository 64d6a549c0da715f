package iceberg

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	ice "github.com/apache/iceberg-go"
	"github.com/icewriter/iceberg/internal/keyindex"
)

// checkAccounting fails the test unless the key index counts what it holds: the key store's memory plus each
// live file's metadata as memBytes estimates it now (vector, delete files, carried row ids), and nothing for the
// files it forgot. It returns the live files' share.
func checkAccounting(t *testing.T, idx *keyindex.Index) int64 {
	t.Helper()
	files, err := idx.Audit()
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestKeyIndexCountsFileMetadata: what the key index holds outside its key store grows with the keys upserts and
// deletes remove (deletion vectors) and the rows upserts carry an id to (format version 3), not only with files:
// the budget counts it as it changes, a carried id goes once its row is replaced, and a compaction's rebase
// gives back the rewritten files' share.
func TestKeyIndexCountsFileMetadata(t *testing.T) {
	e := newStageEnv(t, 3)
	k := e.stage(false)
	idx := k.idx.Load()
	e.do(k, opInsert, ids(0, 100), "a")
	if checkAccounting(t, idx) < 64 {
		t.Fatal("a data file's metadata not counted")
	}
	carrying := func() *keyindex.File {
		for _, f := range idx.Files() {
			if f.CarriedRowIDs() > 0 {
				return f
			}
		}
		return nil
	}
	e.do(k, opUpsert, ids(1, 49), "u") // the replaced rows' ids move to the new file
	before := checkAccounting(t, idx)
	f := carrying()
	if f == nil || f.CarriedRowIDs() != 49 {
		t.Fatalf("the upsert's file carries %v row ids, want 49", f)
	}
	e.do(k, opUpsert, ids(1, 24), "v") // replaces 24 of them: their ids move on
	if f.CarriedRowIDs() != 25 {
		t.Fatalf("%d row ids kept on a file of which 24 rows were replaced, want 25", f.CarriedRowIDs())
	}
	if after := checkAccounting(t, idx); after <= before {
		t.Fatalf("files count %d bytes after more upserts, %d before: the vectors and the new file did not count", after, before)
	}
	e.do(k, opDelete, ids(60, 30), "")
	checkAccounting(t, idx)
	e.compact(k)
	live := 0
	for range idx.Files() {
		live++
	}
	if files := checkAccounting(t, idx); live != 1 || files > 1<<10 {
		t.Fatalf("after a compaction into one file: %d files count %d bytes", live, files)
	}
	e.check(k)
}

// checkFileRefMemory measures what the key index keeps of a data file (keyindex.FileRef), for files as
// iceberg-go's WriteRecords built them (TestFileMetadataMemory's, of a table partitioned by identity, a file per
// partition): FileRef.Bytes covers it within 1.5 times, and it is under a quarter of the DataFile it is made
// from (fileMetaBytes, whose column statistics grow with the columns while a FileRef's size does not: 64
// columns took 30 s under -race to show the same 433 bytes).
func checkFileRefMemory(t *testing.T, schema *arrow.Schema, built []ice.DataFile) {
	t.Helper()
	files := int64(len(built))
	before := heapInUse()
	refs := make([]keyindex.FileRef, len(built))
	for i, df := range built {
		refs[i] = keyindex.NewFileRef(df)
	}
	cost := (heapInUse() - before) / files
	est := refs[0].Bytes()
	t.Logf("per file: FileRef %d B, estimate %d B, a DataFile as built and read about %d B (fileMetaBytes)",
		cost, est, fileMetaBytes(schema))
	if cost > est || 2*est > 3*max(cost, 1) {
		t.Errorf("a FileRef takes %d B, estimated at %d B: not within 1.5 times", cost, est)
	}
	if 4*est > fileMetaBytes(schema) {
		t.Errorf("a FileRef is estimated at %d B, over a quarter of a DataFile's %d B", est, fileMetaBytes(schema))
	}
	for i, df := range built {
		if r := refs[i]; r.FilePath() != df.FilePath() || r.SpecID() != df.SpecID() || fmt.Sprint(r.Partition()) != fmt.Sprint(df.Partition()) {
			t.Fatalf("file %d: ref %+v of %s", i, r, df.FilePath())
		}
	}
	runtime.KeepAlive(refs)
}
