package iceberg_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	ice "github.com/apache/iceberg-go"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// Reading a table back with iceberg-go's scanner and planner: rows, values by key, row lineage, live data and
// delete files.

// readRows scans the table with iceberg-go's scanner and returns, per id, how many rows carry it, plus each
// id's row as a map of column values (the last one seen).
func readRows(t testing.TB, cat icecatalog.Catalog, ident table.Identifier) (map[int64]int, map[int64]map[string]any) {
	t.Helper()
	ctx := context.Background()
	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		t.Fatalf("load table: %v", err)
	}
	counts := map[int64]int{}
	rows := map[int64]map[string]any{}
	if tbl.CurrentSnapshot() == nil {
		return counts, rows
	}
	sc, it, err := tbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	idIdx := sc.FieldIndices("id")[0]
	for rec, err := range it {
		if err != nil {
			t.Fatalf("scan: %v", err)
		}
		ids := rec.Column(idIdx).(*array.Int64)
		for r := 0; r < int(rec.NumRows()); r++ {
			id := ids.Value(r)
			counts[id]++
			row := map[string]any{}
			for c, f := range sc.Fields() {
				row[f.Name] = cellValue(rec.Column(c), r)
			}
			rows[id] = row
		}
		rec.Release()
	}
	return counts, rows
}

// cellValue is row r of a as the Go value readRows and the models compare (timestamps as int64).
func cellValue(a arrow.Array, r int) any {
	if a.IsNull(r) {
		return nil
	}
	switch c := a.(type) {
	case *array.Int64:
		return c.Value(r)
	case *array.Int32:
		return int64(c.Value(r))
	case *array.Float64:
		return c.Value(r)
	case *array.String:
		return c.Value(r)
	case *array.LargeString:
		return c.Value(r)
	case *array.Timestamp:
		return int64(c.Value(r))
	case *array.Boolean:
		return c.Value(r)
	}
	return a.ValueStr(r)
}

// readKV returns, per id, the sorted v values of its rows.
func readKV(t *testing.T, cat icecatalog.Catalog, ident table.Identifier) map[int64][]int64 {
	t.Helper()
	ctx := context.Background()
	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64][]int64{}
	if tbl.CurrentSnapshot() == nil {
		return out
	}
	sc, it, err := tbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	iid, iv, is := sc.FieldIndices("id")[0], sc.FieldIndices("v")[0], sc.FieldIndices("s")[0]
	for rec, err := range it {
		if err != nil {
			t.Fatal(err)
		}
		ids, vs, ss := rec.Column(iid).(*array.Int64), rec.Column(iv).(*array.Int64), rec.Column(is).(*array.String)
		for r := 0; r < int(rec.NumRows()); r++ {
			if want := fmt.Sprintf("row-%d-%d", ids.Value(r), vs.Value(r)); ss.Value(r) != want {
				t.Fatalf("row %d: s=%q, want %q", ids.Value(r), ss.Value(r), want)
			}
			out[ids.Value(r)] = append(out[ids.Value(r)], vs.Value(r))
		}
		rec.Release()
	}
	for k := range out {
		slices.Sort(out[k])
	}
	return out
}

// readPairs scans the table and returns, per value of the int64 column key, the values of the int64 column val
// in its rows, in scan order.
func readPairs(t *testing.T, cat icecatalog.Catalog, ident table.Identifier, key, val string) map[int64][]int64 {
	t.Helper()
	ctx := context.Background()
	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64][]int64{}
	if tbl.CurrentSnapshot() == nil {
		return out
	}
	sc, it, err := tbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ik, iv := sc.FieldIndices(key)[0], sc.FieldIndices(val)[0]
	for rec, err := range it {
		if err != nil {
			t.Fatal(err)
		}
		ks, vs := rec.Column(ik).(*array.Int64), rec.Column(iv).(*array.Int64)
		for r := 0; r < int(rec.NumRows()); r++ {
			out[ks.Value(r)] = append(out[ks.Value(r)], vs.Value(r))
		}
		rec.Release()
	}
	return out
}

// lineage is one row's row-lineage pair as the scanner reports it.
type lineage struct{ rowID, seq int64 }

// lineageRow is one row read back with its lineage.
type lineageRow struct {
	id, v int64
	lineage
}

// readLineage scans the table with row lineage and returns every row. It fails on a null _row_id or
// _last_updated_sequence_number (the scanner must resolve both for every row of a v3 table) and on a row whose
// s column does not match its id and v.
func readLineage(t *testing.T, cat icecatalog.Catalog, ident table.Identifier) []lineageRow {
	t.Helper()
	ctx := context.Background()
	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		t.Fatalf("load table: %v", err)
	}
	if tbl.CurrentSnapshot() == nil {
		return nil
	}
	sc, it, err := tbl.Scan(table.WithRowLineage()).ToArrowRecords(ctx)
	if err != nil {
		t.Fatalf("scan with row lineage: %v", err)
	}
	col := func(name string) int { return tabletest.Column(t, sc, name) }
	iid, iv, is, irow, iseq := col("id"), col("v"), col("s"), col("_row_id"), col("_last_updated_sequence_number")
	var out []lineageRow
	for rec, err := range it {
		if err != nil {
			t.Fatalf("scan with row lineage: %v", err)
		}
		ids, vs, ss := rec.Column(iid).(*array.Int64), rec.Column(iv).(*array.Int64), rec.Column(is).(*array.String)
		rowIDs, ok := rec.Column(irow).(*array.Int64)
		if !ok {
			t.Fatalf("_row_id is %s, want int64", rec.Column(irow).DataType())
		}
		seqs, ok := rec.Column(iseq).(*array.Int64)
		if !ok {
			t.Fatalf("_last_updated_sequence_number is %s, want int64", rec.Column(iseq).DataType())
		}
		for r := 0; r < int(rec.NumRows()); r++ {
			id := ids.Value(r)
			if want := fmt.Sprintf("row-%d-%d", id, vs.Value(r)); ss.Value(r) != want {
				t.Fatalf("row %d: s=%q, want %q", id, ss.Value(r), want)
			}
			if rowIDs.IsNull(r) {
				t.Fatalf("row id=%d has a null _row_id", id)
			}
			if seqs.IsNull(r) {
				t.Fatalf("row id=%d has a null _last_updated_sequence_number", id)
			}
			out = append(out, lineageRow{id: id, v: vs.Value(r), lineage: lineage{rowIDs.Value(r), seqs.Value(r)}})
		}
		rec.Release()
	}
	return out
}

