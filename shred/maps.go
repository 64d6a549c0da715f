package shred

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/google/uuid"
)

// MapOptions tunes Maps and JSONLines.
type MapOptions struct {
	// EpochUnit is the unit of numbers written to timestamp columns. The zero
	// value is arrow.Second (Unix time). Strings in timestamp columns are RFC 3339.
	EpochUnit arrow.TimeUnit
	// OnRowError, when set, is called with the row index and the error
	// (a *FieldError) of each row that cannot be converted; the row is
	// skipped. When nil, a bad row fails the whole call.
	OnRowError func(row int, err error)
}

// mconv converts one Go value into a builder. With dry set it only
// validates; a value that passed a dry run always converts.
type mconv interface {
	conv(v any, dry bool) error
}

// Maps converts rows to one record batch in target's schema, or in
// InferSchema(rows) when target is nil. Keys match columns by name; a key
// with no column is an error (ErrUnknownColumn), a missing key is null.
func Maps(mem memory.Allocator, rows []map[string]any, target *arrow.Schema) (arrow.RecordBatch, error) {
	return MapsWithOptions(mem, rows, target, MapOptions{})
}

// MapsWithOptions is Maps with options (epoch unit, per-row error handling).
func MapsWithOptions(mem memory.Allocator, rows []map[string]any, target *arrow.Schema, opts MapOptions) (arrow.RecordBatch, error) {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	if target == nil {
		var err error
		if target, err = InferSchema(rows); err != nil {
			return nil, err
		}
	}
	rb := array.NewRecordBuilder(mem, target)
	defer rb.Release()
	root, err := newMapRoot(target, rb.Fields(), opts)
	if err != nil {
		return nil, err
	}
	n := 0
	for i, r := range rows {
		if err := root.check(r); err != nil {
			if err = setRow(err, i); opts.OnRowError != nil {
				opts.OnRowError(i, err)
				continue
			}
			return nil, err
		}
		if err := root.put(r); err != nil {
			return nil, setRow(err, i) // unreachable after a successful check
		}
		n++
	}
	return rb.NewRecordBatch(), nil
}

func setRow(err error, row int) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		fe.Row = row
		return fe
	}
	return rowErr("", row, err)
}

// mapStruct converts a map[string]any into struct fields (or a batch's columns).
type mapStruct struct {
	col      string
	names    map[string]int
	fields   []arrow.Field
	children []mconv
	builders []array.Builder
	sb       *array.StructBuilder // nil at the root
}

func newMapRoot(s *arrow.Schema, builders []array.Builder, opts MapOptions) (*mapStruct, error) {
	return newMapStruct("", s.Fields(), builders, nil, opts)
}

func newMapStruct(prefix string, fields []arrow.Field, builders []array.Builder, sb *array.StructBuilder, opts MapOptions) (*mapStruct, error) {
	m := &mapStruct{names: map[string]int{}, fields: fields, builders: builders, sb: sb}
	if len(prefix) > 0 {
		m.col = prefix[:len(prefix)-1]
	}
	for i, f := range fields {
		m.names[f.Name] = i
		c, err := newMConv(prefix+f.Name, f, builders[i], opts)
		if err != nil {
			return nil, err
		}
		m.children = append(m.children, c)
	}
	return m, nil
}

func (m *mapStruct) check(r map[string]any) error {
	for k := range r {
		if _, ok := m.names[k]; !ok {
			col := k
			if m.col != "" {
				col = m.col + "." + k
			}
			return rowErr(col, -1, ErrUnknownColumn)
		}
	}
	for i, c := range m.children {
		if err := c.conv(r[m.fields[i].Name], true); err != nil {
			return err
		}
	}
	return nil
}

func (m *mapStruct) put(r map[string]any) error {
	for i, c := range m.children {
		if err := c.conv(r[m.fields[i].Name], false); err != nil {
			return err
		}
	}
	return nil
}

// conv implements mconv for nested structs.
func (m *mapStruct) conv(v any, dry bool) error {
	r, ok := v.(map[string]any)
	if !ok {
		return rowErr(m.col, -1, fmt.Errorf("%T is not an object: %w", v, ErrTypeMismatch))
	}
	if dry {
		return m.check(r)
	}
	m.sb.Append(true)
	return m.put(r)
}

// nullable handles nil for any converter.
type nullable struct {
	col   string
	ok    bool
	b     array.Builder
	inner mconv
}

func (n *nullable) conv(v any, dry bool) error {
	if v == nil {
		if !n.ok {
			return rowErr(n.col, -1, ErrNull)
		}
		if !dry {
			n.b.AppendNull()
		}
		return nil
	}
	return n.inner.conv(v, dry)
}

