package shred

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/parquet/variant"
	"github.com/google/uuid"
)

// Variant values from JSON text and Go values. Both paths drive arrow-go's
// variant.Builder (the library does the encoding): JSON text is tokenized in
// place by the scanner of jsontok.go, without decoding into Go maps.

var (
	rawMessageType   = reflect.TypeFor[json.RawMessage]()
	variantValueType = reflect.TypeFor[variant.Value]()
	anySliceType     = reflect.TypeFor[[]any]()
	anyMapType       = reflect.TypeFor[map[string]any]()
)

// isVariantGoType reports the Go types SchemaOf maps to a variant column:
// json.RawMessage, variant.Value, any, map[string]any and []any.
func isVariantGoType(t reflect.Type) bool {
	switch t {
	case rawMessageType, variantValueType, anySliceType, anyMapType:
		return true
	}
	return t.Kind() == reflect.Interface && t.NumMethod() == 0
}

// variantEncoder builds one variant value at a time: arrow-go's
// variant.Builder encodes the values, objects and arrays; the encoder keeps
// the key dictionary (reused across values) and writes the metadata, as
// variant.Builder.Build would. Not safe for concurrent use.
type variantEncoder struct {
	b        variant.Builder     // values one after another: Reset only when it holds maxBuilt bytes
	start    int                 // where the value being built begins in b
	keys     map[string]*keySlot // keys seen by this encoder; an id is valid in the value of its gen
	gen      uint32              // the value being built
	keyList  []string            // the value's keys by id
	keyBytes int
	meta     []byte                 // the metadata of the value built
	val      variant.Value          // the value built, for a shredded destination
	fields   [][]variant.FieldEntry // an object's fields, per depth
	offs     [][]int                // an array's element offsets, per depth
	str      []byte                 // unescaped strings
	dirty    bool                   // a value was begun
	opts     VariantJSONOptions     // the rules for JSON text; the zero value on every path but AppendVariantJSONWithOptions
}

// maxBuilt bounds the bytes of earlier values an encoder's Builder keeps
// before it is reset.
const maxBuilt = 256 << 10

// reset drops the value built. The Builder's own dictionary is never used:
// Builder.Reset leaves its size behind (arrow-go v18.8.0), which would pad the
// metadata of Build, so the encoder keeps a dictionary of its own, writes the
// metadata itself and never calls Build.
func (e *variantEncoder) reset() {
	if !e.dirty {
		return
	}
	clear(e.keyList)
	e.keyList = e.keyList[:0]
	e.keyBytes = 0
	e.val = variant.Value{}
	e.dirty = false
}

// begin starts a value: a new generation of the key dictionary.
func (e *variantEncoder) begin() {
	e.reset()
	e.dirty = true
	if e.b.Offset() > maxBuilt {
		e.b.Reset()
	}
	e.start = e.b.Offset()
	e.b.SetAllowDuplicates(e.opts.LastKeyWins)
	e.gen++
	if e.gen == 0 || len(e.keys) > maxKeysKept {
		e.keys, e.gen = nil, 1
	}
}

// keySlot is a key's id in the value of generation gen, and the key itself
// (a copy: the map outlives the input it was read from).
type keySlot struct {
	gen, id uint32
	key     string
}

// maxKeysKept bounds the distinct keys an encoder remembers across values.
const maxKeysKept = 1 << 14

// field is variant.Builder.NextField on the encoder's dictionary, which
// stays across values so that the keys of a stream are hashed into a table
// that no longer grows.
func (e *variantEncoder) field(start int, key string) variant.FieldEntry {
	s := e.keys[key]
	if s == nil {
		if e.keys == nil {
			e.keys = make(map[string]*keySlot, 64)
		}
		s = &keySlot{key: strings.Clone(key)}
		e.keys[s.key] = s
	}
	if s.gen != e.gen {
		s.gen, s.id = e.gen, uint32(len(e.keyList))
		e.keyList = append(e.keyList, s.key)
		e.keyBytes += len(key)
	}
	return variant.FieldEntry{Key: s.key, ID: s.id, Offset: e.b.Offset() - start}
}

// maxMetadata is the metadata size arrow-go's Builder accepts.
const maxMetadata = 128 << 20

