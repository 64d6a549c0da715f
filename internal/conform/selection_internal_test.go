package conform

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/icewriter/iceberg/internal/arrowx"
)

// TestRowSelection: the records a selection makes hold exactly the rows not dropped, in order, whatever the
// records' sizes and the share dropped (none, some, all); records kept whole with nothing open before them
// pass as they are, no record exceeds arrowx.RecordRows unless one record alone keeps more, and nothing the selection
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
				var want []int64
				id := int64(0)
				for range 1 + rng.IntN(12) {
					n := 1 + rng.IntN(3000)
					if rng.IntN(8) == 0 {
						n = arrowx.RecordRows + rng.IntN(100)
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
				sel := NewRowSelection(context.Background(), mem)
				for i, rec := range recs {
					if err := sel.Add(rec, nil, drops[i]); err != nil {
						t.Fatal(err)
					}
				}
				out, err := sel.Records()
				if err != nil {
					t.Fatal(err)
				}
				var got []int64
				for _, rec := range out {
					if rec.NumRows() > arrowx.RecordRows && !slices.Contains(recs, rec) && rec.NumRows() > int64(maxRows(recs)) {
						t.Errorf("a record of %d rows, more than gatherRows and than any input", rec.NumRows())
					}
					got = append(got, selectionRows(rec)...)
				}
				if !slices.Equal(got, want) {
					first := 0
					for first < min(len(got), len(want)) && got[first] == want[first] {
						first++
					}
					t.Fatalf("got %d rows, want %d; they differ from row %d on (id*2 + 1 if null; -1-id: columns mixed up)\n got  %v\n want %v",
						len(got), len(want), first, got[first:min(first+20, len(got))], want[first:min(first+20, len(want))])
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
				arrowx.ReleaseRecords(out...)
				arrowx.ReleaseRecords(recs...)
			})
		}
	}
}

// selectionRecord makes n rows of sc with ids from first, nulls now and then, and their compact form
// (selectionRow). The values are built with strconv, not fmt: this fixture and selectionRows were most of the
// test's time under -race.
func selectionRecord(mem memory.Allocator, sc *arrow.Schema, first int64, n int, rng *rand.Rand) (arrow.RecordBatch, []int64) {
	b := array.NewRecordBuilder(mem, sc)
	defer b.Release()
	rows := make([]int64, n)
	var buf []byte
	for i := range n {
		id := first + int64(i)
		b.Field(0).(*array.Int64Builder).Append(id)
		null := rng.IntN(10) == 0
		switch f := b.Field(1).(type) {
		case *array.StringBuilder:
			if null {
				f.AppendNull()
			} else {
				buf = strconv.AppendInt(append(buf[:0], 'n'), id, 10)
				f.BinaryBuilder.Append(buf)
			}
			ok := b.Field(2).(*array.BooleanBuilder)
			ok.Append(id%3 == 0)
		case *array.ListBuilder:
			if null {
				f.AppendNull()
			} else {
				f.Append(true)
				buf = strconv.AppendInt(append(buf[:0], 't'), id, 10)
				f.ValueBuilder().(*array.StringBuilder).BinaryBuilder.Append(buf)
			}
		}
		rows[i] = selectionRow(id, null)
	}
	return b.NewRecordBatch(), rows
}

// selectionRow is the compact form of a row: id*2, plus 1 when its second column is null.
func selectionRow(id int64, null bool) int64 {
	if null {
		return id*2 + 1
	}
	return id * 2
}

// selectionRows is the compact form of a record's rows (as selectionRecord makes them), checking the columns
// agree: a row whose values do not belong to its id is -1-id.
func selectionRows(rec arrow.RecordBatch) []int64 {
	ids := rec.Column(0).(*array.Int64)
	out := make([]int64, rec.NumRows())
	var buf []byte
	for i := range out {
		id := ids.Value(i)
		null := rec.Column(1).IsNull(i)
		switch c := rec.Column(1).(type) {
		case *array.String:
			buf = strconv.AppendInt(append(buf[:0], 'n'), id, 10)
			if !null && c.Value(i) != string(buf) || rec.Column(2).(*array.Boolean).Value(i) != (id%3 == 0) {
				out[i] = -1 - id
				continue
			}
		case *array.List:
			if !null {
				start, end := c.ValueOffsets(i)
				vals := c.ListValues().(*array.String)
				buf = strconv.AppendInt(append(buf[:0], 't'), id, 10)
				if end-start != 1 || vals.IsNull(int(start)) || vals.Value(int(start)) != string(buf) {
					out[i] = -1 - id
					continue
				}
			}
		}
		out[i] = selectionRow(id, null)
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
