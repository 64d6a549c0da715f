package shred

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/google/uuid"
)

// JSONLines converts data, one JSON object per line (blank lines are
// skipped), into one record batch. With a target schema, values go straight
// from the bytes into the builders through a small scanner (no maps): keys
// match columns by name (an unknown key is ErrUnknownColumn), a missing key
// or null is null, integers are parsed exactly, timestamps come from RFC 3339
// strings (up to 9 fractional digits, exact in a nanosecond column, further
// digits dropped; a microsecond column truncates toward the past) or epoch numbers
// (MapOptions.EpochUnit), binary columns take base64 strings as encoding/json
// does. A variant column (arrow-go's extensions.VariantType) takes the key's
// JSON value of any shape, encoded as AppendVariantJSON does straight from the
// line's bytes: there a JSON null is the variant null and only a missing key
// is a null row; invalid JSON in it is a *FieldError naming the column.
// (A variant nested in a struct, list or map column goes through the map
// converter: there null is a null row.) Without a target, lines are decoded with
// json.Decoder.UseNumber into maps and InferSchema decides the types. The Row
// of a *FieldError is the 0-based line number. Only the first opts is used.
func JSONLines(mem memory.Allocator, data []byte, target *arrow.Schema, opts ...MapOptions) (arrow.RecordBatch, error) {
	var o MapOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	if target == nil {
		return jsonViaMaps(mem, data, o)
	}
	rb := array.NewRecordBuilder(mem, target)
	defer rb.Release()
	r, err := newJRoot(target, rb.Fields(), o)
	if err != nil {
		return nil, err
	}
	for line := 0; len(data) > 0; line++ {
		var l []byte
		if k := bytes.IndexByte(data, '\n'); k >= 0 {
			l, data = data[:k], data[k+1:]
		} else {
			l, data = data, nil
		}
		if skipSpace(l, 0) == len(l) {
			continue
		}
		if err := r.row(l); err != nil {
			err = setRow(err, line)
			if o.OnRowError != nil {
				o.OnRowError(line, err)
				continue
			}
			return nil, err
		}
	}
	return rb.NewRecordBatch(), nil
}

func jsonViaMaps(mem memory.Allocator, data []byte, o MapOptions) (arrow.RecordBatch, error) {
	var rows []map[string]any
	for line := 0; len(data) > 0; line++ {
		var l []byte
		if k := bytes.IndexByte(data, '\n'); k >= 0 {
			l, data = data[:k], data[k+1:]
		} else {
			l, data = data, nil
		}
		if skipSpace(l, 0) == len(l) {
			continue
		}
		m, err := decodeObject(l)
		if err != nil {
			err = rowErr("", line, err)
			if o.OnRowError != nil {
				o.OnRowError(line, err)
				continue
			}
			return nil, err
		}
		rows = append(rows, m)
	}
	return MapsWithOptions(mem, rows, nil, o)
}

func decodeObject(l []byte) (map[string]any, error) {
	if end, err := scanValue(l, skipSpace(l, 0), 0); err != nil {
		return nil, err
	} else if skipSpace(l, end) != len(l) {
		return nil, syntaxErr(l, end, "data after the object")
	}
	dec := json.NewDecoder(bytes.NewReader(l))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: %v", errSyntax, err)
	}
	if m == nil {
		return nil, fmt.Errorf("%w: a line must hold an object", errSyntax)
	}
	return m, nil
}

// jcol converts one raw JSON value (never null) into a column: check parses
// and validates, commit appends what check parsed.
type jcol interface {
	check(v []byte) error
	commit()
}

type jroot struct {
	names    map[string]int
	fields   []arrow.Field
	cols     []jcol
	variants []*jvariant // the variant columns' cols (nil for others), parsed as the line is scanned
	builders []array.Builder
	spans    [][]byte
	seen     []uint64
	isNull   []bool
	gen      uint64
	keyBuf   []byte
}