// seal writes the metadata of the value built (version 1, sorted_strings
// when the keys are in order, the smallest offset size) and, for a shredded
// destination, makes the variant.Value it takes.
func (e *variantEncoder) seal(d *variantDst) error {
	n := len(e.keyList)
	size := max(e.keyBytes, n)
	if size > maxMetadata {
		return fmt.Errorf("variant metadata of %d bytes: %w", size, ErrOutOfRange)
	}
	osz := 1
	for size>>(8*osz) != 0 {
		osz++
	}
	hdr := byte(1) | byte(osz-1)<<6
	if n > 0 && slices.IsSorted(e.keyList) {
		hdr |= 1 << 4
	}
	m := append(e.meta[:0], hdr)
	m = appendLE(m, n, osz)
	off := 0
	for _, k := range e.keyList {
		m = appendLE(m, off, osz)
		off += len(k)
	}
	m = appendLE(m, off, osz)
	for _, k := range e.keyList {
		m = append(m, k...)
	}
	e.meta = m
	if d.st == nil {
		v, err := variant.New(m, e.built())
		if err != nil {
			return err
		}
		e.val = v
	}
	return nil
}

func appendLE(b []byte, v, size int) []byte {
	for i := range size {
		b = append(b, byte(v>>(8*i)))
	}
	return b
}

// put appends the sealed value to d.
func (e *variantEncoder) put(d *variantDst) {
	if d.st == nil {
		d.vb.Append(e.val)
		return
	}
	d.st.Append(true)
	d.meta.Append(e.meta)
	d.value.Append(e.built())
}

// built is the value built.
func (e *variantEncoder) built() []byte { return e.b.BuildWithoutMeta()[e.start:] }

// variantDst is a variant column's builder. An unshredded one is appended to
// through its storage builders (what VariantBuilder.Append does), without a
// variant.Value; a shredded one through VariantBuilder.Append, which shreds.
type variantDst struct {
	vb          *extensions.VariantBuilder
	st          *array.StructBuilder // nil: append through vb
	meta, value *array.BinaryBuilder
}

func newVariantDst(vb *extensions.VariantBuilder) variantDst {
	d := variantDst{vb: vb}
	vt, ok := vb.Type().(*extensions.VariantType)
	if !ok || vt.TypedValue().Type != nil {
		return d
	}
	stt, ok := vt.StorageType().(*arrow.StructType)
	st, ok2 := vb.StorageBuilder().(*array.StructBuilder)
	if !ok || !ok2 || stt.NumFields() != 2 {
		return d
	}
	mi, ok1 := stt.FieldIdx("metadata")
	vi, ok2 := stt.FieldIdx("value")
	if !ok1 || !ok2 {
		return d
	}
	mb, ok1 := st.FieldBuilder(mi).(*array.BinaryBuilder)
	vbb, ok2 := st.FieldBuilder(vi).(*array.BinaryBuilder)
	if ok1 && ok2 {
		d.st, d.meta, d.value = st, mb, vbb
	}
	return d
}

// appendNull appends a null row.
func (d *variantDst) appendNull() { d.vb.AppendNull() }

// appendValue appends a variant value built elsewhere.
func (d *variantDst) appendValue(v variant.Value) { d.vb.Append(v) }

var encoderPool = sync.Pool{New: func() any { return new(variantEncoder) }}

// VariantJSONOptions are the rules of AppendVariantJSONWithOptions for the
// JSON that a variant holds in more than one way, or not exactly. The zero
// value is AppendVariantJSON's rules.
type VariantJSONOptions struct {
	// LastKeyWins keeps the last value of a key given twice in one object, as
	// encoding/json, Postgres's jsonb and most JSON parsers do. Default false:
	// such a document is an error wrapping ErrInvalidJSON.
	LastKeyWins bool
	// ExactNumbers refuses a number that no variant type holds exactly, with an
	// error wrapping ErrInexactNumber (and ErrOutOfRange past a double's range,
	// 1e400): a number in exponent form, or of more than 38 significant digits,
	// is kept (as a double) only when the double nearest it prints back as the
	// same number (1e-7, 1.5e300 are kept; 1e-400, 12345678901234567890123456789012345678901
	// are refused). Default false: such a number is the double nearest it, and
	// only a number past a double's range is an error (ErrOutOfRange).
	ExactNumbers bool
}

// AppendVariantJSONWithOptions is AppendVariantJSON with the rules opts
// chooses for a key given twice and for numbers without an exact variant
// value. It is safe for concurrent use on distinct builders.
func AppendVariantJSONWithOptions(vb *extensions.VariantBuilder, doc []byte, opts VariantJSONOptions) error {
	e := encoderPool.Get().(*variantEncoder)
	defer encoderPool.Put(e)
	e.opts = opts
	defer func() { e.opts = VariantJSONOptions{} }()
	d := newVariantDst(vb)
	return e.appendJSON(&d, doc)
}

