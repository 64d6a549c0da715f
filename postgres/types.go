package postgres

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/extensions"
)

// ErrUnsupportedType is wrapped by the error for a column whose Postgres type has no Iceberg mapping. The
// error names the table and the column, and is returned before the snapshot starts.
var ErrUnsupportedType = errors.New("postgres: column type has no Iceberg mapping")

// Built-in type OIDs (pg_type.dat).
const (
	oidBool        = 16
	oidBytea       = 17
	oidChar        = 18
	oidName        = 19
	oidInt8        = 20
	oidInt2        = 21
	oidInt4        = 23
	oidText        = 25
	oidOID         = 26
	oidJSON        = 114
	oidFloat4      = 700
	oidFloat8      = 701
	oidBPChar      = 1042
	oidVarchar     = 1043
	oidDate        = 1082
	oidTime        = 1083
	oidTimestamp   = 1114
	oidTimestamptz = 1184
	oidNumeric     = 1700
	oidUUID        = 2950
	oidJSONB       = 3802
)

// pgType is what the mapping needs to know of a Postgres type: its OID and, for types that are not built in,
// its kind (pg_type.typtype: 'e' enum, 'd' domain, 'b' base with typelem for arrays), element and base types.
type pgType struct {
	OID      uint32
	Name     string
	Kind     byte   // typtype
	Category byte   // typcategory ('A' for arrays)
	Elem     uint32 // array element type
	Base     uint32 // domain base type
	BaseMod  int32  // domain base type modifier
}

// typeLookup finds a type that is not built in (enums, domains, arrays) in the source's catalog.
type typeLookup func(ctx context.Context, oid uint32) (pgType, error)

// Mapping of unconstrained numeric (numeric without a precision): Iceberg decimals need one, and 38 digits is
// the most Parquet's 16-byte decimals hold.
const (
	// DefaultNumericPrecision and DefaultNumericScale are the decimal an unconstrained numeric column maps to
	// (Config.NumericPrecision, Config.NumericScale): decimal(38, 18). A value that does not fit (more than 20
	// integer digits, more than 18 fractional digits) is an error naming the column, never rounded.
	DefaultNumericPrecision = 38
	DefaultNumericScale     = 18
)

// colType is a column's mapping: its Arrow type (the Iceberg type follows from it) and the decoder of its
// binary wire format (COPY BINARY and pgoutput's binary mode share it).
type colType struct {
	arrow arrow.DataType
	// append decodes one value (Postgres binary format) into b, whose type is arrow.
	append func(b array.Builder, v []byte) error
}

// typeMapper maps Postgres types to Arrow types and decoders.
type typeMapper struct {
	lookup            typeLookup
	numPrec, numScale int32
}