func newJRoot(s *arrow.Schema, builders []array.Builder, o MapOptions) (*jroot, error) {
	r := &jroot{names: map[string]int{}, fields: s.Fields(), builders: builders}
	n := len(r.fields)
	r.spans, r.seen, r.isNull = make([][]byte, n), make([]uint64, n), make([]bool, n)
	r.variants = make([]*jvariant, n)
	for i, f := range r.fields {
		r.names[f.Name] = i
		c, err := newJCol(f.Name, f, builders[i], o)
		if err != nil {
			return nil, err
		}
		r.cols = append(r.cols, c)
		r.variants[i], _ = c.(*jvariant)
	}
	return r, nil
}

func (r *jroot) row(l []byte) error {
	r.gen++
	i := skipSpace(l, 0)
	if l[i] != '{' {
		return rowErr("", -1, syntaxErr(l, i, "a line must hold an object"))
	}
	i = skipSpace(l, i+1)
	if i < len(l) && l[i] == '}' {
		i++
	} else {
		for {
			if i >= len(l) || l[i] != '"' {
				return rowErr("", -1, syntaxErr(l, i, "want object key"))
			}
			end, esc, err := scanString(l, i)
			if err != nil {
				return rowErr("", -1, err)
			}
			var key []byte
			key, r.keyBuf = unquote(l[i:end], esc, r.keyBuf)
			i = skipSpace(l, end)
			if i >= len(l) || l[i] != ':' {
				return rowErr("", -1, syntaxErr(l, i, "want ':'"))
			}
			vs := skipSpace(l, i+1)
			idx, ok := r.names[string(key)]
			if !ok {
				if _, err := scanValue(l, vs, 1); err != nil {
					return rowErr("", -1, err)
				}
				return rowErr(string(key), -1, ErrUnknownColumn)
			}
			if r.seen[idx] == r.gen {
				return rowErr(string(key), -1, fmt.Errorf("key appears twice: %w", errSyntax))
			}
			var ve int
			if v := r.variants[idx]; v != nil {
				if ve, err = v.parse(l, vs); err != nil {
					return rowErr(r.fields[idx].Name, -1, err)
				}
			} else if ve, err = scanValue(l, vs, 1); err != nil {
				return rowErr("", -1, err)
			}
			r.seen[idx], r.spans[idx] = r.gen, l[vs:ve]
			more := false
			if i, more, err = nextElem(l, ve, '}'); err != nil {
				return rowErr("", -1, err)
			} else if !more {
				break
			}
		}
	}
	if skipSpace(l, i) != len(l) {
		return rowErr("", -1, syntaxErr(l, i, "data after the object"))
	}
	for idx, c := range r.cols {
		v := r.spans[idx]
		if r.variants[idx] != nil && r.seen[idx] == r.gen { // parsed already; null is the variant null
			r.isNull[idx] = false
			continue
		}
		if r.seen[idx] != r.gen || (len(v) == 4 && string(v) == "null") {
			if !r.fields[idx].Nullable {
				return rowErr(r.fields[idx].Name, -1, ErrNull)
			}
			r.isNull[idx] = true
			continue
		}
		r.isNull[idx] = false
		if err := c.check(v); err != nil {
			var fe *FieldError
			if errors.As(err, &fe) {
				return err
			}
			return rowErr(r.fields[idx].Name, -1, err)
		}
	}
	for idx, c := range r.cols {
		if r.isNull[idx] {
			r.builders[idx].AppendNull()
		} else {
			c.commit()
		}
	}
	return nil
}

