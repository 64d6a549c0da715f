package iceberg

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"testing"

	"github.com/icewriter/iceberg/internal/commit/cow"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// The copy-on-write stage driven on its own: a table of idNameSchema rows (written by a Writer, then closed), one
// transaction, segments made by hand, and the stage's apply for each, as the committer calls it. The table is
// read back with iceberg-go's scanner.

// cowStageTable is a closed writer's table of files files of 10 rows each (ids 0..10*files-1) in format version
// v, and the names its rows hold.
func cowStageTable(t *testing.T, files, v int) (*table.Table, map[int64][]string) {
	t.Helper()
	w := idNameWriter(t, files, 10, WithCreate(idNameSchema, FormatVersion(v)))
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	return w.Table(), readNamed(t, w)
}

// cowSegment is a copy-on-write segment that upserts ids with name: their new rows in data files written to tbl
// (not committed), their keys as DeleteKeys.
func cowSegment(t *testing.T, tbl *table.Table, ids []int64, name string) Segment {
	t.Helper()
	named := namedRows(ids, name)
	defer named.Release()
	schema, err := table.SchemaToArrowSchema(tbl.Schema(), nil, true, false)
	if err != nil {
		t.Fatal(err)
	}
	rows := array.NewRecordBatch(schema, named.Columns(), named.NumRows()) // WriteRecords releases it
	var files []ice.DataFile
	for df, err := range table.WriteRecords(context.Background(), tbl, schema, func(yield func(arrow.RecordBatch, error) bool) {
		yield(rows, nil)
	}) {
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, df)
	}
	kb := array.NewInt64Builder(memory.DefaultAllocator)
	defer kb.Release()
	kb.AppendValues(ids, nil)
	col := kb.NewArray()
	defer col.Release()
	keys := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{idNameSchema.Field(0)}, nil), []arrow.Array{col}, int64(len(ids)))
	return Segment{DataFiles: files, DeleteKeys: []arrow.RecordBatch{keys}, Rows: int64(len(ids))}
}

// applyCow stages segs through one cowStage in one transaction on tbl and commits it.
func applyCow(t *testing.T, tbl *table.Table, segs []Segment) (*cow.Stage, *table.Table) {
	t.Helper()
	ctx := context.Background()
	stage := cow.NewStage(cow.Config{Parallel: 2, TargetFileSize: DefaultTargetFileSize, RowGroupRows: DefaultRowGroupRows},
		table.MainBranch, segs)
	tx := tbl.NewTransactionOnBranch(table.MainBranch)
	for i := range segs {
		seg := segs[i]
		props := ice.Properties{summaryWriterID: "cow-stage", summaryEpoch: "1", summarySeq: strconv.Itoa(i + 1)}
		if err := stage.Apply(ctx, tx, i, &seg, props); err != nil {
			t.Fatalf("segment %d: %v", i, err)
		}
	}
	next, err := tx.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return stage, next
}

// TestCowStageRewritesEachFileOnce: two segments of one attempt, the second upserting a key the first upserted
// and a key of another file. The table's three files holding a key are each rewritten once (by the first
// segment, for the keys of both), the untouched file stays, the first segment's new-row file is rewritten by the
// second; every file the stage wrote is live after the commit, and the table holds each id once with its newest
// name.
func TestCowStageRewritesEachFileOnce(t *testing.T) {
	t.Parallel() // see TestMain
	tbl, want := cowStageTable(t, 4, 2)
	before := tabletest.Paths(tabletest.LiveDataFiles(t, tbl))
	segs := []Segment{cowSegment(t, tbl, []int64{5, 25}, "a"), cowSegment(t, tbl, []int64{25, 35}, "b")}
	stage, next := applyCow(t, tbl, segs)

	want[5], want[25], want[35] = []string{"a"}, []string{"b"}, []string{"b"}
	if got := readNamedTable(t, next); !maps.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("table holds %v, want %v", got, want)
	}
	live := tabletest.Paths(tabletest.LiveDataFiles(t, next))
	kept := 0
	for p := range before {
		if live[p] {
			kept++
		}
	}
	if kept != 1 {
		t.Fatalf("%d of the table's 4 files are still live, want 1 (ids 10-19 hold no key)", kept)
	}
	// Three of the table's files, and the first segment's new-row file.
	if stage.Rewritten() != 4 {
		t.Fatalf("rewritten = %d, want 4", stage.Rewritten())
	}
	if len(stage.Written()) == 0 || len(stage.Replaced()) != 0 {
		t.Fatalf("written %d files, replaced %d; want some and none (v2 carries no row ids)", len(stage.Written()), len(stage.Replaced()))
	}
	for _, f := range stage.Written() {
		if !live[f.FilePath()] {
			t.Fatalf("the stage wrote %s, which the commit does not reference", f.FilePath())
		}
	}
	snap := next.CurrentSnapshot()
	if _, ok := snap.Summary.Properties[cow.SummaryRewritten]; !ok {
		t.Fatalf("the last snapshot's summary has no %s: %v", cow.SummaryRewritten, snap.Summary.Properties)
	}
}

// TestCowStageKeepsRowIDs: on format version 3 an upserted row's new version keeps the _row_id of the row it
// replaces. The segment's new-row file is written again to carry it (the stage reports the file it replaced,
// which the commit does not reference), and the other rows keep theirs.
func TestCowStageKeepsRowIDs(t *testing.T) {
	t.Parallel() // see TestMain
	tbl, want := cowStageTable(t, 2, 3)
	ids := tabletest.RowIDs(t, tbl)
	seg := cowSegment(t, tbl, []int64{5}, "a")
	orig := seg.DataFiles[0].FilePath()
	stage, next := applyCow(t, tbl, []Segment{seg})

	want[5] = []string{"a"}
	if got := readNamedTable(t, next); !maps.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("table holds %v, want %v", got, want)
	}
	if got := tabletest.RowIDs(t, next); !maps.Equal(got, ids) {
		t.Fatalf("row ids after the upsert %v, want %v", got, ids)
	}
	if len(stage.Replaced()) != 1 || stage.Replaced()[0].FilePath() != orig {
		t.Fatalf("replaced %v, want the segment's new-row file %s", stage.Replaced(), orig)
	}
	if tabletest.Paths(tabletest.LiveDataFiles(t, next))[orig] {
		t.Fatalf("the replaced new-row file %s is live", orig)
	}
}
