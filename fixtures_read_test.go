package iceberg_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// Reading a table back with iceberg-go's scanner and planner: rows, values by key, row lineage, live data and
// delete files.

// readRows scans the table with iceberg-go's scanner and returns, per id, how many rows carry it, plus each
// id's row as a map of column values (the last one seen).
func readRows(t testing.TB, cat tabletest.Loader, ident table.Identifier) (map[int64]int, map[int64]map[string]any) {
	t.Helper()
	counts := map[int64]int{}
	rows := map[int64]map[string]any{}
	sc, recs := tabletest.Records(t, tabletest.Load(t, cat, ident))
	idIdx := sc.FieldIndices("id")[0]
	for rec := range recs {
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
func readKV(t *testing.T, cat tabletest.Loader, ident table.Identifier) map[int64][]int64 {
	t.Helper()
	out := map[int64][]int64{}
	sc, recs := tabletest.Records(t, tabletest.Load(t, cat, ident))
	iid, iv, is := sc.FieldIndices("id")[0], sc.FieldIndices("v")[0], sc.FieldIndices("s")[0]
	for rec := range recs {
		ids, vs, ss := rec.Column(iid).(*array.Int64), rec.Column(iv).(*array.Int64), rec.Column(is).(*array.String)
		for r := 0; r < int(rec.NumRows()); r++ {
			if want := fmt.Sprintf("row-%d-%d", ids.Value(r), vs.Value(r)); ss.Value(r) != want {
				t.Fatalf("row %d: s=%q, want %q", ids.Value(r), ss.Value(r), want)
			}
			out[ids.Value(r)] = append(out[ids.Value(r)], vs.Value(r))
		}
	}
	for k := range out {
		slices.Sort(out[k])
	}
	return out
}

// readPairs scans the table and returns, per value of the int64 column key, the values of the int64 column val
// in its rows, in scan order.
func readPairs(t *testing.T, cat tabletest.Loader, ident table.Identifier, key, val string) map[int64][]int64 {
	t.Helper()
	out := map[int64][]int64{}
	sc, recs := tabletest.Records(t, tabletest.Load(t, cat, ident))
	ik, iv := sc.FieldIndices(key)[0], sc.FieldIndices(val)[0]
	for rec := range recs {
		ks, vs := rec.Column(ik).(*array.Int64), rec.Column(iv).(*array.Int64)
		for r := 0; r < int(rec.NumRows()); r++ {
			out[ks.Value(r)] = append(out[ks.Value(r)], vs.Value(r))
		}
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
func readLineage(t *testing.T, cat tabletest.Loader, ident table.Identifier) []lineageRow {
	t.Helper()
	tbl := tabletest.Load(t, cat, ident)
	if tbl.CurrentSnapshot() == nil {
		return nil
	}
	sc, recs := tabletest.Records(t, tbl, table.WithRowLineage())
	col := func(name string) int { return tabletest.Column(t, sc, name) }
	iid, iv, is, irow, iseq := col("id"), col("v"), col("s"), col("_row_id"), col("_last_updated_sequence_number")
	var out []lineageRow
	for rec := range recs {
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
	}
	return out
}

// readRowIDs loads the table and reads each id's row with row lineage (its _row_id and v); it fails on a null
// _row_id and on an id held by two rows.
func readRowIDs(t *testing.T, cat tabletest.Loader, ident table.Identifier) map[int64]tabletest.KeyRow {
	t.Helper()
	return tabletest.KeyRows(t, tabletest.Load(t, cat, ident), "v")
}

// liveDataFiles loads the table and plans its current snapshot: one task per live data file.
func liveDataFiles(t testing.TB, cat tabletest.Loader, ident table.Identifier) (*table.Table, []table.FileScanTask) {
	t.Helper()
	tbl := tabletest.Load(t, cat, ident)
	return tbl, tabletest.LiveDataFiles(t, tbl)
}

// firstDataFile returns the path of the table's live data file of rows rows (the test writes one).
func firstDataFile(t *testing.T, cat tabletest.Loader, ident table.Identifier, rows int64) string {
	t.Helper()
	_, tasks := liveDataFiles(t, cat, ident)
	for _, task := range tasks {
		if task.File.Count() == rows {
			return task.File.FilePath()
		}
	}
	t.Fatalf("no live data file of %d rows", rows)
	return ""
}

// liveDeletes loads the table and describes its live delete files.
func liveDeletes(t *testing.T, cat tabletest.Loader, ident table.Identifier) tabletest.DeleteSet {
	t.Helper()
	return tabletest.LiveDeleteFiles(t, tabletest.Load(t, cat, ident))
}

// assertPositionDeletesOnly fails the test unless the table's live deletes are all position deletes from a key
// index: no equality delete file, and position delete files (format version 2) or deletion vectors (3).
func assertPositionDeletesOnly(t *testing.T, cat tabletest.Loader, ident table.Identifier, version int) {
	t.Helper()
	l := liveDeletes(t, cat, ident)
	if l.Eq != 0 || (version == 2 && l.Pos == 0) || (version == 3 && l.DVs == 0) {
		t.Fatalf("live delete files: %d equality, %d position, %d deletion vectors", l.Eq, l.Pos, l.DVs)
	}
}
