package iceberg

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestRowSelection: the records a selection makes hold exactly the rows not dropped, in order, whatever the
// records' sizes and the share dropped (none, some, all); records kept whole with nothing open before them
// pass as they are, no record exceeds gatherRows unless one record alone keeps more, and nothing the selection
// allocated is left once its records are released. Columns: primitives and strings with nulls (the chunked
// take) and, in a second schema, a list column (filtered record by record).
func TestRowSelection(t *testing.T) {
	t.Parallel() // see TestMain
	strs := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "ok", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	}, nil)
	lists := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
	}, nil)
	for _, sc := range []*arrow.Schema{strs, lists} {
		for seed := uint64(0); seed < 12; seed++ {
			t.Run(fmt.Sprintf("%s/%d", sc.Field(1).Name, seed), func(t *testing.T) {
				mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
				defer mem.AssertSize(t, 0)
				rng := rand.New(rand.NewPCG(seed, 7))
				var recs []arrow.RecordBatch
				var drops [][]bool
				var want []string
				id := int64(0)
				for range 1 + rng.IntN(12) {
					n := 1 + rng.IntN(3000)
					if rng.IntN(8) == 0 {
						n = gatherRows + rng.IntN(100)
					}
					share := []float64{0, 0.3, 1}[rng.IntN(3)]
					rec, rows := selectionRecord(mem, sc, id, n, rng)
					id += int64(n)
					dropped := make([]bool, n)
					for i := range dropped {
						dropped[i] = rng.Float64() < share
						if !dropped[i] {
							want = append(want, rows[i])
						}
					}
					recs, drops = append(recs, rec), append(drops, dropped)
				}
				sel := newRowSelection(context.Background(), mem)
				for i, rec := range recs {
					if err := sel.add(rec, drops[i]); err != nil {
						t.Fatal(err)
					}
				}
				out, err := sel.records()
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, rec := range out {
					if rec.NumRows() > gatherRows && !slices.Contains(recs, rec) && rec.NumRows() > int64(maxRows(recs)) {
						t.Errorf("a record of %d rows, more than gatherRows and than any input", rec.NumRows())
					}
					got = append(got, selectionRows(rec)...)
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("got %d rows, want %d (first differing rows shown)\n got  %.300v\n want %.300v",
						len(got), len(want), got, want)
				}
				// A selection opens at the first record with rows dropped and some kept, and stays open (the
				// chunked take) or is closed by every record filtered alone (the list schema).
				open := false
				for i, rec := range recs {
					if allDropped(drops[i]) {
						continue
					}
					whole := !slices.Contains(drops[i], true)
					if whole && !open && !slices.Contains(out, rec) {
						t.Errorf("record %d, kept whole with no selection open, was copied", i)
					}
					open = (open || !whole) && sc == strs
				}
				releaseRecords(out...)
				releaseRecords(recs...)
			})
		}
	}
}

// selectionRecord makes n rows of sc with ids from first, nulls now and then, and their text form.
func selectionRecord(mem memory.Allocator, sc *arrow.Schema, first int64, n int, rng *rand.Rand) (arrow.RecordBatch, []string) {
	b := array.NewRecordBuilder(mem, sc)
	defer b.Release()
	rows := make([]string, n)
	for i := range n {
		id := first + int64(i)
		b.Field(0).(*array.Int64Builder).Append(id)
		null := rng.IntN(10) == 0
		switch f := b.Field(1).(type) {
		case *array.StringBuilder:
			if null {
				f.AppendNull()
			} else {
				f.Append(fmt.Sprint("n", id))
			}
			ok := b.Field(2).(*array.BooleanBuilder)
			ok.Append(id%3 == 0)
		case *array.ListBuilder:
			if null {
				f.AppendNull()
			} else {
				f.Append(true)
				f.ValueBuilder().(*array.StringBuilder).Append(fmt.Sprint("t", id))
			}
		}
		rows[i] = fmt.Sprint(id, null)
	}
	return b.NewRecordBatch(), rows
}

// selectionRows is the text form of a record's rows (as selectionRecord makes it), checking the columns agree.
func selectionRows(rec arrow.RecordBatch) []string {
	ids := rec.Column(0).(*array.Int64)
	out := make([]string, rec.NumRows())
	for i := range out {
		id := ids.Value(i)
		null := rec.Column(1).IsNull(i)
		switch c := rec.Column(1).(type) {
		case *array.String:
			if !null && c.Value(i) != fmt.Sprint("n", id) || rec.Column(2).(*array.Boolean).Value(i) != (id%3 == 0) {
				out[i] = fmt.Sprint("row of id ", id, " mixed up")
				continue
			}
		case *array.List:
			if !null && c.ValueStr(i) != fmt.Sprintf(`["t%d"]`, id) {
				out[i] = fmt.Sprint("row of id ", id, " mixed up: ", c.ValueStr(i))
				continue
			}
		}
		out[i] = fmt.Sprint(id, null)
	}
	return out
}

func maxRows(recs []arrow.RecordBatch) int {
	m := 0
	for _, r := range recs {
		m = max(m, int(r.NumRows()))
	}
	return m
}

func allDropped(dropped []bool) bool {
	for _, d := range dropped {
		if !d {
			return false
		}
	}
	return true
}
