package tabletest

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// KeyRow is the one row an id holds, read back with row lineage: its _row_id, and the value of the int64 column
// KeyRows was asked for (0 when none).
type KeyRow struct{ RowID, V int64 }

// Column returns the index of the one column of sc named name, and fails the test when there is not exactly one.
func Column(t testing.TB, sc *arrow.Schema, name string) int {
	t.Helper()
	idx := sc.FieldIndices(name)
	if len(idx) != 1 {
		t.Fatalf("scan schema %v has no single column %q", sc, name)
	}
	return idx[0]
}

// KeyRows scans tbl's current snapshot with row lineage and returns each id's row, with the int64 column value
// (none: ""). It fails the test on a null _row_id (the scanner must resolve one for every row of a format-version
// 3 table) and on an id that two rows hold.
func KeyRows(t testing.TB, tbl *table.Table, value string) map[int64]KeyRow {
	t.Helper()
	sc, recs, err := tbl.Scan(table.WithRowLineage()).ToArrowRecords(context.Background())
	if err != nil {
		t.Fatalf("scan with row lineage: %v", err)
	}
	col := func(name string) int { return Column(t, sc, name) }
	iid, irow, iv := col("id"), col(ice.RowIDColumnName), -1
	if value != "" {
		iv = col(value)
	}
	out := map[int64]KeyRow{}
	for rec, err := range recs {
		if err != nil {
			t.Fatalf("scan with row lineage: %v", err)
		}
		ids, rids := rec.Column(iid).(*array.Int64), rec.Column(irow).(*array.Int64)
		for r := 0; r < int(rec.NumRows()); r++ {
			id := ids.Value(r)
			if rids.IsNull(r) {
				t.Fatalf("id %d: null _row_id", id)
			}
			if _, dup := out[id]; dup {
				t.Fatalf("id %d twice", id)
			}
			row := KeyRow{RowID: rids.Value(r)}
			if iv >= 0 {
				row.V = rec.Column(iv).(*array.Int64).Value(r)
			}
			out[id] = row
		}
		rec.Release()
	}
	return out
}

// RowIDs is KeyRows without a value: each id's _row_id.
func RowIDs(t testing.TB, tbl *table.Table) map[int64]int64 {
	t.Helper()
	out := map[int64]int64{}
	for id, r := range KeyRows(t, tbl, "") {
		out[id] = r.RowID
	}
	return out
}
