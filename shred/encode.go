package shred

import (
	"errors"
	"reflect"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
)

// newEncoder builds the encoder writing Go type t into builder b, whose
// field is f. col is the column path used in errors.
func newEncoder(t reflect.Type, gf goField, col string, f arrow.Field, b array.Builder) (encoder, error) {
	ws, bt := unwrap(t)
	if vb, ok := b.(*extensions.VariantBuilder); ok {
		return newVariantEnc(bt, ws, col, f.Nullable, vb), nil
	}
	var inner encoder
	var err error
	switch {
	case bt.Kind() == reflect.Struct && !isLeafStruct(bt):
		sb, ok := b.(*array.StructBuilder)
		if !ok {
			return nil, planErr(col, "Go field %s of type %v cannot be written to a column of type %v: %w", gf.goName, bt, f.Type, ErrTypeMismatch)
		}
		inner, err = newStructEnc(bt, col, sb)
	case bt.Kind() == reflect.Slice && bt.Elem().Kind() != reflect.Uint8:
		inner, err = newListEnc(bt, gf, col, f, b)
	case bt.Kind() == reflect.Map:
		inner, err = newMapEnc(bt, gf, col, f, b)
	default:
		return leafEncoder(bt, ws, gf, col, f.Nullable, b)
	}
	if err != nil {
		return nil, err
	}
	if len(ws) == 0 {
		return inner, nil
	}
	return &nullWrapEnc{ws: ws, inner: inner, b: b, nullable: f.Nullable, col: col}, nil
}

// nullWrapEnc handles pointers and sql.Null around a struct, list or map value.
type nullWrapEnc struct {
	ws       []wrapper
	inner    encoder
	b        array.Builder
	nullable bool
	col      string
}

func (e *nullWrapEnc) encode(base unsafe.Pointer, stride uintptr, n int) error {
	for i := 0; i < n; i++ {
		p := resolve(e.ws, unsafe.Add(base, uintptr(i)*stride))
		if p == nil {
			if !e.nullable {
				return rowErr(e.col, i, ErrNull)
			}
			e.b.AppendNull()
			continue
		}
		if err := e.inner.encode(p, 0, 1); err != nil {
			return atRow(err, i)
		}
	}
	return nil
}

// atRow re-bases a nested error on the caller's row i.
func atRow(err error, i int) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		fe.Row = i
		return fe
	}
	return err
}

// fieldEnc locates a field inside its struct and hands it to the value encoder.
type fieldEnc struct {
	offs     []uintptr
	enc      encoder
	b        array.Builder
	nullable bool
	col      string
}

func (e *fieldEnc) encode(base unsafe.Pointer, stride uintptr, n int) error {
	if len(e.offs) == 1 {
		return e.enc.encode(unsafe.Add(base, e.offs[0]), stride, n)
	}
	for i := 0; i < n; i++ {
		p := fieldPtr(unsafe.Add(base, uintptr(i)*stride), e.offs)
		if p == nil {
			if !e.nullable {
				return rowErr(e.col, i, ErrNull)
			}
			e.b.AppendNull()
			continue
		}
		if err := e.enc.encode(p, 0, 1); err != nil {
			return atRow(err, i)
		}
	}
	return nil
}

// nullsEnc fills a column that no Go field provides.
type nullsEnc struct{ b array.Builder }

func (e nullsEnc) encode(_ unsafe.Pointer, _ uintptr, n int) error {
	e.b.AppendNulls(n)
	return nil
}

// bindFields matches the struct's fields to the children of a struct type
// (or the columns of a schema) by name and builds their encoders.
func bindFields(gfs []goField, prefix string, fields []arrow.Field, builder func(i int) array.Builder) ([]encoder, error) {
	byName := make(map[string]int, len(fields))
	for i, f := range fields {
		byName[f.Name] = i
	}
	encs := make([]encoder, len(fields))
	for _, gf := range gfs {
		col := prefix + gf.name
		i, ok := byName[gf.name]
		if !ok {
			return nil, planErr(col, "Go field %s: %w", gf.goName, ErrUnknownColumn)
		}
		if encs[i] != nil {
			return nil, planErr(col, "Go field %s: two fields map to this column", gf.goName)
		}
		b := builder(i)
		enc, err := newEncoder(gf.typ, gf, col, fields[i], b)
		if err != nil {
			return nil, err
		}
		encs[i] = &fieldEnc{offs: gf.offs, enc: enc, b: b, nullable: fields[i].Nullable, col: col}
	}
	for i, f := range fields {
		if encs[i] == nil {
			if !f.Nullable {
				return nil, planErr(prefix+f.Name, "required column has no Go field: %w", ErrNull)
			}
			encs[i] = nullsEnc{b: builder(i)}
		}
	}
	return encs, nil
}

// structEnc writes a Go struct into a struct column.
type structEnc struct {
	b        *array.StructBuilder
	children []encoder
	trues    []bool
}