// mapType maps a column's type (OID and atttypmod). The error wraps ErrUnsupportedType and names the type.
func (m *typeMapper) mapType(ctx context.Context, oid uint32, typmod int32) (colType, error) {
	switch oid {
	case oidBool:
		return colType{arrow.FixedWidthTypes.Boolean, appendBool}, nil
	case oidInt2:
		return colType{arrow.PrimitiveTypes.Int32, appendInt2}, nil
	case oidInt4:
		return colType{arrow.PrimitiveTypes.Int32, appendInt4}, nil
	case oidInt8:
		return colType{arrow.PrimitiveTypes.Int64, appendInt8}, nil
	case oidOID:
		return colType{arrow.PrimitiveTypes.Int64, appendOID}, nil
	case oidFloat4:
		return colType{arrow.PrimitiveTypes.Float32, appendFloat4}, nil
	case oidFloat8:
		return colType{arrow.PrimitiveTypes.Float64, appendFloat8}, nil
	case oidText, oidVarchar, oidBPChar, oidName, oidChar, oidJSON:
		return colType{arrow.BinaryTypes.String, appendText}, nil
	case oidJSONB:
		return colType{arrow.BinaryTypes.String, appendJSONB}, nil
	case oidBytea:
		return colType{arrow.BinaryTypes.Binary, appendBytea}, nil
	case oidUUID:
		return colType{extensions.NewUUIDType(), appendUUID}, nil
	case oidDate:
		return colType{arrow.FixedWidthTypes.Date32, appendDate}, nil
	case oidTime:
		return colType{arrow.FixedWidthTypes.Time64us, appendTime}, nil
	case oidTimestamp:
		return colType{&arrow.TimestampType{Unit: arrow.Microsecond}, appendTimestamp}, nil
	case oidTimestamptz:
		return colType{&arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, appendTimestamp}, nil
	case oidNumeric:
		p, s := m.numPrec, m.numScale
		if typmod >= 4 { // numeric(p,s): typmod = ((p << 16) | s) + VARHDRSZ
			p, s = int32((typmod-4)>>16)&0xffff, int32(typmod-4)&0x7ff
			if s > 1023 { // negative scales (PG 15) are stored as 11-bit two's complement
				s -= 2048
			}
			if s < 0 || p > 38 {
				return colType{}, fmt.Errorf("%w: numeric(%d,%d) (Iceberg decimals take precision <= 38, scale >= 0)",
					ErrUnsupportedType, p, s)
			}
		}
		dt := &arrow.Decimal128Type{Precision: p, Scale: s}
		return colType{dt, func(b array.Builder, v []byte) error { return appendNumeric(b, v, dt) }}, nil
	}
	if m.lookup == nil {
		return colType{}, fmt.Errorf("%w: type oid %d", ErrUnsupportedType, oid)
	}
	t, err := m.lookup(ctx, oid)
	if err != nil {
		return colType{}, err
	}
	switch {
	case t.Kind == 'e': // enum: its binary form is its label
		return colType{arrow.BinaryTypes.String, appendText}, nil
	case t.Kind == 'd': // domain: the base type's wire format
		mod := typmod
		if t.BaseMod >= 0 {
			mod = t.BaseMod
		}
		return m.mapType(ctx, t.Base, mod)
	case t.Category == 'A' && t.Elem != 0:
		el, err := m.mapType(ctx, t.Elem, typmod)
		if err != nil {
			return colType{}, fmt.Errorf("array of %w", err)
		}
		if _, nested := el.arrow.(*arrow.ListType); nested {
			return colType{}, fmt.Errorf("%w: %s (nested arrays)", ErrUnsupportedType, t.Name)
		}
		lt := arrow.ListOf(el.arrow)
		return colType{lt, func(b array.Builder, v []byte) error { return appendArray(b, v, el.append) }}, nil
	}
	return colType{}, fmt.Errorf("%w: %s", ErrUnsupportedType, t.Name)
}

func need(v []byte, n int, what string) error {
	if len(v) != n {
		return fmt.Errorf("%s: %d bytes, want %d", what, len(v), n)
	}
	return nil
}

func appendBool(b array.Builder, v []byte) error {
	if err := need(v, 1, "bool"); err != nil {
		return err
	}
	b.(*array.BooleanBuilder).Append(v[0] != 0)
	return nil
}

func appendInt2(b array.Builder, v []byte) error {
	if err := need(v, 2, "int2"); err != nil {
		return err
	}
	b.(*array.Int32Builder).Append(int32(int16(binary.BigEndian.Uint16(v))))
	return nil
}

func appendInt4(b array.Builder, v []byte) error {
	if err := need(v, 4, "int4"); err != nil {
		return err
	}
	b.(*array.Int32Builder).Append(int32(binary.BigEndian.Uint32(v)))
	return nil
}

func appendInt8(b array.Builder, v []byte) error {
	if err := need(v, 8, "int8"); err != nil {
		return err
	}
	b.(*array.Int64Builder).Append(int64(binary.BigEndian.Uint64(v)))
	return nil
}

func appendOID(b array.Builder, v []byte) error {
	if err := need(v, 4, "oid"); err != nil {
		return err
	}
	b.(*array.Int64Builder).Append(int64(binary.BigEndian.Uint32(v)))
	return nil
}

func appendFloat4(b array.Builder, v []byte) error {
	if err := need(v, 4, "float4"); err != nil {
		return err
	}
	b.(*array.Float32Builder).Append(math.Float32frombits(binary.BigEndian.Uint32(v)))
	return nil
}

