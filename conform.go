package iceberg

import (
	"context"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// conformer projects caller batches onto the table's Arrow schema: columns matched by name and reordered,
// missing optional columns filled with nulls, lossless casts applied, nullability checked, and the result copied
// into memory the writer owns. Every check happens before anything is kept, so an error accepts nothing.
type conformer struct {
	target *arrow.Schema // the table's schema as Arrow, with field-id metadata
	mem    memory.Allocator
}

// conform returns a record in the target schema that owns its memory, and its size in bytes.
func (c *conformer) conform(ctx context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, int64, error) {
	if rec == nil {
		return nil, 0, fmt.Errorf("iceberg: nil record batch")
	}
	in := rec.Schema()
	byName := make(map[string]int, in.NumFields())
	for i, f := range in.Fields() {
		if _, dup := byName[f.Name]; dup {
			return nil, 0, columnErr(f.Name, ErrTypeMismatch, "the batch has this column twice")
		}
		byName[f.Name] = i
	}
	for _, f := range in.Fields() {
		if len(c.target.FieldIndices(f.Name)) == 0 {
			return nil, 0, columnErr(f.Name, ErrUnknownColumn, "table columns are %s", fieldNames(c.target))
		}
	}
	n := rec.NumRows()
	cols := make([]arrow.Array, c.target.NumFields())
	release := func() {
		for _, a := range cols {
			if a != nil {
				a.Release()
			}
		}
	}
	var size int64
	for i, tf := range c.target.Fields() {
		idx, ok := byName[tf.Name]
		if !ok {
			if !tf.Nullable {
				release()
				return nil, 0, columnErr(tf.Name, ErrMissingColumn, "the batch has no such column")
			}
			cols[i] = array.MakeArrayOfNull(c.mem, tf.Type, int(n))
			size += arraySize(cols[i].Data())
			continue
		}
		col, err := c.column(ctx, tf, in.Field(idx), rec.Column(idx))
		if err != nil {
			release()
			return nil, 0, err
		}
		cols[i] = col
		size += arraySize(col.Data())
	}
	out := array.NewRecordBatch(c.target, cols, n)
	release()
	return out, size, nil
}

// column converts one caller column to the table field, returning an array the writer owns.
func (c *conformer) column(ctx context.Context, tf, inf arrow.Field, col arrow.Array) (arrow.Array, error) {
	if err := checkNulls(tf.Name, tf, col); err != nil {
		return nil, err
	}
	src := col
	if !sameShape(inf.Type, tf.Type) {
		if !castable(inf.Type, tf.Type) {
			return nil, columnErr(tf.Name, ErrTypeMismatch, "got %s, the table has %s", inf.Type, tf.Type)
		}
		casted, err := compute.CastArray(compute.WithAllocator(ctx, c.mem), col, compute.SafeCastOptions(tf.Type))
		if err != nil {
			return nil, columnErr(tf.Name, ErrTypeMismatch, "cannot convert %s to %s: %v", inf.Type, tf.Type, err)
		}
		defer casted.Release()
		src = casted
	}
	// Copy into the writer's memory (a retained slice would pin the caller's buffers and make the memory limit
	// lie), then give the data the table's exact type: field ids and nullability of nested fields.
	copied, err := array.Concatenate([]arrow.Array{src}, c.mem)
	if err != nil {
		return nil, columnErr(tf.Name, err, "")
	}
	defer copied.Release()
	data := retype(copied.Data(), tf.Type)
	defer data.Release()
	return array.MakeFromData(data), nil
}

// checkNulls rejects nulls in required fields, nested ones included.
func checkNulls(path string, tf arrow.Field, col arrow.Array) error {
	if !tf.Nullable && col.NullN() > 0 {
		return columnErr(path, ErrNullInRequired, "%d null value(s)", col.NullN())
	}
	switch st := tf.Type.(type) {
	case *arrow.StructType:
		sa, ok := col.(*array.Struct)
		if !ok {
			return nil
		}
		for i, f := range st.Fields() {
			if f.Nullable || i >= sa.NumField() {
				continue
			}
			child := sa.Field(i)
			for r := 0; r < sa.Len(); r++ {
				if sa.IsValid(r) && child.IsNull(r) {
					return columnErr(path+"."+f.Name, ErrNullInRequired, "null at row %d", r)
				}
			}
		}
	case *arrow.ListType:
		if la, ok := col.(*array.List); ok && !st.ElemField().Nullable && la.ListValues().NullN() > 0 {
			return columnErr(path+".element", ErrNullInRequired, "%d null element(s)", la.ListValues().NullN())
		}
	}
	return nil
}

// sameShape reports whether two types have the same physical layout, ignoring field names' metadata and
// nullability (which retype fixes).
func sameShape(a, b arrow.DataType) bool {
	if a.ID() != b.ID() {
		return false
	}
	switch at := a.(type) {
	case *arrow.StructType:
		bt := b.(*arrow.StructType)
		if at.NumFields() != bt.NumFields() {
			return false
		}
		for i := range at.Fields() {
			if at.Field(i).Name != bt.Field(i).Name || !sameShape(at.Field(i).Type, bt.Field(i).Type) {
				return false
			}
		}
		return true
	case *arrow.ListType:
		return sameShape(at.Elem(), b.(*arrow.ListType).Elem())
	case *arrow.LargeListType:
		return sameShape(at.Elem(), b.(*arrow.LargeListType).Elem())
	case *arrow.MapType:
		bt := b.(*arrow.MapType)
		return sameShape(at.KeyType(), bt.KeyType()) && sameShape(at.ItemType(), bt.ItemType())
	case *arrow.FixedSizeListType:
		bt := b.(*arrow.FixedSizeListType)
		return at.Len() == bt.Len() && sameShape(at.Elem(), bt.Elem())
	}
	return arrow.TypeEqual(a, b)
}

// castable lists the lossless conversions Write applies on its own; SafeCastOptions still rejects a value that
// does not fit (an int64 over the int32 range, a timestamp with sub-microsecond digits).
func castable(from, to arrow.DataType) bool {
	isInt := func(t arrow.DataType) bool {
		switch t.ID() {
		case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
			return true
		}
		return false
	}
	isString := func(t arrow.DataType) bool {
		return t.ID() == arrow.STRING || t.ID() == arrow.LARGE_STRING || t.ID() == arrow.STRING_VIEW
	}
	isBinary := func(t arrow.DataType) bool {
		return t.ID() == arrow.BINARY || t.ID() == arrow.LARGE_BINARY || t.ID() == arrow.BINARY_VIEW
	}
	switch {
	case isInt(from) && (to.ID() == arrow.INT32 || to.ID() == arrow.INT64):
		return true
	case (from.ID() == arrow.FLOAT16 || from.ID() == arrow.FLOAT32) && to.ID() == arrow.FLOAT64:
		return true
	case isString(from) && isString(to), isBinary(from) && isBinary(to):
		return true
	case from.ID() == arrow.TIMESTAMP && to.ID() == arrow.TIMESTAMP:
		ft, tt := from.(*arrow.TimestampType), to.(*arrow.TimestampType)
		return (ft.TimeZone == "") == (tt.TimeZone == "")
	case from.ID() == arrow.DATE64 && to.ID() == arrow.DATE32:
		return true
	}
	return false
}

// retype rebuilds array data with the given type (same layout), recursively, so that nested fields carry the
// table's names, nullability and field-id metadata.
func retype(d arrow.ArrayData, t arrow.DataType) arrow.ArrayData {
	children := d.Children()
	var newChildren []arrow.ArrayData
	switch tt := t.(type) {
	case *arrow.StructType:
		for i, ch := range children {
			newChildren = append(newChildren, retype(ch, tt.Field(i).Type))
		}
	case *arrow.ListType:
		newChildren = []arrow.ArrayData{retype(children[0], tt.Elem())}
	case *arrow.LargeListType:
		newChildren = []arrow.ArrayData{retype(children[0], tt.Elem())}
	case *arrow.FixedSizeListType:
		newChildren = []arrow.ArrayData{retype(children[0], tt.Elem())}
	case *arrow.MapType:
		newChildren = []arrow.ArrayData{retype(children[0], tt.Elem())}
	default:
		for _, ch := range children {
			ch.Retain()
			newChildren = append(newChildren, ch)
		}
	}
	out := array.NewData(t, d.Len(), d.Buffers(), newChildren, d.NullN(), d.Offset())
	for _, ch := range newChildren {
		ch.Release()
	}
	return out
}

// arraySize is the bytes an array's buffers hold, children included.
func arraySize(d arrow.ArrayData) int64 {
	var n int64
	for _, b := range d.Buffers() {
		if b != nil {
			n += int64(b.Len())
		}
	}
	for _, ch := range d.Children() {
		n += arraySize(ch)
	}
	return n
}

func fieldNames(s *arrow.Schema) string {
	names := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}