// AppendVariantJSON appends the JSON document doc (one value of any shape,
// with optional white space around it) to vb as one variant value: objects
// become variant objects (a key appearing twice in one object is an error),
// arrays variant arrays, strings strings, true/false booleans and null the
// variant null (not a null row: use vb.AppendNull for that). Numbers keep
// their JSON text exactly where a variant type can: an integer that fits
// int64 is the smallest of int8..int64, an integer or a number with a
// fraction and no exponent of at most 38 digits is the smallest of
// decimal4/8/16 with the number's scale (1.50 is decimal 150 scale 2), and
// any other number (an exponent, more digits) is the double nearest it. On
// error (invalid JSON, a key twice in one object or nesting deeper than 1000
// levels, wrapping ErrInvalidJSON; a number outside the double range,
// wrapping ErrOutOfRange) nothing is appended. AppendVariantJSONWithOptions
// chooses other rules for a key given twice and for numbers. It is safe for
// concurrent use on distinct builders.
func AppendVariantJSON(vb *extensions.VariantBuilder, doc []byte) error {
	e := encoderPool.Get().(*variantEncoder)
	defer encoderPool.Put(e)
	d := newVariantDst(vb)
	return e.appendJSON(&d, doc)
}

// AppendVariant appends the Go value v to vb as one variant value. A nil
// interface, nil pointer, nil map or nil slice (and json.RawMessage of length
// 0 and the zero variant.Value) is a null row (vb.AppendNull); inside v a nil
// is the variant null. json.RawMessage is parsed as AppendVariantJSON does,
// json.Number keeps its text as there, a variant.Value is copied; bool,
// integers (uint64 above MaxInt64 as decimal16), float32/64, string, []byte
// (binary), uuid.UUID, arrow.Date32 (date), time.Time (a UTC timestamp in
// microseconds, or in nanoseconds when it has a sub-microsecond part), maps
// with string or integer keys, slices, arrays and structs (fields named as
// struct columns are) follow. Another type (chan, func, complex) is an error
// wrapping ErrUnsupportedType, a time outside the timestamp range one
// wrapping ErrOutOfRange; the message names the path inside v. On error
// nothing is appended. It is safe for concurrent use on distinct builders.
func AppendVariant(vb *extensions.VariantBuilder, v any) error {
	e := encoderPool.Get().(*variantEncoder)
	defer encoderPool.Put(e)
	d := newVariantDst(vb)
	null, err := e.appendTop(&d, v)
	if err == nil && null {
		d.appendNull()
	}
	return err
}

// appendJSON builds doc and appends it to d.
func (e *variantEncoder) appendJSON(d *variantDst, doc []byte) error {
	err := e.buildJSON(doc, d)
	if err == nil {
		e.put(d)
	}
	e.reset()
	return err
}

// buildJSON builds and seals the JSON document doc for d.
func (e *variantEncoder) buildJSON(doc []byte, d *variantDst) error {
	e.begin()
	end, err := e.jsonValue(doc, skipSpace(doc, 0), 0)
	if err != nil {
		return err
	}
	if skipSpace(doc, end) != len(doc) {
		return syntaxErr(doc, end, "data after the value")
	}
	return e.seal(d)
}

// buildJSONAt builds and seals the JSON value starting at l[i] for d, and
// returns its end.
func (e *variantEncoder) buildJSONAt(l []byte, i int, d *variantDst) (int, error) {
	e.begin()
	end, err := e.jsonValue(l, i, 0)
	if err != nil {
		return end, err
	}
	return end, e.seal(d)
}

func (e *variantEncoder) fieldsAt(depth int) []variant.FieldEntry {
	for len(e.fields) <= depth {
		e.fields = append(e.fields, nil)
	}
	return e.fields[depth][:0]
}

func (e *variantEncoder) offsAt(depth int) []int {
	for len(e.offs) <= depth {
		e.offs = append(e.offs, nil)
	}
	return e.offs[depth][:0]
}

