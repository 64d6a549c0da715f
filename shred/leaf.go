package shred

import (
	"fmt"
	"math"
	"reflect"
	"time"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/extensions"
)

// encoder appends n Go values to its builder; the i-th value is at
// base+i*stride. A returned *FieldError has Row relative to this call. An
// encoder appends nothing when it returns an error for a leaf column; the
// caller discards all builders on error anyway.
type encoder interface {
	encode(base unsafe.Pointer, stride uintptr, n int) error
}

// wrapper is a pointer or a sql.Null around a value.
type wrapper struct {
	ptr      bool
	valOff   uintptr
	validOff uintptr
}

// unwrap peels pointers and sql.Null types off t.
func unwrap(t reflect.Type) ([]wrapper, reflect.Type) {
	var ws []wrapper
	for {
		if t.Kind() == reflect.Pointer {
			ws = append(ws, wrapper{ptr: true})
			t = t.Elem()
			continue
		}
		if v, valid, ok := sqlNullParts(t); ok {
			ws = append(ws, wrapper{valOff: v.Offset, validOff: valid.Offset})
			t = v.Type
			continue
		}
		return ws, t
	}
}

// resolve follows the wrappers; nil means null.
func resolve(ws []wrapper, p unsafe.Pointer) unsafe.Pointer {
	for _, w := range ws {
		if w.ptr {
			p = *(*unsafe.Pointer)(p)
			if p == nil {
				return nil
			}
		} else {
			if !*(*bool)(unsafe.Add(p, w.validOff)) {
				return nil
			}
			p = unsafe.Add(p, w.valOff)
		}
	}
	return p
}

const (
	modeDirect    = iota // the Go value has D's layout
	modeRead             // read through a function
	modeTimeMicro        // time.Time -> microseconds, no wrappers
)

// leafEnc gathers n values into a scratch slice and appends them in bulk.
type leafEnc[D any] struct {
	col      string
	nullable bool
	mode     int
	hasPtr   bool // D holds pointers: clear the scratch after use
	read     func(p unsafe.Pointer) (D, error)
	ws       []wrapper
	app      func([]D, []bool)
	vals     []D
	valid    []bool
}

func (e *leafEnc[D]) encode(base unsafe.Pointer, stride uintptr, n int) error {
	if cap(e.vals) < n {
		e.vals = make([]D, n)
	}
	vals := e.vals[:n]
	switch e.mode {
	case modeDirect:
		for i := range vals {
			vals[i] = *(*D)(unsafe.Add(base, uintptr(i)*stride))
		}
		e.app(vals, nil)
	case modeTimeMicro:
		ts := any(vals).([]arrow.Timestamp)
		for i := range ts {
			t := (*time.Time)(unsafe.Add(base, uintptr(i)*stride))
			if t.Before(minMicroTime) || t.After(maxMicroTime) {
				return rowErr(e.col, i, timeRangeErr(*t, arrow.Microsecond))
			}
			ts[i] = arrow.Timestamp(t.UnixMicro())
		}
		e.app(vals, nil)
	default:
		if cap(e.valid) < n {
			e.valid = make([]bool, n)
		}
		valid := e.valid[:n]
		nulls := false
		for i := range vals {
			p := unsafe.Add(base, uintptr(i)*stride)
			if len(e.ws) > 0 {
				p = resolve(e.ws, p)
			}
			if p == nil {
				if !e.nullable {
					e.clear(vals)
					return rowErr(e.col, i, ErrNull)
				}
				var zero D
				vals[i], valid[i], nulls = zero, false, true
				continue
			}
			v, err := e.read(p)
			if err != nil {
				e.clear(vals)
				return rowErr(e.col, i, err)
			}
			vals[i], valid[i] = v, true
		}
		if nulls {
			e.app(vals, valid)
		} else {
			e.app(vals, nil)
		}
	}
	e.clear(vals)
	return nil
}

func (e *leafEnc[D]) clear(vals []D) {
	if e.hasPtr {
		clear(vals)
	}
}

// newLeaf makes a leaf encoder. direct says the unwrapped Go value has D's
// memory layout; read is used otherwise.
func newLeaf[D any](col string, nullable bool, ws []wrapper, direct bool, read func(unsafe.Pointer) (D, error), app func([]D, []bool)) encoder {
	var zero D
	e := &leafEnc[D]{col: col, nullable: nullable, ws: ws, read: read, app: app, hasPtr: hasPointers(reflect.TypeOf(zero))}
	if direct && len(ws) == 0 {
		e.mode = modeDirect
	} else {
		e.mode = modeRead
		if e.read == nil {
			e.read = func(p unsafe.Pointer) (D, error) { return *(*D)(p), nil }
		}
	}
	return e
}

func hasPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.String, reflect.Slice, reflect.Pointer, reflect.Map, reflect.Interface:
		return true
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if hasPointers(t.Field(i).Type) {
				return true
			}
		}
	case reflect.Array:
		return hasPointers(t.Elem())
	}
	return false
}

// intReader reads any Go integer kind as int64; uint64 values above MaxInt64
// are an error.
func intReader(k reflect.Kind) func(unsafe.Pointer) (int64, error) {
	switch k {
	case reflect.Int8:
		return func(p unsafe.Pointer) (int64, error) { return int64(*(*int8)(p)), nil }
	case reflect.Int16:
		return func(p unsafe.Pointer) (int64, error) { return int64(*(*int16)(p)), nil }
	case reflect.Int32:
		return func(p unsafe.Pointer) (int64, error) { return int64(*(*int32)(p)), nil }
	case reflect.Int64:
		return func(p unsafe.Pointer) (int64, error) { return *(*int64)(p), nil }
	case reflect.Int:
		return func(p unsafe.Pointer) (int64, error) { return int64(*(*int)(p)), nil }
	case reflect.Uint8:
		return func(p unsafe.Pointer) (int64, error) { return int64(*(*uint8)(p)), nil }
	case reflect.Uint16:
		return func(p unsafe.Pointer) (int64, error) { return int64(*(*uint16)(p)), nil }
	case reflect.Uint32:
		return func(p unsafe.Pointer) (int64, error) { return int64(*(*uint32)(p)), nil }
	case reflect.Uint64, reflect.Uint:
		return func(p unsafe.Pointer) (int64, error) {
			var v uint64
			if k == reflect.Uint {
				v = uint64(*(*uint)(p))
			} else {
				v = *(*uint64)(p)
			}
			if v > math.MaxInt64 {
				return 0, fmt.Errorf("%d exceeds the int64 range: %w", v, ErrOutOfRange)
			}
			return int64(v), nil
		}
	}
	return nil
}

type signed interface {
	~int8 | ~int16 | ~int32 | ~int64
}

// intLeaf writes Go integers into a signed integer column of D, with range
// checks when the column is narrower than the Go type.
func intLeaf[D signed](col string, nullable bool, ws []wrapper, k reflect.Kind, bits int, app func([]D, []bool)) encoder {
	r := intReader(k)
	direct := false
	switch bits {
	case 8:
		direct = k == reflect.Int8
	case 16:
		direct = k == reflect.Int16
	case 32:
		direct = k == reflect.Int32
	case 64:
		direct = k == reflect.Int64 || (k == reflect.Int && unsafe.Sizeof(int(0)) == 8)
	}
	lo, hi := int64(-1)<<(bits-1), int64(1)<<(bits-1)-1
	if bits == 64 {
		lo, hi = math.MinInt64, math.MaxInt64
	}
	read := func(p unsafe.Pointer) (D, error) {
		v, err := r(p)
		if err != nil {
			return 0, err
		}
		if v < lo || v > hi {
			return 0, fmt.Errorf("%d does not fit int%d: %w", v, bits, ErrOutOfRange)
		}
		return D(v), nil
	}
	return newLeaf(col, nullable, ws, direct, read, app)
}

func isIntKind(k reflect.Kind) bool {
	switch k {
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Int,
		reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uint:
		return true
	}
	return false
}

// intBits is the number of value bits of a Go integer kind (sign excluded).
func intBits(k reflect.Kind) int {
	switch k {
	case reflect.Int8:
		return 7
	case reflect.Uint8:
		return 8
	case reflect.Int16:
		return 15
	case reflect.Uint16:
		return 16
	case reflect.Int32:
		return 31
	case reflect.Uint32:
		return 32
	}
	return 64
}

// The times an int64 holds in milli-, micro- and nanoseconds since the epoch.
var (
	minMilliTime = time.UnixMilli(math.MinInt64).UTC()
	maxMilliTime = time.UnixMilli(math.MaxInt64).UTC()
	minMicroTime = time.UnixMicro(math.MinInt64).UTC()
	maxMicroTime = time.UnixMicro(math.MaxInt64).UTC()
	minNanoTime  = time.Unix(0, math.MinInt64).UTC()
	maxNanoTime  = time.Unix(0, math.MaxInt64).UTC()
)

func timeRangeErr(t time.Time, unit arrow.TimeUnit) error {
	return fmt.Errorf("%v is outside the timestamp[%s] range: %w", t, unit, ErrOutOfRange)
}