func str(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

func isNumTok(v []byte) bool { return v[0] == '-' || isDigit(v[0]) }

func jmismatch(v []byte, dt arrow.DataType) error {
	kind := "value"
	switch v[0] {
	case '"':
		kind = "string"
	case '{':
		kind = "object"
	case '[':
		kind = "array"
	case 't', 'f':
		kind = "bool"
	default:
		if isNumTok(v) {
			kind = "number"
		}
	}
	return fmt.Errorf("JSON %s cannot be written to a %v column: %w", kind, dt, ErrTypeMismatch)
}

type jfuncs struct {
	c  func([]byte) error
	cm func()
}

func (j *jfuncs) check(v []byte) error { return j.c(v) }
func (j *jfuncs) commit()              { j.cm() }

// jstring parses a string token into its own buffer.
type jstr struct {
	buf []byte
	s   []byte
}

func (j *jstr) parse(v []byte) bool {
	if v[0] != '"' {
		return false
	}
	esc := bytes.IndexByte(v, '\\') >= 0
	j.s, j.buf = unquote(v, esc, j.buf)
	return true
}

func jintCol[D signed](dt arrow.DataType, app func(D), bits int) jcol {
	var cur int64
	return &jfuncs{
		c: func(v []byte) error {
			if !isNumTok(v) {
				return jmismatch(v, dt)
			}
			x, err := parseIntText(str(v))
			if err == nil {
				err = checkIntRange(x, bits)
			}
			cur = x
			return err
		},
		cm: func() { app(D(cur)) },
	}
}

// nested columns go through the map converter.
type jnested struct {
	m   mconv
	cur any
}

func (j *jnested) check(v []byte) error {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	j.cur = nil
	if err := dec.Decode(&j.cur); err != nil {
		return fmt.Errorf("%w: %v", errSyntax, err)
	}
	return j.m.conv(j.cur, true)
}

func (j *jnested) commit() {
	_ = j.m.conv(j.cur, false)
	j.cur = nil
}

// jvariant puts a column's JSON value, of any shape, into a variant column
// straight from the line's bytes.
type jvariant struct {
	d   variantDst
	enc variantEncoder
}

// parse builds the value starting at l[vs] and returns its end.
func (j *jvariant) parse(l []byte, vs int) (int, error) { return j.enc.buildJSONAt(l, vs, &j.d) }

func (j *jvariant) check(v []byte) error { return j.enc.buildJSON(v, &j.d) }

func (j *jvariant) commit() {
	j.enc.put(&j.d)
	j.enc.reset()
}

func newJCol(col string, f arrow.Field, b array.Builder, o MapOptions) (jcol, error) {
	dt := f.Type
	switch b := b.(type) {
	case *extensions.VariantBuilder:
		return &jvariant{d: newVariantDst(b)}, nil
	case *array.StructBuilder, *array.ListBuilder, *array.LargeListBuilder, *array.MapBuilder:
		m, err := newMConv(col, f, b, o)
		if err != nil {
			return nil, err
		}
		return &jnested{m: m}, nil
	case *array.BooleanBuilder:
		var cur bool
		return &jfuncs{
			c: func(v []byte) error {
				switch v[0] {
				case 't':
					cur = true
				case 'f':
					cur = false
				default:
					return jmismatch(v, dt)
				}
				return nil
			},
			cm: func() { b.Append(cur) },
		}, nil
	case *array.Int8Builder:
		return jintCol(dt, b.Append, 8), nil
	case *array.Int16Builder:
		return jintCol(dt, b.Append, 16), nil
	case *array.Int32Builder:
		return jintCol(dt, b.Append, 32), nil
	case *array.Int64Builder:
		return jintCol(dt, b.Append, 64), nil
	case *array.Float64Builder, *array.Float32Builder:
		var cur float64
		f32, is32 := b.(*array.Float32Builder)
		f64, _ := b.(*array.Float64Builder)
		return &jfuncs{
			c: func(v []byte) error {
				if !isNumTok(v) {
					return jmismatch(v, dt)
				}
				x, err := strconv.ParseFloat(str(v), 64)
				if err != nil {
					return fmt.Errorf("%s: %w", v, ErrOutOfRange)
				}
				if is32 {
					if _, err := strconv.ParseFloat(str(v), 32); err != nil {
						return fmt.Errorf("%s does not fit float32: %w", v, ErrOutOfRange)
					}
				}
				cur = x
				return nil
			},
			cm: func() {
				if is32 {
					f32.Append(float32(cur))
				} else {
					f64.Append(cur)
				}
			},
		}, nil
	}
	return newJScalar(col, f, b, o)
}

// newJScalar handles the string-like, binary and temporal columns.
func newJScalar(col string, f arrow.Field, b array.Builder, o MapOptions) (jcol, error) {
	dt := f.Type
	var js jstr
	switch b := b.(type) {
	case *array.StringBuilder:
		return &jfuncs{
			c: func(v []byte) error {
				if !js.parse(v) {
					return jmismatch(v, dt)
				}
				return nil
			},
			cm: func() { b.BinaryBuilder.Append(js.s) },
		}, nil
	case *array.LargeStringBuilder:
		return &jfuncs{
			c: func(v []byte) error {
				if !js.parse(v) {
					return jmismatch(v, dt)
				}
				return nil
			},
			cm: func() { b.BinaryBuilder.Append(js.s) },
		}, nil
	case *array.BinaryBuilder, *array.FixedSizeBinaryBuilder:
		var out []byte
		width := -1
		if fb, ok := dt.(*arrow.FixedSizeBinaryType); ok {
			width = fb.ByteWidth
		}
		app := b.(interface{ Append([]byte) }).Append
		return &jfuncs{
			c: func(v []byte) error {
				if !js.parse(v) {
					return jmismatch(v, dt)
				}
				n := base64.StdEncoding.DecodedLen(len(js.s))
				if cap(out) < n {
					out = make([]byte, n)
				}
				k, err := base64.StdEncoding.Decode(out[:n], js.s)
				if err != nil {
					return fmt.Errorf("binary values are base64 strings: %w: %v", ErrTypeMismatch, err)
				}
				out = out[:k]
				if width >= 0 && k != width {
					return fmt.Errorf("%d bytes, want %d: %w", k, width, ErrOutOfRange)
				}
				return nil
			},
			cm: func() { app(out) },
		}, nil
	case *extensions.UUIDBuilder:
		var cur uuid.UUID
		return &jfuncs{
			c: func(v []byte) error {
				if !js.parse(v) {
					return jmismatch(v, dt)
				}
				var err error
				if cur, err = uuid.ParseBytes(js.s); err != nil {
					return fmt.Errorf("%q is not a UUID: %w", js.s, ErrTypeMismatch)
				}
				return nil
			},
			cm: func() { b.Append(cur) },
		}, nil
	case *array.TimestampBuilder:
		unit := dt.(*arrow.TimestampType).Unit
		var cur int64
		return &jfuncs{
			c: func(v []byte) error {
				var err error
				switch {
				case js.parse(v):
					t, perr := parseTime(str(js.s))
					if perr != nil {
						return perr
					}
					cur, err = timeTo(t, unit)
				case isNumTok(v):
					var e int64
					if e, err = parseIntText(str(v)); err == nil {
						cur, err = epochTo(e, o.EpochUnit, unit)
					}
				default:
					err = jmismatch(v, dt)
				}
				return err
			},
			cm: func() { b.Append(arrow.Timestamp(cur)) },
		}, nil
	case *array.Date32Builder:
		var cur arrow.Date32
		return &jfuncs{
			c: func(v []byte) error {
				var err error
				switch {
				case js.parse(v):
					cur, err = parseDate(str(js.s))
				case isNumTok(v):
					var e int64
					if e, err = parseIntText(str(v)); err == nil {
						err = checkIntRange(e, 32)
						cur = arrow.Date32(e)
					}
				default:
					err = jmismatch(v, dt)
				}
				return err
			},
			cm: func() { b.Append(cur) },
		}, nil
	case *array.Decimal128Builder:
		d := dt.(*arrow.Decimal128Type)
		var cur decimal128.Num
		return &jfuncs{
			c: func(v []byte) error {
				var err error
				switch {
				case js.parse(v):
					cur, err = parseDecimal(string(js.s), d.Precision, d.Scale)
				case isNumTok(v):
					cur, err = parseDecimal(string(v), d.Precision, d.Scale)
				default:
					err = jmismatch(v, dt)
				}
				return err
			},
			cm: func() { b.Append(cur) },
		}, nil
	}
	return nil, planErr(col, "column type %v is not supported for JSON input: %w", dt, ErrUnsupportedType)
}