// jsonValue appends the JSON value starting at d[i] and returns its end. Keys
// without escapes are referenced in d until the builder is reset.
func (e *variantEncoder) jsonValue(d []byte, i, depth int) (int, error) {
	if i >= len(d) {
		return i, syntaxErr(d, i, "unexpected end")
	}
	switch c := d[i]; c {
	case '"':
		end, esc, err := scanString(d, i)
		if err != nil {
			return end, err
		}
		var s []byte
		s, e.str = unquote(d[i:end], esc, e.str)
		return end, e.b.AppendString(str(s))
	case '{':
		if depth >= maxDepth {
			return i, syntaxErr(d, i, "too deep")
		}
		start := e.b.Offset()
		fields := e.fieldsAt(depth)
		i = skipSpace(d, i+1)
		if i < len(d) && d[i] == '}' {
			return i + 1, e.b.FinishObject(start, fields)
		}
		for {
			if i >= len(d) || d[i] != '"' {
				return i, syntaxErr(d, i, "want object key")
			}
			kend, esc, err := scanString(d, i)
			if err != nil {
				return kend, err
			}
			var key string
			if esc {
				var k []byte
				k, e.str = unquote(d[i:kend], esc, e.str)
				key = string(k)
			} else {
				key = str(d[i+1 : kend-1])
			}
			i = skipSpace(d, kend)
			if i >= len(d) || d[i] != ':' {
				return i, syntaxErr(d, i, "want ':'")
			}
			fields = append(fields, e.field(start, key))
			if i, err = e.jsonValue(d, skipSpace(d, i+1), depth+1); err != nil {
				return i, err
			}
			more := false
			if i, more, err = nextElem(d, i, '}'); err != nil {
				return i, err
			} else if !more {
				break
			}
		}
		e.fields[depth] = fields
		err := e.b.FinishObject(start, fields)
		clear(fields)
		if err != nil { // a key twice
			return i, fmt.Errorf("%w before offset %d: %v", ErrInvalidJSON, i, err)
		}
		return i, nil
	case '[':
		if depth >= maxDepth {
			return i, syntaxErr(d, i, "too deep")
		}
		start := e.b.Offset()
		offs := e.offsAt(depth)
		i = skipSpace(d, i+1)
		if i < len(d) && d[i] == ']' {
			return i + 1, e.b.FinishArray(start, offs)
		}
		for {
			offs = append(offs, e.b.NextElement(start))
			var err error
			if i, err = e.jsonValue(d, i, depth+1); err != nil {
				return i, err
			}
			more := false
			if i, more, err = nextElem(d, i, ']'); err != nil {
				return i, err
			} else if !more {
				break
			}
		}
		e.offs[depth] = offs
		return i, e.b.FinishArray(start, offs)
	case 't':
		end, err := scanLit(d, i, "true")
		if err != nil {
			return end, err
		}
		return end, e.b.AppendBool(true)
	case 'f':
		end, err := scanLit(d, i, "false")
		if err != nil {
			return end, err
		}
		return end, e.b.AppendBool(false)
	case 'n':
		end, err := scanLit(d, i, "null")
		if err != nil {
			return end, err
		}
		return end, e.b.AppendNull()
	}
	if c := d[i]; c == '-' || isDigit(c) {
		end, err := scanNumber(d, i)
		if err != nil {
			return end, err
		}
		return end, e.appendNumber(d[i:end])
	}
	return i, syntaxErr(d, i, "unexpected character")
}

// appendNumber appends a validated JSON number token: an integer within
// int64 as an integer, an exact decimal of at most 38 digits (no exponent) as
// the smallest decimal, anything else as a double.
func (e *variantEncoder) appendNumber(t []byte) error {
	j := 0
	neg := t[0] == '-'
	if neg {
		j++
	}
	intStart := j
	for j < len(t) && isDigit(t[j]) {
		j++
	}
	intEnd, fracStart, fracEnd := j, j, j
	if j < len(t) && t[j] == '.' {
		fracStart = j + 1
		for j = fracStart; j < len(t) && isDigit(t[j]); j++ {
		}
		fracEnd = j
	}
	if j < len(t) { // an exponent
		return e.appendDouble(t)
	}
	// Significant digits of the unscaled value: leading zeros dropped.
	digits := make([]byte, 0, 40)
	for _, part := range [2][]byte{t[intStart:intEnd], t[fracStart:fracEnd]} {
		for _, c := range part {
			if len(digits) == 0 && c == '0' {
				continue
			}
			if len(digits) == 40 {
				return e.appendDouble(t)
			}
			digits = append(digits, c)
		}
	}
	scale := fracEnd - fracStart
	if scale == 0 && len(digits) <= 18 {
		return e.appendInt(signedDigits(digits, neg))
	}
	if scale == 0 {
		if v, err := strconv.ParseInt(str(t), 10, 64); err == nil {
			return e.appendInt(v)
		}
	}
	prec := max(len(digits), scale)
	switch {
	case prec <= 9:
		return e.appendFixed(variant.PrimitiveDecimal4, scale, uint64(signedDigits(digits, neg)), 4)
	case prec <= 18:
		return e.appendFixed(variant.PrimitiveDecimal8, scale, uint64(signedDigits(digits, neg)), 8)
	case prec <= 38:
		var n decimal128.Num
		ten := decimal128.FromU64(10)
		for _, c := range digits {
			n = n.Mul(ten).Add(decimal128.FromU64(uint64(c - '0')))
		}
		if neg {
			n = n.Negate()
		}
		return e.b.AppendDecimal16(uint8(scale), n)
	}
	return e.appendDouble(t)
}

