package iceberg_test

import (
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Batches the tests write: the keyed kv schema, keys for Delete, records of any shape, and a caller's allocator
// that poisons what it frees.

// kvSchema is the keyed tables' schema: a key, a value, and a string derived from both (readKV checks it).
var kvSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// kvBatch makes kvSchema rows (ids[i], vs[i]).
func kvBatch(ids, vs []int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.NewGoAllocator(), kvSchema)
	defer b.Release()
	for i := range ids {
		b.Field(0).(*array.Int64Builder).Append(ids[i])
		b.Field(1).(*array.Int64Builder).Append(vs[i])
		b.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("row-%d-%d", ids[i], vs[i]))
	}
	return b.NewRecordBatch()
}

// keyBatch makes a batch of keys only, for Delete.
func keyBatch(ids []int64) arrow.RecordBatch {
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewRecordBuilder(memory.NewGoAllocator(), sc)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues(ids, nil)
	return b.NewRecordBatch()
}

// buildRecord makes a record of the fields given, filled by fill.
func buildRecord(t *testing.T, fields []arrow.Field, fill func(b *array.RecordBuilder)) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(memory.NewGoAllocator(), arrow.NewSchema(fields, nil))
	defer b.Release()
	fill(b)
	return b.NewRecordBatch()
}

// poisonAllocator is a caller's allocator that overwrites memory as it is freed: a writer that read a buffer its
// caller released without holding a reference of its own (Retain) would read the poison. The checked allocator
// under it tells whether every reference was released in the end.
type poisonAllocator struct{ *memory.CheckedAllocator }

func newPoisonAllocator() *poisonAllocator {
	return &poisonAllocator{memory.NewCheckedAllocator(memory.NewGoAllocator())}
}

func (a *poisonAllocator) Free(b []byte) {
	for i := range b {
		b[i] = 0xA5
	}
	a.CheckedAllocator.Free(b)
}

func (a *poisonAllocator) Reallocate(size int, b []byte) []byte {
	out := a.Allocate(size)
	copy(out, b)
	a.Free(b)
	return out
}