func newStructEnc(t reflect.Type, col string, sb *array.StructBuilder) (encoder, error) {
	sp, err := planFor(t)
	if err != nil {
		return nil, err
	}
	st := sb.Type().(*arrow.StructType)
	children, err := bindFields(sp.fields, col+".", st.Fields(), sb.FieldBuilder)
	if err != nil {
		return nil, err
	}
	return &structEnc{b: sb, children: children}, nil
}

func (e *structEnc) encode(base unsafe.Pointer, stride uintptr, n int) error {
	if len(e.trues) < n {
		e.trues = make([]bool, n)
		for i := range e.trues {
			e.trues[i] = true
		}
	}
	e.b.AppendValues(e.trues[:n])
	for _, c := range e.children {
		if err := c.encode(base, stride, n); err != nil {
			return err
		}
	}
	return nil
}

type listBuilder interface {
	array.Builder
	Append(bool)
	ValueBuilder() array.Builder
}

// listEnc writes a Go slice into a list column. A nil slice is null when the
// column is nullable, else an empty list.
type listEnc struct {
	b        listBuilder
	elem     encoder
	esize    uintptr
	nullable bool
}

type sliceHeader struct {
	data unsafe.Pointer
	len  int
	cap  int
}

func newListEnc(t reflect.Type, gf goField, col string, f arrow.Field, b array.Builder) (encoder, error) {
	var ef arrow.Field
	var lb listBuilder
	switch bb := b.(type) {
	case *array.ListBuilder:
		ef, lb = f.Type.(*arrow.ListType).ElemField(), bb
	case *array.LargeListBuilder:
		ef, lb = f.Type.(*arrow.LargeListType).ElemField(), bb
	default:
		return nil, planErr(col, "Go field %s of type %v cannot be written to a column of type %v: %w", gf.goName, t, f.Type, ErrTypeMismatch)
	}
	elem, err := newEncoder(t.Elem(), goField{goName: gf.goName}, col, ef, lb.ValueBuilder())
	if err != nil {
		return nil, err
	}
	return &listEnc{b: lb, elem: elem, esize: t.Elem().Size(), nullable: f.Nullable}, nil
}

func (e *listEnc) encode(base unsafe.Pointer, stride uintptr, n int) error {
	for i := 0; i < n; i++ {
		sh := (*sliceHeader)(unsafe.Add(base, uintptr(i)*stride))
		if sh.data == nil && e.nullable {
			e.b.AppendNull()
			continue
		}
		e.b.Append(true)
		if sh.len > 0 {
			if err := e.elem.encode(sh.data, e.esize, sh.len); err != nil {
				return atRow(err, i)
			}
		}
	}
	return nil
}

// mapEnc writes a Go map into a map column (reflection per entry; map
// iteration order is Go's).
type mapEnc struct {
	b        *array.MapBuilder
	t        reflect.Type
	kenc     encoder
	venc     encoder
	kv, vv   reflect.Value
	iter     *reflect.MapIter
	nullable bool
}

func newMapEnc(t reflect.Type, gf goField, col string, f arrow.Field, b array.Builder) (encoder, error) {
	mb, ok := b.(*array.MapBuilder)
	if !ok {
		return nil, planErr(col, "Go field %s of type %v cannot be written to a column of type %v: %w", gf.goName, t, f.Type, ErrTypeMismatch)
	}
	if _, err := mapKeyType(t.Key()); err != nil {
		return nil, planErr(col, "Go field %s: %w", gf.goName, err)
	}
	mt := f.Type.(*arrow.MapType)
	kenc, err := newEncoder(t.Key(), goField{goName: gf.goName}, col, mt.KeyField(), mb.KeyBuilder())
	if err != nil {
		return nil, err
	}
	venc, err := newEncoder(t.Elem(), goField{goName: gf.goName}, col, mt.ItemField(), mb.ItemBuilder())
	if err != nil {
		return nil, err
	}
	return &mapEnc{
		b: mb, t: t, kenc: kenc, venc: venc, nullable: f.Nullable,
		kv: reflect.New(t.Key()).Elem(), vv: reflect.New(t.Elem()).Elem(), iter: new(reflect.MapIter),
	}, nil
}

func (e *mapEnc) encode(base unsafe.Pointer, stride uintptr, n int) error {
	defer e.iter.Reset(reflect.Value{})
	kp, vp := e.kv.Addr().UnsafePointer(), e.vv.Addr().UnsafePointer()
	for i := 0; i < n; i++ {
		m := reflect.NewAt(e.t, unsafe.Add(base, uintptr(i)*stride)).Elem()
		if m.IsNil() && e.nullable {
			e.b.AppendNull()
			continue
		}
		e.b.Append(true)
		e.iter.Reset(m)
		for e.iter.Next() {
			e.kv.SetIterKey(e.iter)
			e.vv.SetIterValue(e.iter)
			if err := e.kenc.encode(kp, 0, 1); err != nil {
				return atRow(err, i)
			}
			if err := e.venc.encode(vp, 0, 1); err != nil {
				return atRow(err, i)
			}
		}
	}
	e.kv.SetZero()
	e.vv.SetZero()
	return nil
}
