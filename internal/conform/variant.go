package conform

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/parquet/variant"
)

// checkVariants returns a *ColumnError (row-level, so a dead letter handler can take the row) for the first data
// slot of va (mask as Convert takes it) whose variant does not decode: metadata or value bytes that are not a
// variant would be written as they are and fail every reader of the file. A plain variant goes through
// variantCheck (faster than arrow-go's validation: BenchmarkVariantCheckPair, docs/benchmarks.md), and through
// arrow-go only when that does not accept it: arrow-go then refuses it, with its reason, or accepts what
// variantCheck does not follow.
func checkVariants(path []string, va *extensions.VariantArray, mask []byte) error {
	metas, values, plain := plainVariant(va)
	var prev []byte // the metadata bytes meta was parsed from: rows of one source usually share them
	var meta variant.Metadata
	var fast variantCheck
	for i := range va.Len() {
		if va.Storage().IsNull(i) || (mask != nil && !bitutil.BitIsSet(mask, i)) {
			continue
		}
		err := func() (err error) {
			defer func() { // arrow-go's reader panics on some bytes: a refused row, never a crashed Write
				if r := recover(); r != nil {
					prev, err = nil, fmt.Errorf("the variant reader panicked: %v", r)
				}
			}()
			switch {
			case !plain:
				_, err = va.Value(i)
			case values.IsNull(i):
			case fast.valid(metas.Value(i), values.Value(i)):
			default: // invalid, or beyond what fast checks: arrow-go decides, and says why
				m := metas.Value(i)
				if prev == nil || !bytes.Equal(m, prev) {
					if meta, err = variant.NewMetadata(m); err == nil {
						prev = m
					}
				}
				if err == nil {
					_, err = variant.NewWithMetadata(meta, values.Value(i))
				}
			}
			return err
		}()
		if err != nil {
			return rowErr(path, false, ErrTypeMismatch, "row %d is not a valid variant: %v", i, err)
		}
	}
	return nil
}

// plainVariant returns the metadata and value columns of an unshredded variant array whose columns are plain
// binary (ok false otherwise: the array's own reader decodes it).
func plainVariant(va *extensions.VariantArray) (metas, values arrow.TypedArray[[]byte], ok bool) {
	if va.IsShredded() {
		return nil, nil, false
	}
	st := va.Storage().(*array.Struct)
	stt := st.DataType().(*arrow.StructType)
	mi, okm := stt.FieldIdx("metadata")
	vi, okv := stt.FieldIdx("value")
	if !okm || !okv {
		return nil, nil, false
	}
	metas, okm = st.Field(mi).(arrow.TypedArray[[]byte])
	values, okv = st.Field(vi).(arrow.TypedArray[[]byte])
	return metas, values, okm && okv
}

// variantCheck validates plain variants (metadata and value bytes) by the rules of arrow-go v18.9.0's
// variant.New, without what makes that slower: a Metadata with its keys allocated per distinct dictionary and
// a generic validation stack. valid reports true only when every rule
// arrow-go checks holds (FuzzVariantCheck compares the two); false means invalid or not checked here (nesting
// deeper than fastDepth), and the caller asks arrow-go. Not safe for concurrent use.
type variantCheck struct {
	meta   []byte // the metadata last validated, and its dictionary:
	osz    uint64 // offset size
	n      uint64 // number of keys
	start  uint64 // where the key bytes begin
	ranges []fieldRange
}

// fieldRange is where an object's field value lies in its data.
type fieldRange struct{ start, end uint64 }

// fastDepth is the nesting variantCheck follows; deeper values go to arrow-go (which allows 1024).
const fastDepth = 64

func (c *variantCheck) valid(meta, value []byte) bool {
	if c.meta == nil || !bytes.Equal(meta, c.meta) {
		c.meta = nil
		if !c.loadMeta(meta) {
			return false
		}
		c.meta = meta
	}
	size, ok := c.value(value, 0)
	return ok && size == uint64(len(value))
}

