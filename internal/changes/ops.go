package changes

import (
	"errors"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/icewriter/iceberg/internal/conform"
)

// Kind is a row's change: an insert (Write's rows), an upsert or a delete.
type Kind uint8

// The kinds of change.
const (
	Insert Kind = iota
	Upsert
	Delete
)

// ErrUnknownOperation is wrapped by the error for a row whose op value is not one Apply accepts.
var ErrUnknownOperation = errors.New("not a change operation")

// opsAccepted is what the error for a bad op value lists.
const opsAccepted = "accepted: insert, update, delete, c, u, r, d, in any letter case"

// ParseOp maps an op value to its change: insert, update, c, u and r upsert; delete and d delete (ASCII letters
// in any case). It takes the value's bytes too (ParseOps reads a string column's bytes in place).
func ParseOp[S string | []byte](s S) (Kind, bool) {
	lower := func(b byte) byte {
		if 'A' <= b && b <= 'Z' {
			return b + 'a' - 'A'
		}
		return b
	}
	is := func(word string) bool {
		for i := 0; i < len(word); i++ {
			if lower(s[i]) != word[i] {
				return false
			}
		}
		return true
	}
	switch len(s) {
	case 1:
		switch lower(s[0]) {
		case 'c', 'u', 'r':
			return Upsert, true
		case 'd':
			return Delete, true
		}
	case 6:
		switch {
		case is("insert"), is("update"):
			return Upsert, true
		case is("delete"):
			return Delete, true
		}
	}
	return 0, false
}

// stringValues is a string array of any layout.
type stringValues interface {
	arrow.Array
	Value(i int) string
}

// ParseOps reads the op column name: strings of any layout, or dictionary-encoded strings. Its errors are
// *conform.ColumnError naming the column, wrapping ErrUnknownOperation or conform.ErrTypeMismatch.
func ParseOps(col arrow.Array, name string) ([]Kind, error) {
	bad := func(row int, v string, null bool) error {
		if null {
			return conform.ColumnErr(name, ErrUnknownOperation, "row %d: null (%s)", row, opsAccepted)
		}
		return conform.ColumnErr(name, ErrUnknownOperation, "row %d: %q (%s)", row, v, opsAccepted)
	}
	out := make([]Kind, col.Len())
	switch c := col.(type) {
	case *array.String:
		// The values' bytes in place: reading each through Value costs an interface call and a string header
		// per row.
		// ValueBytes starts at the first value of a sliced array, ValueOffsets do not: base rebases them.
		offs, data := c.ValueOffsets(), c.ValueBytes()
		base := offs[0]
		nulls := c.NullN() > 0
		for i := range out {
			if nulls && c.IsNull(i) {
				return nil, bad(i, "", true)
			}
			k, ok := ParseOp(data[offs[i]-base : offs[i+1]-base])
			if !ok {
				return nil, bad(i, c.Value(i), false)
			}
			out[i] = k
		}
		return out, nil
	case stringValues:
		for i := range out {
			if c.IsNull(i) {
				return nil, bad(i, "", true)
			}
			k, ok := ParseOp(c.Value(i))
			if !ok {
				return nil, bad(i, c.Value(i), false)
			}
			out[i] = k
		}
		return out, nil
	case *array.Dictionary:
		dict, ok := c.Dictionary().(stringValues)
		if !ok {
			break
		}
		kinds := make([]Kind, dict.Len())
		valid := make([]bool, dict.Len())
		for j := range kinds {
			if !dict.IsNull(j) {
				kinds[j], valid[j] = ParseOp(dict.Value(j))
			}
		}
		for i := range out {
			if c.IsNull(i) {
				return nil, bad(i, "", true)
			}
			j := c.GetValueIndex(i)
			if !valid[j] {
				return nil, bad(i, dict.Value(j), dict.IsNull(j))
			}
			out[i] = kinds[j]
		}
		return out, nil
	}
	return nil, conform.ColumnErr(name, conform.ErrTypeMismatch, "the op column must hold strings, got %s", col.DataType())
}
