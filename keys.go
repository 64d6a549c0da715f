package iceberg

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/zeebo/xxh3"
)

// keySpec is the writer's key: the columns Upsert and Delete match rows by.
type keySpec struct {
	names    []string
	fieldIDs []int
	schema   *arrow.Schema // the key columns, as the table types them (Delete's input is projected onto it)
	idx      []int         // positions of the key columns in the table's Arrow schema
}

// keyEncoder turns the key columns of a row into bytes that are equal exactly when the keys are equal.
type keyEncoder struct {
	cols []func(buf []byte, row int) []byte
}

func newKeyEncoder(cols []arrow.Array) (*keyEncoder, error) {
	e := &keyEncoder{}
	for _, c := range cols {
		f, err := keyColumnEncoder(c)
		if err != nil {
			return nil, err
		}
		e.cols = append(e.cols, f)
	}
	return e, nil
}

// appendKey appends the row's key to buf.
func (e *keyEncoder) appendKey(buf []byte, row int) []byte {
	for _, f := range e.cols {
		buf = f(buf, row)
	}
	return buf
}

func keyHash(key []byte) uint64 { return xxh3.Hash(key) }

func keyColumnEncoder(c arrow.Array) (func([]byte, int) []byte, error) {
	u64 := func(buf []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(buf, v) }
	withLen := func(buf []byte, b []byte) []byte {
		buf = binary.LittleEndian.AppendUint32(buf, uint32(len(b)))
		return append(buf, b...)
	}
	nullable := func(f func([]byte, int) []byte) func([]byte, int) []byte {
		return func(buf []byte, row int) []byte {
			if c.IsNull(row) {
				return append(buf, 0)
			}
			return f(append(buf, 1), row)
		}
	}
	switch a := c.(type) {
	case *array.Int64:
		return nullable(func(b []byte, r int) []byte { return u64(b, uint64(a.Value(r))) }), nil
	case *array.Int32:
		return nullable(func(b []byte, r int) []byte { return u64(b, uint64(a.Value(r))) }), nil
	case *array.Date32:
		return nullable(func(b []byte, r int) []byte { return u64(b, uint64(a.Value(r))) }), nil
	case *array.Timestamp:
		return nullable(func(b []byte, r int) []byte { return u64(b, uint64(a.Value(r))) }), nil
	case *array.Time64:
		return nullable(func(b []byte, r int) []byte { return u64(b, uint64(a.Value(r))) }), nil
	case *array.Float64:
		return nullable(func(b []byte, r int) []byte { return u64(b, math.Float64bits(a.Value(r))) }), nil
	case *array.Float32:
		return nullable(func(b []byte, r int) []byte { return u64(b, uint64(math.Float32bits(a.Value(r)))) }), nil
	case *array.Boolean:
		return nullable(func(b []byte, r int) []byte {
			if a.Value(r) {
				return append(b, 1)
			}
			return append(b, 0)
		}), nil
	case *array.String:
		return nullable(func(b []byte, r int) []byte { return withLen(b, []byte(a.Value(r))) }), nil
	case *array.LargeString:
		return nullable(func(b []byte, r int) []byte { return withLen(b, []byte(a.Value(r))) }), nil
	case *array.Binary:
		return nullable(func(b []byte, r int) []byte { return withLen(b, a.Value(r)) }), nil
	case *array.LargeBinary:
		return nullable(func(b []byte, r int) []byte { return withLen(b, a.Value(r)) }), nil
	case *array.FixedSizeBinary:
		return nullable(func(b []byte, r int) []byte { return append(b, a.Value(r)...) }), nil
	case *array.Decimal128:
		return nullable(func(b []byte, r int) []byte {
			v := a.Value(r)
			return u64(u64(b, v.LowBits()), uint64(v.HighBits()))
		}), nil
	}
	if ext, ok := c.(array.ExtensionArray); ok {
		return keyColumnEncoder(ext.Storage())
	}
	return nil, fmt.Errorf("%w: %s cannot be a key column", ErrTypeMismatch, c.DataType())
}

// keyColumns returns the key columns of a record in the table's schema (or of a key-only record).
func keyColumns(rec arrow.RecordBatch, ks *keySpec, keyOnly bool) []arrow.Array {
	cols := make([]arrow.Array, len(ks.idx))
	for i, idx := range ks.idx {
		if keyOnly {
			cols[i] = rec.Column(i)
		} else {
			cols[i] = rec.Column(idx)
		}
	}
	return cols
}