// leafEncoder builds the encoder of a scalar Go type bt (wrapped by ws) into builder b.
func leafEncoder(bt reflect.Type, ws []wrapper, gf goField, col string, nullable bool, b array.Builder) (encoder, error) {
	k := bt.Kind()
	mismatch := func() (encoder, error) {
		return nil, planErr(col, "Go field %s of type %v cannot be written to a column of type %v: %w", gf.goName, bt, b.Type(), ErrTypeMismatch)
	}
	isBytes := k == reflect.Slice && bt.Elem().Kind() == reflect.Uint8
	isFixed := k == reflect.Array && bt.Elem().Kind() == reflect.Uint8
	switch b := b.(type) {
	case *array.BooleanBuilder:
		if k == reflect.Bool {
			return newLeaf[bool](col, nullable, ws, true, nil, b.AppendValues), nil
		}
	case *array.Int8Builder:
		if isIntKind(k) {
			return intLeaf(col, nullable, ws, k, 8, b.AppendValues), nil
		}
	case *array.Int16Builder:
		if isIntKind(k) {
			return intLeaf(col, nullable, ws, k, 16, b.AppendValues), nil
		}
	case *array.Int32Builder:
		if isIntKind(k) {
			return intLeaf(col, nullable, ws, k, 32, b.AppendValues), nil
		}
	case *array.Int64Builder:
		if isIntKind(k) {
			return intLeaf(col, nullable, ws, k, 64, b.AppendValues), nil
		}
	case *array.Float64Builder:
		switch {
		case k == reflect.Float64:
			return newLeaf[float64](col, nullable, ws, true, nil, b.AppendValues), nil
		case k == reflect.Float32:
			return newLeaf(col, nullable, ws, false, func(p unsafe.Pointer) (float64, error) { return float64(*(*float32)(p)), nil }, b.AppendValues), nil
		case isIntKind(k):
			r := intReader(k)
			return newLeaf(col, nullable, ws, false, func(p unsafe.Pointer) (float64, error) {
				v, err := r(p)
				if err != nil {
					return 0, err
				}
				if v > 1<<53 || v < -(1<<53) {
					return 0, fmt.Errorf("%d is not exact as float64: %w", v, ErrOutOfRange)
				}
				return float64(v), nil
			}, b.AppendValues), nil
		}
	case *array.Float32Builder:
		switch {
		case k == reflect.Float32:
			return newLeaf[float32](col, nullable, ws, true, nil, b.AppendValues), nil
		case k == reflect.Float64:
			return newLeaf(col, nullable, ws, false, func(p unsafe.Pointer) (float32, error) {
				v := *(*float64)(p)
				if f := float32(v); float64(f) == v || v != v {
					return f, nil
				}
				return 0, fmt.Errorf("%v is not exact as float32: %w", v, ErrOutOfRange)
			}, b.AppendValues), nil
		case isIntKind(k):
			r := intReader(k)
			return newLeaf(col, nullable, ws, false, func(p unsafe.Pointer) (float32, error) {
				v, err := r(p)
				if err != nil {
					return 0, err
				}
				if v > 1<<24 || v < -(1<<24) {
					return 0, fmt.Errorf("%d is not exact as float32: %w", v, ErrOutOfRange)
				}
				return float32(v), nil
			}, b.AppendValues), nil
		}
	case *array.StringBuilder:
		if k == reflect.String {
			return newLeaf[string](col, nullable, ws, true, nil, b.AppendValues), nil
		}
	case *array.LargeStringBuilder:
		if k == reflect.String {
			return newLeaf[string](col, nullable, ws, true, nil, b.AppendValues), nil
		}
	case *array.BinaryBuilder:
		switch {
		case isBytes:
			return bytesLeaf(col, nullable, ws, -1, b.AppendValues), nil
		case k == reflect.String:
			return newLeaf(col, nullable, ws, false, func(p unsafe.Pointer) ([]byte, error) {
				s := *(*string)(p)
				return unsafe.Slice(unsafe.StringData(s), len(s)), nil
			}, b.AppendValues), nil
		case isFixed:
			n := bt.Len()
			return newLeaf(col, nullable, ws, false, func(p unsafe.Pointer) ([]byte, error) {
				return unsafe.Slice((*byte)(p), n), nil
			}, b.AppendValues), nil
		}
	case *extensions.UUIDBuilder:
		return leafEncoder(bt, ws, gf, col, nullable, b.StorageBuilder())
	case *array.FixedSizeBinaryBuilder:
		w := b.Type().(*arrow.FixedSizeBinaryType).ByteWidth
		switch {
		case isFixed && bt.Len() == w:
			return newLeaf(col, nullable, ws, false, func(p unsafe.Pointer) ([]byte, error) {
				return unsafe.Slice((*byte)(p), w), nil
			}, b.AppendValues), nil
		case isBytes:
			return bytesLeaf(col, nullable, ws, w, b.AppendValues), nil
		}
	case *array.TimestampBuilder:
		if bt == timeType {
			return timeLeaf(col, nullable, ws, b.Type().(*arrow.TimestampType).Unit, b.AppendValues), nil
		}
	case *array.Date32Builder:
		if bt == timeType {
			return newLeaf(col, nullable, ws, false, func(p unsafe.Pointer) (arrow.Date32, error) {
				u := (*time.Time)(p).Unix()
				d := u / 86400
				if u%86400 < 0 {
					d--
				}
				if d < math.MinInt32 || d > math.MaxInt32 {
					return 0, fmt.Errorf("%v is outside the date32 range: %w", *(*time.Time)(p), ErrOutOfRange)
				}
				return arrow.Date32(d), nil
			}, b.AppendValues), nil
		}
	case *array.Decimal128Builder:
		dt := b.Type().(*arrow.Decimal128Type)
		prec, scale := dt.Precision, dt.Scale
		check := func(v decimal128.Num) (decimal128.Num, error) {
			if !v.FitsInPrecision(prec) {
				return v, fmt.Errorf("%s does not fit decimal(%d,%d): %w", v.ToString(scale), prec, scale, ErrOutOfRange)
			}
			return v, nil
		}
		switch {
		case bt == decimalType:
			from := scale
			if gf.decimal {
				from = gf.scale
			}
			return newLeaf(col, nullable, ws, false, func(p unsafe.Pointer) (decimal128.Num, error) {
				v := *(*decimal128.Num)(p)
				if from != scale {
					var err error
					if v, err = v.Rescale(from, scale); err != nil {
						return v, fmt.Errorf("rescaling to decimal(%d,%d): %w: %w", prec, scale, ErrOutOfRange, err)
					}
				}
				return check(v)
			}, b.AppendValues), nil
		case isIntKind(k):
			r := intReader(k)
			return newLeaf(col, nullable, ws, false, func(p unsafe.Pointer) (decimal128.Num, error) {
				v, err := r(p)
				if err != nil {
					return decimal128.Num{}, err
				}
				return check(decimal128.FromI64(v).IncreaseScaleBy(scale))
			}, b.AppendValues), nil
		}
	}
	return mismatch()
}