// readRowIDs loads the table and reads each id's row with row lineage (its _row_id and v); it fails on a null
// _row_id and on an id held by two rows.
func readRowIDs(t *testing.T, cat tableLoader, ident table.Identifier) map[int64]tabletest.KeyRow {
	t.Helper()
	tbl, err := cat.LoadTable(context.Background(), ident)
	if err != nil {
		t.Fatal(err)
	}
	return tabletest.KeyRows(t, tbl, "v")
}

// liveDataFiles loads the table and plans its current snapshot: one task per live data file.
func liveDataFiles(t testing.TB, cat icecatalog.Catalog, ident table.Identifier) (*table.Table, []table.FileScanTask) {
	t.Helper()
	ctx := context.Background()
	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return tbl, tasks
}

// planTasks plans a scan of the table's current snapshot.
func planTasks(t testing.TB, cat tableLoader, ident table.Identifier) []table.FileScanTask {
	t.Helper()
	tbl, err := cat.LoadTable(context.Background(), ident)
	if err != nil {
		t.Fatal(err)
	}
	return planFiles(t, tbl)
}

// planFiles lists the table's data files.
func planFiles(t testing.TB, tbl *table.Table) []table.FileScanTask {
	t.Helper()
	tasks, err := tbl.Scan().PlanFiles(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return tasks
}

// firstDataFile returns the path of the table's live data file of rows rows (the test writes one).
func firstDataFile(t *testing.T, cat tableLoader, ident table.Identifier, rows int64) string {
	t.Helper()
	for _, task := range planTasks(t, cat, ident) {
		if task.File.Count() == rows {
			return task.File.FilePath()
		}
	}
	t.Fatalf("no live data file of %d rows", rows)
	return ""
}

// hasPositionDeletes reports whether any planned data file has a deletion vector or position delete files.
func hasPositionDeletes(tasks []table.FileScanTask) bool {
	for _, t := range tasks {
		if len(t.DeleteFiles)+len(t.DeletionVectorFiles) > 0 {
			return true
		}
	}
	return false
}

// posFilePathID is the field id of a position delete file's file_path column.
const posFilePathID = 2147483546

// liveDeleteSet describes the live delete files of a table, as iceberg-go's planner assigns them: equality
// delete files, position delete files and deletion vectors (each counted once).
type liveDeleteSet struct {
	eq, pos, dvs int
	unscoped     int              // position delete files scoped to no single data file
	perData      map[string]int   // data file -> live position delete files planned on it
	positions    map[string]int64 // data file -> rows of the largest of its position delete files
}

func liveDeletes(t *testing.T, cat tableLoader, ident table.Identifier) liveDeleteSet {
	t.Helper()
	out := liveDeleteSet{perData: map[string]int{}, positions: map[string]int64{}}
	eq, pos, dvs := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, task := range planTasks(t, cat, ident) {
		for _, f := range task.EqualityDeleteFiles {
			eq[f.FilePath()] = true
		}
		for _, f := range task.DeletionVectorFiles {
			var off int64
			if o := f.ContentOffset(); o != nil {
				off = *o
			}
			dvs[fmt.Sprint(f.FilePath(), "@", off)] = true
		}
		for _, f := range task.DeleteFiles {
			if f.ContentType() != ice.EntryContentPosDeletes {
				continue
			}
			// Format version 2 manifests have no referenced_data_file (iceberg-go writes it on v3 only): a
			// file-scoped position delete says so by file_path bounds with lower = upper, as Java's readers take it.
			path := task.File.FilePath()
			scoped := (f.ReferencedDataFile() != nil && *f.ReferencedDataFile() == path) ||
				(string(f.LowerBoundValues()[posFilePathID]) == path && string(f.UpperBoundValues()[posFilePathID]) == path)
			if !pos[f.FilePath()] && !scoped {
				out.unscoped++
			}
			pos[f.FilePath()] = true
			out.perData[task.File.FilePath()]++
			out.positions[task.File.FilePath()] = max(out.positions[task.File.FilePath()], f.Count())
		}
	}
	out.eq, out.pos, out.dvs = len(eq), len(pos), len(dvs)
	return out
}

// assertPositionDeletesOnly fails the test unless the table's live deletes are all position deletes from a key
// index: no equality delete file, and position delete files (format version 2) or deletion vectors (3).
func assertPositionDeletesOnly(t *testing.T, cat tableLoader, ident table.Identifier, version int) {
	t.Helper()
	l := liveDeletes(t, cat, ident)
	if l.eq != 0 || (version == 2 && l.pos == 0) || (version == 3 && l.dvs == 0) {
		t.Fatalf("live delete files: %d equality, %d position, %d deletion vectors", l.eq, l.pos, l.dvs)
	}
}
