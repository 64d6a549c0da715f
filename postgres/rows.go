package postgres

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// rowBuilder builds Arrow records of one table's columns from binary values.
type rowBuilder struct {
	table  string
	cols   []column
	rb     *array.RecordBuilder
	fields []array.Builder // the record builder's, in column order
	rows   int
	bytes  int64 // wire bytes appended since the last record: a proxy of the record's size
}

// newRowBuilder builds records of schema, whose first len(cols) fields are cols (more fields may follow, which
// the caller fills).
func newRowBuilder(tableName string, cols []column, schema *arrow.Schema) *rowBuilder {
	rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	return &rowBuilder{table: tableName, cols: cols, rb: rb, fields: rb.Fields()}
}

// appendValue decodes column i's binary value (nil: null) into the record. The error names the table and
// column.
func (b *rowBuilder) appendValue(i int, v []byte) error {
	if v == nil {
		b.fields[i].AppendNull()
		return nil
	}
	b.bytes += int64(len(v))
	if err := b.cols[i].typ.append(b.fields[i], v); err != nil {
		return fmt.Errorf("postgres: table %s column %q: %w", b.table, b.cols[i].name, err)
	}
	return nil
}

// record returns the rows appended so far as a record (the caller releases it) and resets the builder.
func (b *rowBuilder) record() arrow.RecordBatch {
	b.rows, b.bytes = 0, 0
	return b.rb.NewRecordBatch()
}

func (b *rowBuilder) release() { b.rb.Release() }