// bytesLeaf writes []byte values; a nil slice is null in a nullable column.
// width >= 0 requires that length.
func bytesLeaf(col string, nullable bool, ws []wrapper, width int, app func([][]byte, []bool)) encoder {
	e := &leafEnc[[]byte]{col: col, nullable: nullable, mode: modeRead, hasPtr: true, app: app}
	e.ws = ws
	e.read = func(p unsafe.Pointer) ([]byte, error) {
		v := *(*[]byte)(p)
		if width >= 0 && len(v) != width {
			if v == nil && nullable {
				return nil, nil
			}
			return nil, fmt.Errorf("%d bytes, want %d: %w", len(v), width, ErrOutOfRange)
		}
		return v, nil
	}
	return &nilBytesEnc{leaf: e}
}

// nilBytesEnc turns nil byte slices into nulls when the column is nullable.
type nilBytesEnc struct{ leaf *leafEnc[[]byte] }

func (e *nilBytesEnc) encode(base unsafe.Pointer, stride uintptr, n int) error {
	l := e.leaf
	if cap(l.vals) < n {
		l.vals = make([][]byte, n)
		l.valid = make([]bool, n)
	}
	vals, valid := l.vals[:n], l.valid[:n]
	nulls := false
	defer clear(vals)
	for i := range vals {
		p := unsafe.Add(base, uintptr(i)*stride)
		if len(l.ws) > 0 {
			p = resolve(l.ws, p)
		}
		var v []byte
		if p != nil {
			var err error
			if v, err = l.read(p); err != nil {
				return rowErr(l.col, i, err)
			}
		}
		if v == nil && l.nullable {
			vals[i], valid[i], nulls = nil, false, true
			continue
		}
		if p == nil {
			return rowErr(l.col, i, ErrNull)
		}
		vals[i], valid[i] = v, true
	}
	if nulls {
		l.app(vals, valid)
	} else {
		l.app(vals, nil)
	}
	return nil
}

func timeLeaf(col string, nullable bool, ws []wrapper, unit arrow.TimeUnit, app func([]arrow.Timestamp, []bool)) encoder {
	if unit == arrow.Microsecond && len(ws) == 0 {
		return &leafEnc[arrow.Timestamp]{col: col, nullable: nullable, mode: modeTimeMicro, app: app}
	}
	read := func(p unsafe.Pointer) (arrow.Timestamp, error) {
		v, err := timeTo(*(*time.Time)(p), unit)
		return arrow.Timestamp(v), err
	}
	return newLeaf(col, nullable, ws, false, read, app)
}
