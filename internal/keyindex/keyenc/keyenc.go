// Package keyenc turns the key columns of a row into bytes that are equal exactly when the keys are equal (the
// Encoder), hashes them (Hash) and holds a file's keys in row order (List): the encoding every part of the key
// index agrees on, the key stage's resolution, Apply's version map and copy-on-write's key sets included.
package keyenc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/zeebo/xxh3"
)

// ErrTypeMismatch is the writer's iceberg.ErrTypeMismatch (aliased there): a column whose type does not match
// the table, here a column whose type cannot be a key.
var ErrTypeMismatch = errors.New("type does not match the table")

// Encoder turns the key columns of a row into bytes that are equal exactly when the keys are equal.
type Encoder struct {
	cols []func(buf []byte, row int) []byte
}

// NewEncoder returns the encoder of the key columns cols; an error wrapping ErrTypeMismatch names a column
// whose type cannot be a key.
func NewEncoder(cols []arrow.Array) (*Encoder, error) {
	e := &Encoder{}
	for _, c := range cols {
		f, err := columnEncoder(c)
		if err != nil {
			return nil, err
		}
		e.cols = append(e.cols, f)
	}
	return e, nil
}

// AppendKey appends the row's key to buf.
func (e *Encoder) AppendKey(buf []byte, row int) []byte {
	for _, f := range e.cols {
		buf = f(buf, row)
	}
	return buf
}

// Hash is the hash of an encoded key the key index and the key stage use.
func Hash(key []byte) uint64 { return xxh3.Hash(key) }

// CheckType returns an error wrapping ErrTypeMismatch when a column of type t cannot be a key.
func CheckType(t arrow.DataType) error {
	_, err := columnEncoder(array.MakeArrayOfNull(memory.DefaultAllocator, t, 0))
	return err
}

func columnEncoder(c arrow.Array) (func([]byte, int) []byte, error) {
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
	case *array.Float32: // as the float64 it promotes to, exactly: a key promoted to double keeps its encoding
		return nullable(func(b []byte, r int) []byte { return u64(b, math.Float64bits(float64(a.Value(r)))) }), nil
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
		return columnEncoder(ext.Storage())
	}
	return nil, fmt.Errorf("%w: %s cannot be a key column", ErrTypeMismatch, c.DataType())
}

// IntValues returns the values of an integer column of 64 bits or fewer (timestamps and dates included) without
// nulls as int64 (for an int64 column, its own values); ok false for any other column. Their Encoder encoding
// is AppendInt's.
func IntValues(col arrow.Array) (vs []int64, ok bool) {
	if col.NullN() > 0 {
		return nil, false
	}
	return IntValuesOf(col)
}

// IntValuesOf is IntValues for a column whose rows read are known not to be null: a null row's value is
// whatever its slot holds.
func IntValuesOf(col arrow.Array) (vs []int64, ok bool) {
	widen := func(n int, v func(int) int64) []int64 {
		out := make([]int64, n)
		for i := range out {
			out[i] = v(i)
		}
		return out
	}
	switch c := col.(type) {
	case *array.Int64:
		return c.Int64Values(), true
	case *array.Timestamp:
		return widen(c.Len(), func(i int) int64 { return int64(c.Value(i)) }), true
	case *array.Int32:
		return widen(c.Len(), func(i int) int64 { return int64(c.Value(i)) }), true
	case *array.Date32:
		return widen(c.Len(), func(i int) int64 { return int64(c.Value(i)) }), true
	}
	return nil, false
}

// AppendInt appends the Encoder encoding of a one-column integer key (IntValues): not null, then the value as 8
// bytes.
func AppendInt(buf []byte, v int64) []byte {
	return binary.LittleEndian.AppendUint64(append(buf, 1), uint64(v))
}
