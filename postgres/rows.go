package postgres

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// rowBuilder builds Arrow records of one table's columns from binary values.
type rowBuilder struct {
	table  string
	cols   []column
	key    []int // the primary key's columns, as indexes in cols (for errors)
	rb     *array.RecordBuilder
	fields []array.Builder // the record builder's, in column order
	rows   int
	bytes  int64 // wire bytes appended since the last record: a proxy of the record's size
	// sizes, when set, is the size of the largest record of the table so far, which presize reserves.
	sizes *rowSizes
}

// rowSizes is the size of a table's records: rows and, per column of variable-length values (binary, string),
// the bytes of its values.
type rowSizes struct {
	rows int
	data []int
}

// newRowBuilder builds records of schema, whose first len(cols) fields are cols (more fields may follow, which
// the caller fills); key names the primary key's columns.
func newRowBuilder(tableName string, cols []column, key []string, schema *arrow.Schema) *rowBuilder {
	rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	b := &rowBuilder{table: tableName, cols: cols, rb: rb, fields: rb.Fields()}
	for _, k := range key {
		if j := indexOf(cols, k); j >= 0 {
			b.key = append(b.key, j)
		}
	}
	return b
}

// valueError is a value that cannot be decoded into its column: it names the table, the column and, once the
// caller adds it (rowBuilder.withKey), the row's key.
type valueError struct {
	table, column, key string
	err                error
}

func (e *valueError) Error() string {
	s := fmt.Sprintf("postgres: table %s column %q", e.table, e.column)
	if e.key != "" {
		s += " (row " + e.key + ")"
	}
	return s + ": " + e.err.Error()
}

func (e *valueError) Unwrap() error { return e.err }

// appendValue decodes column i's binary value (nil: null) into the record. The error is a *valueError naming
// the table and column; withKey adds the row's key.
func (b *rowBuilder) appendValue(i int, v []byte) error {
	if v == nil {
		b.fields[i].AppendNull()
		return nil
	}
	b.bytes += int64(len(v))
	if err := b.cols[i].typ.append(b.fields[i], v); err != nil {
		return &valueError{table: b.table, column: b.cols[i].name, err: err}
	}
	return nil
}

// withKey adds the row's key (value(i) is column i's binary value, nil for null) to a *valueError of
// appendValue, and returns err.
func (b *rowBuilder) withKey(err error, value func(i int) []byte) error {
	var ve *valueError
	if len(b.key) == 0 || !errors.As(err, &ve) || ve.key != "" {
		return err
	}
	parts := make([]string, len(b.key))
	for n, j := range b.key {
		parts[n] = b.cols[j].name + "=" + valueText(b.cols[j].typ, value(j))
	}
	ve.key = strings.Join(parts, ", ")
	return err
}

// valueText is a binary value as text, for errors: decoded by its column's type, else in hex.
func valueText(typ colType, v []byte) string {
	if v == nil {
		return "NULL"
	}
	ab := array.NewBuilder(memory.DefaultAllocator, typ.arrow)
	defer ab.Release()
	if typ.append(ab, v) != nil {
		return "0x" + hex.EncodeToString(v)
	}
	a := ab.NewArray()
	defer a.Release()
	return a.ValueStr(0)
}

// record returns the rows appended so far as a record (the caller releases it) and resets the builder.
func (b *rowBuilder) record() arrow.RecordBatch {
	if s := b.sizes; s != nil && b.rows >= s.rows {
		s.rows = b.rows
		s.data = s.data[:0]
		for _, f := range b.fields {
			n := 0
			if db, ok := f.(dataBuilder); ok {
				n = db.DataLen()
			}
			s.data = append(s.data, n)
		}
	}
	b.rows, b.bytes = 0, 0
	return b.rb.NewRecordBatch()
}

// dataBuilder is a builder of variable-length values (binary, string).
type dataBuilder interface {
	DataLen() int
	ReserveData(n int)
}

// presize reserves the room of the table's largest record so far (b.sizes; none: nothing) in the empty
// builder, so that its columns' buffers take one allocation each instead of doubling from empty, a copy at
// each step. The value bytes get 1/16 more: a record a little larger than the last one would double them.
func (b *rowBuilder) presize() {
	s := b.sizes
	if s == nil || s.rows == 0 || b.rows != 0 {
		return
	}
	b.rb.Reserve(s.rows)
	for i, f := range b.fields {
		if n := s.data[i]; n > 0 {
			f.(dataBuilder).ReserveData(n + n/16)
		}
	}
}

func (b *rowBuilder) release() { b.rb.Release() }
