package shred

import (
	"reflect"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Converter turns slices of T (a struct type) into record batches of one
// schema. Build it once with NewConverter and call Convert repeatedly: the
// plan is computed once and the builders and scratch buffers are reused, so
// the steady state allocates nothing per row. A Converter is not safe for
// concurrent use.
type Converter[T any] struct {
	plan     *structPlan
	schema   *arrow.Schema
	mem      memory.Allocator
	builders []array.Builder
	encs     []encoder
}

// NewConverter plans the conversion of T into target (the table's Arrow
// schema), or into SchemaOf[T]() when target is nil. Columns are matched by
// name; a struct field with no target column, a required target column with
// no struct field, and a Go type that cannot be written to its column's type
// are errors (*FieldError naming the column).
func NewConverter[T any](target *arrow.Schema) (*Converter[T], error) {
	t := reflect.TypeFor[T]()
	sp, err := planFor(t)
	if err != nil {
		return nil, err
	}
	if target == nil {
		if target, err = schemaOfType(t); err != nil {
			return nil, err
		}
	}
	c := &Converter[T]{plan: sp, schema: target}
	if err := c.bind(memory.DefaultAllocator); err != nil {
		return nil, err
	}
	return c, nil
}

// Schema returns the schema of the batches Convert returns.
func (c *Converter[T]) Schema() *arrow.Schema { return c.schema }

func (c *Converter[T]) bind(mem memory.Allocator) error {
	c.releaseBuilders()
	fields := c.schema.Fields()
	builders := make([]array.Builder, len(fields))
	for i, f := range fields {
		builders[i] = array.NewBuilder(mem, f.Type)
	}
	encs, err := bindFields(c.plan.fields, "", fields, func(i int) array.Builder { return builders[i] })
	if err != nil {
		for _, b := range builders {
			b.Release()
		}
		return err
	}
	c.mem, c.builders, c.encs = mem, builders, encs
	return nil
}

func (c *Converter[T]) releaseBuilders() {
	for _, b := range c.builders {
		b.Release()
	}
	c.builders, c.encs, c.mem = nil, nil, nil
}

// Release frees the converter's builders. The converter stays usable: the
// next Convert makes new ones.
func (c *Converter[T]) Release() { c.releaseBuilders() }

func sameAllocator(a, b memory.Allocator) bool {
	if a == nil || b == nil {
		return false
	}
	if !reflect.TypeOf(a).Comparable() || !reflect.TypeOf(b).Comparable() {
		return false
	}
	return a == b
}

// Convert appends rows to the converter's builders and returns them as one
// record batch (the caller releases it). mem nil means
// memory.DefaultAllocator. On a conversion error (a value out of range, a
// null in a required column) it returns nil and a *FieldError naming the
// column and the row; nothing of the call is kept and the converter stays
// usable.
func (c *Converter[T]) Convert(mem memory.Allocator, rows []T) (arrow.RecordBatch, error) {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	if c.builders == nil || !sameAllocator(mem, c.mem) {
		if err := c.bind(mem); err != nil {
			return nil, err
		}
	}
	n := len(rows)
	if n > 0 {
		base := unsafe.Pointer(unsafe.SliceData(rows))
		stride := unsafe.Sizeof(rows[0])
		for _, e := range c.encs {
			if err := e.encode(base, stride, n); err != nil {
				c.releaseBuilders() // partial columns: start over with fresh builders
				return nil, err
			}
		}
	}
	cols := make([]arrow.Array, len(c.builders))
	for i, b := range c.builders {
		cols[i] = b.NewArray()
	}
	rec := array.NewRecordBatch(c.schema, cols, int64(n))
	for _, a := range cols {
		a.Release()
	}
	return rec, nil
}

// Structs converts rows to one record batch. If target is nil the batch has
// SchemaOf[T](); otherwise it is built directly in target's schema (see
// NewConverter for the matching rules). Use a Converter to convert many
// slices of the same type with reused builders.
func Structs[T any](mem memory.Allocator, rows []T, target *arrow.Schema) (arrow.RecordBatch, error) {
	c, err := NewConverter[T](target)
	if err != nil {
		return nil, err
	}
	defer c.Release()
	return c.Convert(mem, rows)
}
