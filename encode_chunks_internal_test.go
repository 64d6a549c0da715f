package iceberg

import (
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// TestSplitRecords cuts records of uneven sizes into parts: the parts hold every row once, in order, about
// rows/n each (the last takes the remainder), slicing the records that straddle a cut.
func TestSplitRecords(t *testing.T) {
	for _, tc := range []struct {
		sizes []int
		n     int
		want  []int64
	}{
		{[]int{16384, 16384, 6232}, 2, []int64{19500, 19500}},
		{[]int{10, 10, 10}, 3, []int64{10, 10, 10}},
		{[]int{7}, 2, []int64{3, 4}},
		{[]int{5, 1, 9, 2}, 4, []int64{4, 4, 4, 5}},
	} {
		var recs []arrow.RecordBatch
		from := 0
		for _, n := range tc.sizes {
			recs = append(recs, idNameRows(from, n))
			from += n
		}
		parts := splitRecords(recs, int64(from), tc.n)
		var got []int64
		var ids []int64
		for _, part := range parts {
			var rows int64
			for _, r := range part {
				rows += r.NumRows()
				ids = append(ids, r.Column(0).(*array.Int64).Int64Values()...)
				r.Release()
			}
			got = append(got, rows)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("sizes %v into %d: parts of %v rows, want %v", tc.sizes, tc.n, got, tc.want)
		}
		for i, id := range ids {
			if id != int64(i) {
				t.Fatalf("sizes %v into %d: row %d holds id %d", tc.sizes, tc.n, i, id)
			}
		}
	}
}