// appendInt appends v as the smallest of int8..int64, as
// variant.Builder.AppendInt does.
func (e *variantEncoder) appendInt(v int64) error {
	switch {
	case v >= math.MinInt8 && v <= math.MaxInt8:
		return e.appendFixed(variant.PrimitiveInt8, -1, uint64(v), 1)
	case v >= math.MinInt16 && v <= math.MaxInt16:
		return e.appendFixed(variant.PrimitiveInt16, -1, uint64(v), 2)
	case v >= math.MinInt32 && v <= math.MaxInt32:
		return e.appendFixed(variant.PrimitiveInt32, -1, uint64(v), 4)
	}
	return e.appendFixed(variant.PrimitiveInt64, -1, uint64(v), 8)
}

// appendFixed appends a fixed-size primitive in the spec's encoding: the
// header (the primitive type, basic type 0), the scale byte of a decimal
// (scale >= 0), the value's low size bytes, little-endian. Builder's
// AppendInt and AppendDecimal4/8 encode the same bytes but through
// encoding/binary.Write, which allocates per value: numbers are most of a
// JSON document's values.
func (e *variantEncoder) appendFixed(t variant.PrimitiveType, scale int, v uint64, size int) error {
	var buf [10]byte
	buf[0] = byte(t) << 2
	n := 1
	if scale >= 0 {
		buf[1] = byte(scale)
		n = 2
	}
	binary.LittleEndian.PutUint64(buf[n:], v)
	return e.b.UnsafeAppendEncoded(buf[:n+size])
}

// signedDigits is the value of at most 18 decimal digits.
func signedDigits(digits []byte, neg bool) int64 {
	var v int64
	for _, c := range digits {
		v = v*10 + int64(c-'0')
	}
	if neg {
		v = -v
	}
	return v
}

// appendDouble appends the number t, which no integer or decimal holds, as
// the double nearest it; with ExactNumbers only when that double prints back
// as t's number.
func (e *variantEncoder) appendDouble(t []byte) error {
	f, err := strconv.ParseFloat(str(t), 64)
	if err != nil {
		if e.opts.ExactNumbers {
			return fmt.Errorf("number %s does not fit a double: %w (%w)", t, ErrOutOfRange, ErrInexactNumber)
		}
		return fmt.Errorf("number %s does not fit a double: %w", t, ErrOutOfRange)
	}
	if e.opts.ExactNumbers {
		var buf [32]byte
		if !sameNumber(t, strconv.AppendFloat(buf[:0], f, 'e', -1, 64), e.str) {
			return fmt.Errorf("number %s: %w (the nearest double is %g)", t, ErrInexactNumber, f)
		}
	}
	return e.b.AppendFloat64(f)
}

// sameNumber reports whether the JSON numbers a and b (valid number tokens)
// have the same value: the same sign and significant digits at the same
// powers of ten. -0 and 0 are the same. buf is scratch space.
func sameNumber(a, b, buf []byte) bool {
	da, ea, na := decimalForm(a, buf[:0])
	db, eb, nb := decimalForm(b, da[len(da):])
	if len(da) == 0 || len(db) == 0 {
		return len(da) == len(db)
	}
	return na == nb && ea == eb && string(da) == string(db)
}

// decimalForm is the value of the JSON number token t as digits × 10^exp
// (digits without leading or trailing zeros, appended to buf; none for zero)
// and its sign. The exponent is clamped far past a double's range.
func decimalForm(t, buf []byte) (digits []byte, exp int, neg bool) {
	i := 0
	if t[0] == '-' {
		neg = true
		i++
	}
	frac := false
	for ; i < len(t) && t[i] != 'e' && t[i] != 'E'; i++ {
		switch c := t[i]; {
		case c == '.':
			frac = true
		case c == '0' && len(buf) == 0: // a leading zero
			if frac {
				exp--
			}
		default:
			buf = append(buf, c)
			if frac {
				exp--
			}
		}
	}
	if i < len(t) { // the exponent
		i++
		eneg := false
		if t[i] == '+' || t[i] == '-' {
			eneg = t[i] == '-'
			i++
		}
		x := 0
		for ; i < len(t); i++ {
			x = min(x*10+int(t[i]-'0'), 1<<30)
		}
		if eneg {
			x = -x
		}
		exp += x
	}
	n := len(buf)
	for n > 0 && buf[n-1] == '0' {
		n--
		exp++
	}
	return buf[:n], exp, neg
}

