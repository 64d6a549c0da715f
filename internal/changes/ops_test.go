package changes

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/icewriter/iceberg/internal/arrowx"
)

// TestParseOpsLayouts: the op column reads the same as a string array (whole, sliced past its first values, with
// nulls), a large string array and a dictionary of strings, and a bad or null value is reported at its row of
// the array (not of the buffers under a slice).
func TestParseOpsLayouts(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	// The first three values are cut off by the slices below: they would parse as other changes.
	values := []string{"d", "insert", "DELETE", "c", "U", "r", "delete", "Update", "INSERT", "d"}
	want := []Kind{Upsert, Upsert, Upsert, Delete, Upsert, Upsert, Delete}
	sb := array.NewStringBuilder(mem)
	lb := array.NewLargeStringBuilder(mem)
	db := array.NewDictionaryBuilder(mem, &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8,
		ValueType: arrow.BinaryTypes.String}).(*array.BinaryDictionaryBuilder)
	for _, v := range values {
		sb.Append(v)
		lb.Append(v)
		if err := db.AppendString(v); err != nil {
			t.Fatal(err)
		}
	}
	whole := []arrow.Array{sb.NewArray(), lb.NewArray(), db.NewArray()}
	sb.Release()
	lb.Release()
	db.Release()
	defer arrowx.ReleaseArrays(whole)
	for _, col := range whole {
		sliced := array.NewSlice(col, 3, int64(len(values)))
		got, err := ParseOps(sliced, "op")
		sliced.Release()
		if err != nil {
			t.Fatalf("%s: %v", col.DataType(), err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s sliced: %v, want %v", col.DataType(), got, want)
		}
	}

	// Bad values: the row and the value named are the slice's.
	sb = array.NewStringBuilder(mem)
	sb.AppendValues([]string{"truncate", "c", "x", "u"}, nil)
	sb.AppendNull()
	col := sb.NewArray()
	sb.Release()
	defer col.Release()
	for _, c := range []struct {
		from int64
		row  string
	}{{1, `row 1: "x"`}, {3, "row 1: null"}} {
		sliced := array.NewSlice(col, c.from, int64(col.Len()))
		_, err := ParseOps(sliced, "op")
		sliced.Release()
		if !errors.Is(err, ErrUnknownOperation) || !strings.Contains(err.Error(), c.row) {
			t.Fatalf("from row %d: %v, want ErrUnknownOperation at %s", c.from, err, c.row)
		}
	}
}