// le is the little-endian unsigned integer of b (1 to 4 bytes).
func le(b []byte) uint64 {
	var v uint64
	for i := len(b) - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

// loadMeta validates metadata as variant.NewMetadata does: version 1, the dictionary's offsets starting at 0,
// monotonic and within the bytes.
func (c *variantCheck) loadMeta(m []byte) bool {
	if len(m) < 3 || m[0]&0x0f != 1 {
		return false
	}
	osz := uint64(m[0]>>6&3) + 1
	if 1+osz > uint64(len(m)) {
		return false
	}
	n := le(m[1 : 1+osz])
	c.osz, c.n = osz, n
	if n == 0 {
		return true
	}
	c.start = 1 + (n+2)*osz
	if c.start > uint64(len(m)) || le(m[1+osz:1+2*osz]) != 0 {
		return false
	}
	prev := uint64(0)
	for i := uint64(1); i <= n; i++ {
		pos := 1 + (i+1)*osz
		end := le(m[pos : pos+osz])
		if end < prev || c.start+end > uint64(len(m)) {
			return false
		}
		prev = end
	}
	return true
}

// key is the dictionary's key id (id < c.n).
func (c *variantCheck) key(id uint64) []byte {
	pos := 1 + (id+1)*c.osz
	return c.meta[c.start+le(c.meta[pos:pos+c.osz]) : c.start+le(c.meta[pos+c.osz:pos+2*c.osz])]
}

// primitiveSizes are the sizes of the fixed-size primitive types, by type id (0: not fixed-size or unknown).
var primitiveSizes = [...]uint64{
	variant.PrimitiveNull: 1, variant.PrimitiveBoolTrue: 1, variant.PrimitiveBoolFalse: 1,
	variant.PrimitiveInt8: 2, variant.PrimitiveInt16: 3, variant.PrimitiveInt32: 5, variant.PrimitiveInt64: 9,
	variant.PrimitiveDouble: 9, variant.PrimitiveDecimal4: 6, variant.PrimitiveDecimal8: 10,
	variant.PrimitiveDecimal16: 18, variant.PrimitiveDate: 5, variant.PrimitiveTimestampMicros: 9,
	variant.PrimitiveTimestampMicrosNTZ: 9, variant.PrimitiveFloat: 5, variant.PrimitiveTimeMicrosNTZ: 9,
	variant.PrimitiveTimestampNanos: 9, variant.PrimitiveTimestampNanosNTZ: 9, variant.PrimitiveUUID: 17,
}

// value validates the value at the start of v (which may go on past it) and returns its size.
func (c *variantCheck) value(v []byte, depth int) (uint64, bool) {
	if len(v) == 0 {
		return 0, false
	}
	switch h := v[0]; h & 3 {
	case 0: // primitive
		switch t := variant.PrimitiveType(h >> 2); {
		case t == variant.PrimitiveString || t == variant.PrimitiveBinary:
			if len(v) < 5 {
				return 0, false
			}
			size := 5 + le(v[1:5])
			return size, size <= uint64(len(v))
		case int(t) < len(primitiveSizes) && primitiveSizes[t] != 0:
			size := primitiveSizes[t]
			return size, size <= uint64(len(v))
		}
		return 0, false
	case 1: // short string
		size := 1 + uint64(h>>2)
		return size, size <= uint64(len(v))
	case 2:
		if depth >= fastDepth {
			return 0, false
		}
		return c.object(v, depth)
	default:
		if depth >= fastDepth {
			return 0, false
		}
		return c.array(v, depth)
	}
}

// array validates an array: offsets from 0, monotonic, within v, each element exactly filling its slot.
func (c *variantCheck) array(v []byte, depth int) (uint64, bool) {
	info := uint64(v[0] >> 2)
	osz := info&3 + 1
	var n, offStart uint64
	if info>>2&1 != 0 {
		if len(v) < 5 {
			return 0, false
		}
		n, offStart = le(v[1:5]), 5
	} else {
		if len(v) < 2 {
			return 0, false
		}
		n, offStart = uint64(v[1]), 2
	}
	dataStart := offStart + (n+1)*osz
	if dataStart > uint64(len(v)) || le(v[offStart:offStart+osz]) != 0 {
		return 0, false
	}
	prev := uint64(0)
	for i := uint64(1); i <= n; i++ {
		pos := offStart + i*osz
		off := le(v[pos : pos+osz])
		if off < prev || dataStart+off > uint64(len(v)) {
			return 0, false
		}
		elem := v[dataStart+prev : dataStart+off]
		if size, ok := c.value(elem, depth+1); !ok || size != uint64(len(elem)) {
			return 0, false
		}
		prev = off
	}
	return dataStart + prev, true
}

// object validates an object: field ids in the dictionary, keys strictly sorted, offsets within the data, and
// the field values covering the data exactly, without gaps or overlaps. Each value is validated within the
// bytes up to the next field's (as arrow-go's contiguity rule makes it), so that fields sharing bytes are
// refused before those bytes are validated once per field.
func (c *variantCheck) object(v []byte, depth int) (uint64, bool) {
	info := uint64(v[0] >> 2)
	osz, idSize := info&3+1, info>>2&3+1
	elem := uint64(1)
	if info>>4&1 != 0 {
		elem = 4
	}
	if uint64(len(v)) < 1+elem {
		return 0, false
	}
	n := le(v[1 : 1+elem])
	idStart := 1 + elem
	offStart := idStart + n*idSize
	dataStart := offStart + (n+1)*osz
	if dataStart > uint64(len(v)) {
		return 0, false
	}
	dataSize := le(v[offStart+n*osz : dataStart])
	if dataStart+dataSize > uint64(len(v)) {
		return 0, false
	}
	data := v[dataStart : dataStart+dataSize]
	base := len(c.ranges)
	defer func() { c.ranges = c.ranges[:base] }()
	var prevKey []byte
	inOrder := true // the values lie in field order
	for i := range n {
		id := le(v[idStart+i*idSize : idStart+(i+1)*idSize])
		if id >= c.n {
			return 0, false
		}
		k := c.key(id)
		if i > 0 && bytes.Compare(prevKey, k) >= 0 {
			return 0, false
		}
		prevKey = k
		off := le(v[offStart+i*osz : offStart+(i+1)*osz])
		if off > dataSize {
			return 0, false
		}
		if i > 0 && off < c.ranges[len(c.ranges)-1].start {
			inOrder = false
		}
		c.ranges = append(c.ranges, fieldRange{start: off})
	}
	rs := c.ranges[base:]
	if !inOrder {
		slices.SortFunc(rs, func(a, b fieldRange) int { return cmp.Compare(a.start, b.start) })
	}
	next := uint64(0)
	for j, r := range rs {
		end := dataSize
		if j+1 < len(rs) {
			end = rs[j+1].start
		}
		if r.start != next || end <= r.start {
			return 0, false
		}
		field := data[r.start:end]
		if size, ok := c.value(field, depth+1); !ok || size != uint64(len(field)) {
			return 0, false
		}
		next = end
	}
	return dataStart + dataSize, next == dataSize
}