// variantNull reports the Go values that are a null row in a variant column:
// nil, a nil pointer, map, slice or interface, an empty json.RawMessage and
// the zero variant.Value.
func variantNull(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case json.RawMessage:
		return len(x) == 0
	case variant.Value:
		return x.Bytes() == nil
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Interface:
		return rv.IsNil()
	}
	return false
}

// appendTop appends the Go value v to d; null reports a null row (nothing
// appended: the caller decides whether the column takes it).
func (e *variantEncoder) appendTop(d *variantDst, v any) (null bool, err error) {
	if variantNull(v) {
		return true, nil
	}
	if x, ok := v.(variant.Value); ok {
		d.appendValue(x)
		return false, nil
	}
	err = e.build(v, d)
	if err == nil {
		e.put(d)
	}
	e.reset()
	return false, err
}

// build builds and seals the Go value v (JSON text for a json.RawMessage)
// for d.
func (e *variantEncoder) build(v any, d *variantDst) error {
	if raw, ok := v.(json.RawMessage); ok {
		return e.buildJSON(raw, d)
	}
	e.begin()
	if err := e.goValue(v, 0); err != nil {
		return err
	}
	return e.seal(d)
}

// variantConv converts map values (Maps, nested JSON lines columns) into a
// variant column.
type variantConv struct {
	col string
	ok  bool
	d   variantDst
	enc variantEncoder
}

func (c *variantConv) conv(v any, dry bool) error {
	if variantNull(v) {
		if !c.ok {
			return rowErr(c.col, -1, ErrNull)
		}
		if !dry {
			c.d.appendNull()
		}
		return nil
	}
	var err error
	if dry {
		err = c.enc.build(v, &c.d)
		c.enc.reset()
	} else {
		_, err = c.enc.appendTop(&c.d, v)
	}
	if err != nil {
		return rowErr(c.col, -1, err)
	}
	return nil
}

// pathErr prefixes err with a step of the path inside a value.
type pathErr struct {
	path string
	err  error
}

func (p *pathErr) Error() string { return "at " + p.path + ": " + p.err.Error() }
func (p *pathErr) Unwrap() error { return p.err }

func atPath(step string, err error) error {
	if pe, ok := err.(*pathErr); ok {
		if len(pe.path) > 0 && pe.path[0] == '[' {
			pe.path = step + pe.path
		} else {
			pe.path = step + "." + pe.path
		}
		return pe
	}
	return &pathErr{path: step, err: err}
}

// goValue appends the Go value v (nil is the variant null).
func (e *variantEncoder) goValue(v any, depth int) error {
	if depth >= maxDepth {
		return fmt.Errorf("nested more than %d levels (a cycle?): %w", maxDepth, ErrUnsupportedType)
	}
	switch x := v.(type) {
	case nil:
		return e.b.AppendNull()
	case string:
		return e.b.AppendString(x)
	case bool:
		return e.b.AppendBool(x)
	case int:
		return e.b.AppendInt(int64(x))
	case int64:
		return e.b.AppendInt(x)
	case int32:
		return e.b.AppendInt(int64(x))
	case float64:
		return e.b.AppendFloat64(x)
	case float32:
		return e.b.AppendFloat32(x)
	case json.Number:
		t := []byte(x)
		if end, err := scanNumber(t, 0); err != nil || end != len(t) || len(t) == 0 {
			return fmt.Errorf("json.Number %q is not a number: %w", string(x), ErrInvalidJSON)
		}
		return e.appendNumber(t)
	case map[string]any:
		start := e.b.Offset()
		fields := make([]variant.FieldEntry, 0, len(x))
		for k, item := range x {
			fields = append(fields, e.field(start, k))
			if err := e.goValue(item, depth+1); err != nil {
				return atPath(k, err)
			}
		}
		return e.b.FinishObject(start, fields)
	case []any:
		start := e.b.Offset()
		offs := make([]int, 0, len(x))
		for i, item := range x {
			offs = append(offs, e.b.NextElement(start))
			if err := e.goValue(item, depth+1); err != nil {
				return atPath("["+strconv.Itoa(i)+"]", err)
			}
		}
		return e.b.FinishArray(start, offs)
	case []byte:
		if x == nil {
			return e.b.AppendNull()
		}
		return e.b.AppendBinary(x)
	case json.RawMessage:
		if len(x) == 0 {
			return e.b.AppendNull()
		}
		if _, err := e.jsonValueAll(x, depth); err != nil {
			return err
		}
		return nil
	case variant.Value:
		if x.Bytes() == nil {
			return e.b.AppendNull()
		}
		return e.copyValue(x, depth)
	case time.Time:
		return e.appendTime(x)
	case uuid.UUID:
		return e.b.AppendUUID(x)
	case arrow.Date32:
		return e.b.AppendDate(x)
	case variant.DecimalValue[decimal.Decimal32], variant.DecimalValue[decimal.Decimal64],
		variant.DecimalValue[decimal.Decimal128]:
		return e.b.Append(x)
	case uint64:
		return e.appendUint(x)
	case uint:
		return e.appendUint(uint64(x))
	}
	return e.reflectValue(reflect.ValueOf(v), depth)
}