// leafConv converts a non-nil scalar.
type leafConv struct {
	col string
	fn  func(v any, dry bool) error
}

func (l leafConv) conv(v any, dry bool) error {
	if err := l.fn(v, dry); err != nil {
		var fe *FieldError
		if errors.As(err, &fe) {
			return err
		}
		return rowErr(l.col, -1, err)
	}
	return nil
}

func intConv[D signed](app func(D), bits int) func(any, bool) error {
	return func(v any, dry bool) error {
		x, err := anyInt(v)
		if err == nil {
			err = checkIntRange(x, bits)
		}
		if err == nil && !dry {
			app(D(x))
		}
		return err
	}
}

func mismatchErr(v any, dt arrow.DataType) error {
	return fmt.Errorf("%T value cannot be written to a %v column: %w", v, dt, ErrTypeMismatch)
}

func newMConv(col string, f arrow.Field, b array.Builder, opts MapOptions) (mconv, error) {
	var fn func(v any, dry bool) error
	dt := f.Type
	switch b := b.(type) {
	case *array.StructBuilder:
		st := dt.(*arrow.StructType)
		bs := make([]array.Builder, st.NumFields())
		for i := range bs {
			bs[i] = b.FieldBuilder(i)
		}
		m, err := newMapStruct(col+".", st.Fields(), bs, b, opts)
		if err != nil {
			return nil, err
		}
		m.col = col
		return &nullable{col: col, ok: f.Nullable, b: b, inner: m}, nil
	case *array.ListBuilder, *array.LargeListBuilder:
		lb := b.(listBuilder)
		var ef arrow.Field
		if lt, ok := dt.(*arrow.ListType); ok {
			ef = lt.ElemField()
		} else {
			ef = dt.(*arrow.LargeListType).ElemField()
		}
		elem, err := newMConv(col, ef, lb.ValueBuilder(), opts)
		if err != nil {
			return nil, err
		}
		fn = func(v any, dry bool) error {
			rv := reflect.ValueOf(v)
			if rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array {
				return mismatchErr(v, dt)
			}
			if !dry {
				lb.Append(true)
			}
			if xs, ok := v.([]any); ok {
				for _, x := range xs {
					if err := elem.conv(x, dry); err != nil {
						return err
					}
				}
				return nil
			}
			for i := 0; i < rv.Len(); i++ {
				if err := elem.conv(rv.Index(i).Interface(), dry); err != nil {
					return err
				}
			}
			return nil
		}
	case *array.MapBuilder:
		mt := dt.(*arrow.MapType)
		kc, err := newMConv(col, mt.KeyField(), b.KeyBuilder(), opts)
		if err != nil {
			return nil, err
		}
		vc, err := newMConv(col, mt.ItemField(), b.ItemBuilder(), opts)
		if err != nil {
			return nil, err
		}
		fn = func(v any, dry bool) error {
			m, ok := v.(map[string]any)
			if !ok {
				return mismatchErr(v, dt)
			}
			if !dry {
				b.Append(true)
			}
			for k, x := range m {
				if err := kc.conv(k, dry); err != nil {
					return err
				}
				if err := vc.conv(x, dry); err != nil {
					return err
				}
			}
			return nil
		}
	case *array.BooleanBuilder:
		fn = func(v any, dry bool) error {
			x, ok := v.(bool)
			if !ok {
				return mismatchErr(v, dt)
			}
			if !dry {
				b.Append(x)
			}
			return nil
		}
	case *array.Int8Builder:
		fn = intConv(b.Append, 8)
	case *array.Int16Builder:
		fn = intConv(b.Append, 16)
	case *array.Int32Builder:
		fn = intConv(b.Append, 32)
	case *array.Int64Builder:
		fn = intConv(b.Append, 64)
	case *array.Float64Builder:
		fn = func(v any, dry bool) error {
			x, err := anyFloat(v)
			if err == nil && !dry {
				b.Append(x)
			}
			return err
		}
	case *array.Float32Builder:
		fn = func(v any, dry bool) error {
			x, err := anyFloat(v)
			if err == nil && float64(float32(x)) != x && x == x {
				if _, isF32 := v.(float32); !isF32 {
					err = fmt.Errorf("%v is not exact as float32: %w", x, ErrOutOfRange)
				}
			}
			if err == nil && !dry {
				b.Append(float32(x))
			}
			return err
		}
	case *array.StringBuilder, *array.LargeStringBuilder:
		app := b.(interface{ Append(string) }).Append
		fn = func(v any, dry bool) error {
			x, ok := v.(string)
			if !ok {
				return mismatchErr(v, dt)
			}
			if !dry {
				app(x)
			}
			return nil
		}
	case *array.BinaryBuilder:
		fn = func(v any, dry bool) error {
			switch x := v.(type) {
			case []byte:
				if !dry {
					b.Append(x)
				}
			case string:
				if !dry {
					b.AppendString(x)
				}
			default:
				return mismatchErr(v, dt)
			}
			return nil
		}
	case *extensions.UUIDBuilder:
		fn = func(v any, dry bool) error {
			var u uuid.UUID
			switch x := v.(type) {
			case uuid.UUID:
				u = x
			case [16]byte:
				u = x
			case []byte:
				if len(x) != 16 {
					return fmt.Errorf("%d bytes, want 16: %w", len(x), ErrOutOfRange)
				}
				u = uuid.UUID(x)
			case string:
				var err error
				if u, err = uuid.Parse(x); err != nil {
					return fmt.Errorf("%q is not a UUID: %w", x, ErrTypeMismatch)
				}
			default:
				return mismatchErr(v, dt)
			}
			if !dry {
				b.Append(u)
			}
			return nil
		}
	case *array.FixedSizeBinaryBuilder:
		w := dt.(*arrow.FixedSizeBinaryType).ByteWidth
		fn = func(v any, dry bool) error {
			x, ok := v.([]byte)
			if !ok {
				return mismatchErr(v, dt)
			}
			if len(x) != w {
				return fmt.Errorf("%d bytes, want %d: %w", len(x), w, ErrOutOfRange)
			}
			if !dry {
				b.Append(x)
			}
			return nil
		}
	case *array.TimestampBuilder:
		unit := dt.(*arrow.TimestampType).Unit
		fn = func(v any, dry bool) error {
			var ts int64
			var err error
			switch x := v.(type) {
			case time.Time:
				ts, err = timeTo(x, unit)
			case string:
				var t time.Time
				if t, err = parseTime(x); err == nil {
					ts, err = timeTo(t, unit)
				}
			default:
				var e int64
				if e, err = anyInt(v); err == nil {
					ts, err = epochTo(e, opts.EpochUnit, unit)
				} else {
					err = mismatchErr(v, dt)
				}
			}
			if err == nil && !dry {
				b.Append(arrow.Timestamp(ts))
			}
			return err
		}
	case *array.Date32Builder:
		fn = func(v any, dry bool) error {
			var d arrow.Date32
			var err error
			switch x := v.(type) {
			case time.Time:
				d, err = dateOf(x)
			case string:
				d, err = parseDate(x)
			default:
				var e int64
				if e, err = anyInt(v); err == nil {
					err = checkIntRange(e, 32)
					d = arrow.Date32(e)
				} else {
					err = mismatchErr(v, dt)
				}
			}
			if err == nil && !dry {
				b.Append(d)
			}
			return err
		}
	case *array.Decimal128Builder:
		d := dt.(*arrow.Decimal128Type)
		fn = func(v any, dry bool) error {
			var n decimal128.Num
			var err error
			switch x := v.(type) {
			case json.Number:
				n, err = parseDecimal(string(x), d.Precision, d.Scale)
			case string:
				n, err = parseDecimal(x, d.Precision, d.Scale)
			case decimal128.Num:
				n = x
				if !n.FitsInPrecision(d.Precision) {
					err = fmt.Errorf("%s does not fit decimal(%d,%d): %w", n.ToString(d.Scale), d.Precision, d.Scale, ErrOutOfRange)
				}
			case float64:
				n, err = parseDecimal(fmt.Sprint(x), d.Precision, d.Scale)
			default:
				var i int64
				if i, err = anyInt(v); err == nil {
					n, err = parseDecimal(fmt.Sprint(i), d.Precision, d.Scale)
				} else {
					if u, ok := v.(uint64); ok {
						n, err = parseDecimal(fmt.Sprint(u), d.Precision, d.Scale)
					} else {
						err = mismatchErr(v, dt)
					}
				}
			}
			if err == nil && !dry {
				b.Append(n)
			}
			return err
		}
	case *extensions.VariantBuilder:
		return &variantConv{col: col, ok: f.Nullable, d: newVariantDst(b)}, nil
	default:
		return nil, planErr(col, "column type %v is not supported for map input: %w", dt, ErrUnsupportedType)
	}
	return &nullable{col: col, ok: f.Nullable, b: b, inner: leafConv{col: col, fn: fn}}, nil
}