func appendFloat8(b array.Builder, v []byte) error {
	if err := need(v, 8, "float8"); err != nil {
		return err
	}
	b.(*array.Float64Builder).Append(math.Float64frombits(binary.BigEndian.Uint64(v)))
	return nil
}

func appendText(b array.Builder, v []byte) error {
	b.(*array.StringBuilder).BinaryBuilder.Append(v)
	return nil
}

func appendJSONB(b array.Builder, v []byte) error {
	if len(v) == 0 || v[0] != 1 {
		return fmt.Errorf("jsonb: unknown binary format version")
	}
	b.(*array.StringBuilder).BinaryBuilder.Append(v[1:])
	return nil
}

func appendBytea(b array.Builder, v []byte) error {
	b.(*array.BinaryBuilder).Append(v)
	return nil
}

func appendUUID(b array.Builder, v []byte) error {
	if err := need(v, 16, "uuid"); err != nil {
		return err
	}
	b.(*extensions.UUIDBuilder).AppendBytes([16]byte(v))
	return nil
}

// Postgres counts dates and timestamps from 2000-01-01; Arrow from 1970-01-01.
const (
	pgEpochDays   = 10957
	pgEpochMicros = pgEpochDays * 86400 * 1_000_000
)

func appendDate(b array.Builder, v []byte) error {
	if err := need(v, 4, "date"); err != nil {
		return err
	}
	d := int32(binary.BigEndian.Uint32(v))
	if d == math.MaxInt32 || d == math.MinInt32 {
		return fmt.Errorf("date: infinity has no Iceberg value")
	}
	b.(*array.Date32Builder).Append(arrow.Date32(d + pgEpochDays))
	return nil
}

func appendTime(b array.Builder, v []byte) error {
	if err := need(v, 8, "time"); err != nil {
		return err
	}
	b.(*array.Time64Builder).Append(arrow.Time64(int64(binary.BigEndian.Uint64(v))))
	return nil
}

func appendTimestamp(b array.Builder, v []byte) error {
	if err := need(v, 8, "timestamp"); err != nil {
		return err
	}
	us := int64(binary.BigEndian.Uint64(v))
	if us == math.MaxInt64 || us == math.MinInt64 {
		return fmt.Errorf("timestamp: infinity has no Iceberg value")
	}
	b.(*array.TimestampBuilder).Append(arrow.Timestamp(us + pgEpochMicros))
	return nil
}

// numeric's binary sign field.
const (
	numericPos = 0x0000
	numericNeg = 0x4000
)

// appendNumeric decodes numeric's binary form (base-10000 digits with a weight) into a decimal of dt's scale.
// A value with more fractional digits than the scale, or more digits than the precision, is an error: never
// rounded.
func appendNumeric(b array.Builder, v []byte, dt *arrow.Decimal128Type) error {
	n, err := decodeNumeric(v, dt.Precision, dt.Scale)
	if err != nil {
		return err
	}
	b.(*array.Decimal128Builder).Append(n)
	return nil
}