// jsonValueAll appends JSON text that must hold exactly one value.
func (e *variantEncoder) jsonValueAll(d []byte, depth int) (int, error) {
	end, err := e.jsonValue(d, skipSpace(d, 0), depth)
	if err != nil {
		return end, err
	}
	if skipSpace(d, end) != len(d) {
		return end, syntaxErr(d, end, "data after the value")
	}
	return end, nil
}

func (e *variantEncoder) appendUint(u uint64) error {
	if u <= math.MaxInt64 {
		return e.b.AppendInt(int64(u))
	}
	return e.b.AppendDecimal16(0, decimal128.FromU64(u))
}

// appendTime appends t as a UTC timestamp: microseconds when exact, else
// nanoseconds.
func (e *variantEncoder) appendTime(t time.Time) error {
	if t.Nanosecond()%1000 == 0 {
		us, err := timeTo(t, arrow.Microsecond)
		if err != nil {
			return err
		}
		return e.b.AppendTimestamp(arrow.Timestamp(us), true, true)
	}
	ns, err := timeTo(t, arrow.Nanosecond)
	if err != nil {
		return err
	}
	return e.b.AppendTimestamp(arrow.Timestamp(ns), false, true)
}

// copyValue appends a variant value built elsewhere: its keys go into this
// builder's dictionary.
func (e *variantEncoder) copyValue(v variant.Value, depth int) error {
	switch v.BasicType() {
	case variant.BasicObject:
		obj := v.Value().(variant.ObjectValue)
		start := e.b.Offset()
		fields := make([]variant.FieldEntry, 0, obj.NumElements())
		for i := range obj.NumElements() {
			f, err := obj.FieldAt(i)
			if err != nil {
				return err
			}
			fields = append(fields, e.field(start, f.Key))
			if err := e.copyValue(f.Value, depth+1); err != nil {
				return atPath(f.Key, err)
			}
		}
		return e.b.FinishObject(start, fields)
	case variant.BasicArray:
		arr := v.Value().(variant.ArrayValue)
		start := e.b.Offset()
		offs := make([]int, 0, arr.Len())
		for i := range arr.Len() {
			el, err := arr.Value(i)
			if err != nil {
				return err
			}
			offs = append(offs, e.b.NextElement(start))
			if err := e.copyValue(el, depth+1); err != nil {
				return atPath("["+strconv.Itoa(int(i))+"]", err)
			}
		}
		return e.b.FinishArray(start, offs)
	}
	// A primitive's encoding refers to no key.
	return e.b.UnsafeAppendEncoded(v.Bytes())
}

