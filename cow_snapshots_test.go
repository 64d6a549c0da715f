package iceberg_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// countAt scans the table as of a snapshot and returns the rows per id.
func countAt(t *testing.T, tbl *table.Table, snapID int64) map[int64]int {
	t.Helper()
	sc, it := tabletest.Records(t, tbl, table.WithSnapshotID(snapID))
	idx := sc.FieldIndices("id")[0]
	out := map[int64]int{}
	for rec := range it {
		ids := rec.Column(idx).(*array.Int64)
		for r := 0; r < ids.Len(); r++ {
			out[ids.Value(r)]++
		}
	}
	return out
}

// checkpointedUpsert writes ids 0..99 into one file of a copy-on-write table of the format version given
// (checkpoint "t1"), then upserts id 5 (checkpoint "t2"), and returns the table and the snapshot the upsert was
// based on.
func checkpointedUpsert(t *testing.T, cat icecatalog.Catalog, ident table.Identifier, version int) (*table.Table, int64) {
	t.Helper()
	ctx := context.Background()
	w, err := iceberg.NewWriter(ctx, cat, ident,
		iceberg.WithCreate(kvSchema, iceberg.IdentifierFields("id"), iceberg.FormatVersion(version)),
		iceberg.WithMode(iceberg.CopyOnWrite), iceberg.WithWriterID("rv"), iceberg.WithCheckpoints(),
		iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompactionEvery(0))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Close(ctx) }()
	ids := make([]int64, 100)
	for i := range ids {
		ids[i] = int64(i)
	}
	rec := kvBatch(ids, ids)
	err = w.Write(ctx, rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Checkpoint(ctx, "t1"); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	before := w.Table().CurrentSnapshot().SnapshotID
	up := kvBatch([]int64{5}, []int64{1005})
	err = w.Upsert(ctx, up)
	up.Release()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Checkpoint(ctx, "t2"); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	tbl := tabletest.Load(t, cat, ident)
	return tbl, before
}

// TestCopyOnWriteCheckpointSnapshotHoldsItsRows: on v2 and v3, every snapshot of a copy-on-write upsert commit
// that carries checkpoint token "t2" holds all 100 ids committed through that token (LastCheckpoint walks the
// ancestry, so after a rollback to such a snapshot the caller replays from its token); on v3 that includes the
// commit's first snapshot, the overwrite, whose rewritten file's other 99 rows no operation touched.
func TestCopyOnWriteCheckpointSnapshotHoldsItsRows(t *testing.T) {
	t.Parallel() // see TestMain
	for _, version := range []int{2, 3} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) { copyOnWriteCheckpointSnapshots(t, version) })
	}
}

func copyOnWriteCheckpointSnapshots(t *testing.T, version int) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"cow", "ckpt"}
	tbl, before := checkpointedUpsert(t, cat, ident, version)
	for s := tbl.CurrentSnapshot(); s != nil && s.SnapshotID != before; s = tbl.Metadata().SnapshotByID(*s.ParentSnapshotID) {
		if s.Summary == nil || s.Summary.Properties["icewriter.checkpoint"] != "t2" {
			continue
		}
		got := countAt(t, tbl, s.SnapshotID)
		if len(got) != 100 {
			// Show what a rollback to this snapshot does to LastCheckpoint.
			tx := tbl.NewTransaction()
			if err := tx.RollbackToSnapshot(s.SnapshotID); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			tok, _, _ := iceberg.LastCheckpoint(ctx, cat, ident, "rv")
			t.Fatalf("snapshot %d (%s) carries checkpoint t2 but holds %d of the 100 ids; after a rollback to it "+
				"LastCheckpoint = %q", s.SnapshotID, s.Summary.Operation, len(got), tok)
		}
	}
}

// TestCopyOnWriteRewrittenRowsNotAppended: on v2 and v3, upserting one key does not publish the other 99 rows
// of the rewritten file as new data: an incremental append scan since the upsert's base (what iceberg-go's
// IncrementalAppendScan and Spark/Flink streaming reads consume) returns at most the one upserted row.
func TestCopyOnWriteRewrittenRowsNotAppended(t *testing.T) {
	t.Parallel() // see TestMain
	for _, version := range []int{2, 3} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) { copyOnWriteRewrittenRowsNotAppended(t, version) })
	}
}

func copyOnWriteRewrittenRowsNotAppended(t *testing.T, version int) {
	ctx := context.Background()
	cat := openCatalog(t)
	tbl, before := checkpointedUpsert(t, cat, table.Identifier{"cow", "append"}, version)
	tasks, err := tbl.NewIncrementalAppendScan().FromSnapshotExclusive(before).PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var appended int64
	for _, task := range tasks {
		appended += task.File.Count()
	}
	if appended > 1 {
		t.Fatalf("incremental append scan since the upsert's base returns %d rows in %d files, want at most the "+
			"1 upserted row: the rewritten file's unchanged rows are published as appended data", appended, len(tasks))
	}
}