func decodeNumeric(v []byte, prec, scale int32) (decimal128.Num, error) {
	if len(v) < 8 {
		return decimal128.Num{}, fmt.Errorf("numeric: %d bytes", len(v))
	}
	ndigits := int(binary.BigEndian.Uint16(v))
	weight := int(int16(binary.BigEndian.Uint16(v[2:])))
	sign := binary.BigEndian.Uint16(v[4:])
	if sign != numericPos && sign != numericNeg {
		return decimal128.Num{}, fmt.Errorf("numeric: NaN and infinities have no Iceberg decimal value")
	}
	if len(v) != 8+2*ndigits {
		return decimal128.Num{}, fmt.Errorf("numeric: %d bytes for %d digits", len(v), ndigits)
	}
	// The value is digits (as one integer) * 10^exp.
	exp := 4*(weight-ndigits+1) + int(scale)
	var n decimal128.Num
	if ndigits <= 4 { // fits in a uint64 (10^16)
		var u uint64
		for i := range ndigits {
			u = u*10000 + uint64(binary.BigEndian.Uint16(v[8+2*i:]))
		}
		// The common case in uint64 arithmetic: decimal128's Mul, Div and FitsInPrecision go through big.Int.
		if u, ok := rescaleU64(u, exp); ok {
			if prec < 20 && u >= pow10[prec] {
				return decimal128.Num{}, fmt.Errorf("numeric: value does not fit decimal(%d,%d)", prec, scale)
			}
			n = decimal128.FromU64(u)
			if sign == numericNeg {
				n = n.Negate()
			}
			return n, nil
		} else if exp < 0 && exp >= -19 && u%pow10[-exp] != 0 {
			return decimal128.Num{}, fmt.Errorf("numeric: more than %d fractional digits (decimal(%d,%d) would round it)",
				scale, prec, scale)
		}
		n = decimal128.FromU64(u)
	} else {
		bi := new(big.Int)
		tenK := big.NewInt(10000)
		for i := range ndigits {
			bi.Mul(bi, tenK)
			bi.Add(bi, big.NewInt(int64(binary.BigEndian.Uint16(v[8+2*i:]))))
		}
		if bi.BitLen() > 126 {
			return decimal128.Num{}, fmt.Errorf("numeric: value does not fit decimal(%d,%d)", prec, scale)
		}
		n = decimal128.FromBigInt(bi)
	}
	for exp > 0 {
		k := min(exp, 38)
		if !n.FitsInPrecision(38 - int32(k)) {
			return decimal128.Num{}, fmt.Errorf("numeric: value does not fit decimal(%d,%d)", prec, scale)
		}
		n = n.Mul(decimal128.GetScaleMultiplier(k))
		exp -= k
	}
	for exp < 0 {
		k := min(-exp, 38)
		q, r := n.Div(decimal128.GetScaleMultiplier(k))
		if r != (decimal128.Num{}) {
			return decimal128.Num{}, fmt.Errorf("numeric: more than %d fractional digits (decimal(%d,%d) would round it)",
				scale, prec, scale)
		}
		n = q
		exp += k
	}
	if !n.FitsInPrecision(prec) {
		return decimal128.Num{}, fmt.Errorf("numeric: value does not fit decimal(%d,%d)", prec, scale)
	}
	if sign == numericNeg {
		n = n.Negate()
	}
	return n, nil
}

// pow10[i] is 10^i, for i up to 19 (the largest power of ten a uint64 holds).
var pow10 = func() (p [20]uint64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()

// rescaleU64 returns u * 10^exp when that is exact and fits a uint64.
func rescaleU64(u uint64, exp int) (uint64, bool) {
	switch {
	case exp == 0:
		return u, true
	case exp > 0:
		if exp > 19 || u > math.MaxUint64/pow10[exp] {
			return 0, false
		}
		return u * pow10[exp], true
	default:
		if exp < -19 || u%pow10[-exp] != 0 {
			return 0, false
		}
		return u / pow10[-exp], true
	}
}

// appendArray decodes a one-dimensional array (binary form: ndim, has-null flag, element OID, then per
// dimension its length and lower bound, then each element's length and bytes) into a list. An empty array
// (ndim 0) is an empty list; more than one dimension is an error.
func appendArray(b array.Builder, v []byte, elem func(array.Builder, []byte) error) error {
	if len(v) < 12 {
		return fmt.Errorf("array: %d bytes", len(v))
	}
	ndim := int32(binary.BigEndian.Uint32(v))
	lb := b.(*array.ListBuilder)
	if ndim == 0 {
		lb.Append(true)
		return nil
	}
	if ndim != 1 {
		return fmt.Errorf("array: %d dimensions, only one-dimensional arrays map to lists", ndim)
	}
	if len(v) < 20 {
		return fmt.Errorf("array: %d bytes", len(v))
	}
	n := int(int32(binary.BigEndian.Uint32(v[12:])))
	p := v[20:]
	lb.Append(true)
	vb := lb.ValueBuilder()
	for range n {
		if len(p) < 4 {
			return fmt.Errorf("array: truncated")
		}
		l := int32(binary.BigEndian.Uint32(p))
		p = p[4:]
		if l < 0 {
			vb.AppendNull()
			continue
		}
		if int(l) > len(p) {
			return fmt.Errorf("array: truncated")
		}
		if err := elem(vb, p[:l]); err != nil {
			return err
		}
		p = p[l:]
	}
	return nil
}