// reflectValue appends the Go values the type switch of goValue does not name.
func (e *variantEncoder) reflectValue(rv reflect.Value, depth int) error {
	switch rv.Kind() {
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return e.b.AppendNull()
		}
		return e.goValue(rv.Elem().Interface(), depth+1)
	case reflect.Bool:
		return e.b.AppendBool(rv.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return e.b.AppendInt(rv.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return e.appendUint(rv.Uint())
	case reflect.Float32:
		return e.b.AppendFloat32(float32(rv.Float()))
	case reflect.Float64:
		return e.b.AppendFloat64(rv.Float())
	case reflect.String:
		return e.b.AppendString(rv.String())
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			return e.b.AppendNull()
		}
		if rv.Type().Elem().Kind() == reflect.Uint8 {
			b := make([]byte, rv.Len())
			reflect.Copy(reflect.ValueOf(b), rv)
			return e.b.AppendBinary(b)
		}
		start := e.b.Offset()
		offs := make([]int, 0, rv.Len())
		for i := range rv.Len() {
			offs = append(offs, e.b.NextElement(start))
			if err := e.goValue(rv.Index(i).Interface(), depth+1); err != nil {
				return atPath("["+strconv.Itoa(i)+"]", err)
			}
		}
		return e.b.FinishArray(start, offs)
	case reflect.Map:
		if rv.IsNil() {
			return e.b.AppendNull()
		}
		kt := rv.Type().Key()
		if kt.Kind() != reflect.String && !isIntKind(kt.Kind()) {
			return fmt.Errorf("map key type %v: %w (want string or integer keys)", kt, ErrUnsupportedType)
		}
		start := e.b.Offset()
		fields := make([]variant.FieldEntry, 0, rv.Len())
		for it := rv.MapRange(); it.Next(); {
			k := it.Key()
			var key string
			switch {
			case kt.Kind() == reflect.String:
				key = k.String()
			case k.CanInt():
				key = strconv.FormatInt(k.Int(), 10)
			default:
				key = strconv.FormatUint(k.Uint(), 10)
			}
			fields = append(fields, e.field(start, key))
			if err := e.goValue(it.Value().Interface(), depth+1); err != nil {
				return atPath(key, err)
			}
		}
		return e.b.FinishObject(start, fields)
	case reflect.Struct:
		t := rv.Type()
		if _, _, ok := sqlNullParts(t); ok {
			if !rv.Field(1).Bool() {
				return e.b.AppendNull()
			}
			return e.goValue(rv.Field(0).Interface(), depth+1)
		}
		if t == decimalType {
			return fmt.Errorf("decimal128.Num has no scale (use variant.DecimalValue): %w", ErrUnsupportedType)
		}
		sp, err := planFor(t)
		if err != nil {
			return err
		}
		start := e.b.Offset()
		fields := make([]variant.FieldEntry, 0, len(sp.fields))
		for _, gf := range sp.fields {
			fv, err := rv.FieldByIndexErr(gf.index)
			if err != nil || !fv.CanInterface() { // through a nil embedded pointer: the field is absent
				continue
			}
			fields = append(fields, e.field(start, gf.name))
			if err := e.goValue(fv.Interface(), depth+1); err != nil {
				return atPath(gf.name, err)
			}
		}
		return e.b.FinishObject(start, fields)
	}
	return fmt.Errorf("%v is not representable in a variant: %w", rv.Type(), ErrUnsupportedType)
}

// Kinds of Go values a variantEnc reads.
const (
	variantFromGo    = iota // any other Go value, boxed
	variantFromJSON         // json.RawMessage
	variantFromValue        // variant.Value
)

// variantEnc writes a struct field of any Go type into a variant column (see
// AppendVariant for the mapping and what is a null row).
type variantEnc struct {
	t        reflect.Type
	ws       []wrapper
	from     int
	d        variantDst
	nullable bool
	col      string
	enc      variantEncoder
}

func newVariantEnc(t reflect.Type, ws []wrapper, col string, nullable bool, vb *extensions.VariantBuilder) encoder {
	e := &variantEnc{t: t, ws: ws, d: newVariantDst(vb), nullable: nullable, col: col}
	switch t {
	case rawMessageType:
		e.from = variantFromJSON
	case variantValueType:
		e.from = variantFromValue
	}
	return e
}

func (e *variantEnc) encode(base unsafe.Pointer, stride uintptr, n int) error {
	for i := 0; i < n; i++ {
		p := unsafe.Add(base, uintptr(i)*stride)
		if len(e.ws) > 0 {
			p = resolve(e.ws, p)
		}
		null := p == nil
		var err error
		if !null {
			switch e.from {
			case variantFromJSON:
				if raw := *(*[]byte)(p); len(raw) == 0 {
					null = true
				} else {
					err = e.enc.appendJSON(&e.d, raw)
				}
			case variantFromValue:
				if v := *(*variant.Value)(p); v.Bytes() == nil {
					null = true
				} else {
					e.d.appendValue(v)
				}
			default:
				null, err = e.enc.appendTop(&e.d, reflect.NewAt(e.t, p).Elem().Interface())
			}
		}
		if err != nil {
			return rowErr(e.col, i, err)
		}
		if null {
			if !e.nullable {
				return rowErr(e.col, i, ErrNull)
			}
			e.d.appendNull()
		}
	}
	return nil
}
