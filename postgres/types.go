package postgres

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/iceberg-go/table"
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
	// json is oidJSON or oidJSONB for a json or jsonb column (or a domain over one), mapped to a string here:
	// mapColumn may map it to a variant instead.
	json uint32
}

// typeMapper maps Postgres types to Arrow types and decoders.
type typeMapper struct {
	lookup            typeLookup
	numPrec, numScale int32
	// variantJSON says whether a json or jsonb column of a table goes into a variant column (jsonPolicy); nil:
	// never.
	variantJSON func(ctx context.Context, ident table.Identifier, column string) (bool, error)
}

// mapColumn maps column name of the Iceberg table ident: mapType's mapping, but a json or jsonb column is a
// variant where variantJSON says so.
func (m *typeMapper) mapColumn(ctx context.Context, ident table.Identifier, name string, oid uint32, typmod int32) (colType, error) {
	ct, err := m.mapType(ctx, oid, typmod)
	if err != nil || ct.json == 0 || m.variantJSON == nil {
		return ct, err
	}
	variant, err := m.variantJSON(ctx, ident, name)
	if err != nil || !variant {
		return ct, err
	}
	return variantColType(ct.json), nil
}

// mapType maps a column's type (OID and atttypmod). The error wraps ErrUnsupportedType and names the type.
func (m *typeMapper) mapType(ctx context.Context, oid uint32, typmod int32) (colType, error) {
	switch oid {
	case oidBool:
		return colType{arrow: arrow.FixedWidthTypes.Boolean, append: appendBool}, nil
	case oidInt2:
		return colType{arrow: arrow.PrimitiveTypes.Int32, append: appendInt2}, nil
	case oidInt4:
		return colType{arrow: arrow.PrimitiveTypes.Int32, append: appendInt4}, nil
	case oidInt8:
		return colType{arrow: arrow.PrimitiveTypes.Int64, append: appendInt8}, nil
	case oidOID:
		return colType{arrow: arrow.PrimitiveTypes.Int64, append: appendOID}, nil
	case oidFloat4:
		return colType{arrow: arrow.PrimitiveTypes.Float32, append: appendFloat4}, nil
	case oidFloat8:
		return colType{arrow: arrow.PrimitiveTypes.Float64, append: appendFloat8}, nil
	case oidText, oidVarchar, oidBPChar, oidName, oidChar:
		return colType{arrow: arrow.BinaryTypes.String, append: appendText}, nil
	case oidJSON:
		return colType{arrow: arrow.BinaryTypes.String, append: appendText, json: oidJSON}, nil
	case oidJSONB:
		return colType{arrow: arrow.BinaryTypes.String, append: appendJSONB, json: oidJSONB}, nil
	case oidBytea:
		return colType{arrow: arrow.BinaryTypes.Binary, append: appendBytea}, nil
	case oidUUID:
		return colType{arrow: extensions.NewUUIDType(), append: appendUUID}, nil
	case oidDate:
		return colType{arrow: arrow.FixedWidthTypes.Date32, append: appendDate}, nil
	case oidTime:
		return colType{arrow: arrow.FixedWidthTypes.Time64us, append: appendTime}, nil
	case oidTimestamp:
		return colType{arrow: &arrow.TimestampType{Unit: arrow.Microsecond}, append: appendTimestamp}, nil
	case oidTimestamptz:
		return colType{arrow: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, append: appendTimestamp}, nil
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
		return colType{arrow: dt, append: func(b array.Builder, v []byte) error { return appendNumeric(b, v, dt) }}, nil
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
		return colType{arrow: arrow.BinaryTypes.String, append: appendText}, nil
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
		return colType{arrow: lt, append: func(b array.Builder, v []byte) error { return appendArray(b, v, el.append) }}, nil
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
	text, err := jsonbText(v)
	if err != nil {
		return err
	}
	b.(*array.StringBuilder).BinaryBuilder.Append(text)
	return nil
}

// jsonbText is the text of a jsonb value in binary format (a version byte, then the text).
func jsonbText(v []byte) ([]byte, error) {
	if len(v) == 0 || v[0] != 1 {
		return nil, fmt.Errorf("jsonb: unknown binary format version")
	}
	return v[1:], nil
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

// ErrOutOfRange is wrapped by the error for a value its column's Iceberg type cannot hold: a timestamp past
// 294247-01-10 04:00:54.775807 (Iceberg counts microseconds from 1970 in 64 bits, Postgres from 2000), a time of
// 24:00:00, 'infinity' or '-infinity' in a date or timestamp, a numeric NaN or ±Infinity, a numeric that does
// not fit its decimal, or a JSON number no variant holds (past a double's range). The error names the table, the column and the row's key; nothing is wrapped or rounded.
var ErrOutOfRange = errors.New("postgres: value outside its Iceberg type's range")

// fixValue is what the errors for a value out of range tell the user to do.
const fixValue = "change the value in Postgres, or leave the table out of Config.Tables"

// Postgres counts dates and timestamps from 2000-01-01; Arrow from 1970-01-01.
const (
	pgEpochDays   = 10957
	pgEpochMicros = pgEpochDays * 86400 * 1_000_000
	dayMicros     = 86400 * 1_000_000
)

// pgTime is a Postgres timestamp (microseconds from 2000-01-01) as text, for errors.
func pgTime(us int64) string {
	days, rem := us/dayMicros, us%dayMicros
	if rem < 0 {
		days, rem = days-1, rem+dayMicros
	}
	t := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, int(days)).Add(time.Duration(rem) * time.Microsecond)
	return t.Format("2006-01-02 15:04:05.999999")
}

func appendDate(b array.Builder, v []byte) error {
	if err := need(v, 4, "date"); err != nil {
		return err
	}
	d := int32(binary.BigEndian.Uint32(v))
	switch {
	case d == math.MaxInt32:
		return fmt.Errorf("%w: date 'infinity' has no Iceberg value: %s", ErrOutOfRange, fixValue)
	case d == math.MinInt32:
		return fmt.Errorf("%w: date '-infinity' has no Iceberg value: %s", ErrOutOfRange, fixValue)
	case int64(d)+pgEpochDays > math.MaxInt32: // past Postgres's own range: never sent
		return fmt.Errorf("%w: date %d days after 2000-01-01 is past Iceberg's dates: %s", ErrOutOfRange, d, fixValue)
	}
	b.(*array.Date32Builder).Append(arrow.Date32(d + pgEpochDays))
	return nil
}

func appendTime(b array.Builder, v []byte) error {
	if err := need(v, 8, "time"); err != nil {
		return err
	}
	us := int64(binary.BigEndian.Uint64(v))
	if us < 0 || us >= dayMicros {
		// Postgres takes 24:00:00; an Iceberg time is a time of day, up to 23:59:59.999999.
		return fmt.Errorf("%w: time %02d:%02d:%02d.%06d is not a time of day Iceberg holds (00:00:00 to 23:59:59.999999): %s",
			ErrOutOfRange, us/3600e6, us/60e6%60, us/1e6%60, us%1e6, fixValue)
	}
	b.(*array.Time64Builder).Append(arrow.Time64(us))
	return nil
}

func appendTimestamp(b array.Builder, v []byte) error {
	if err := need(v, 8, "timestamp"); err != nil {
		return err
	}
	us := int64(binary.BigEndian.Uint64(v))
	switch {
	case us == math.MaxInt64:
		return fmt.Errorf("%w: timestamp 'infinity' has no Iceberg value: %s", ErrOutOfRange, fixValue)
	case us == math.MinInt64:
		return fmt.Errorf("%w: timestamp '-infinity' has no Iceberg value: %s", ErrOutOfRange, fixValue)
	case us > math.MaxInt64-pgEpochMicros:
		return fmt.Errorf("%w: timestamp %s (UTC) is past Iceberg's last, 294247-01-10 04:00:54.775807 (microseconds from 1970 in 64 bits): %s",
			ErrOutOfRange, pgTime(us), fixValue)
	}
	b.(*array.TimestampBuilder).Append(arrow.Timestamp(us + pgEpochMicros))
	return nil
}

// numeric's binary sign field.
const (
	numericPos  = 0x0000
	numericNeg  = 0x4000
	numericNaN  = 0xC000
	numericPInf = 0xD000
	numericNInf = 0xF000
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

// decodeNumeric decodes numeric's binary form into a decimal(prec, scale): exactly, or an error wrapping
// ErrOutOfRange. Postgres sends base-10000 digits, so the last one may carry up to three padding zeros past the
// value's own digits (1.5 is 1, 5000): the value is rescaled, its padding dropped, before its digits are
// counted against the precision.
func decodeNumeric(v []byte, prec, scale int32) (decimal128.Num, error) {
	if len(v) < 8 {
		return decimal128.Num{}, fmt.Errorf("numeric: %d bytes", len(v))
	}
	ndigits := int(binary.BigEndian.Uint16(v))
	weight := int(int16(binary.BigEndian.Uint16(v[2:])))
	switch sign := binary.BigEndian.Uint16(v[4:]); sign {
	case numericPos, numericNeg:
	case numericNaN:
		return decimal128.Num{}, fmt.Errorf("%w: numeric NaN has no Iceberg decimal value: %s", ErrOutOfRange, fixValue)
	case numericPInf:
		return decimal128.Num{}, fmt.Errorf("%w: numeric Infinity has no Iceberg decimal value: %s", ErrOutOfRange, fixValue)
	case numericNInf:
		return decimal128.Num{}, fmt.Errorf("%w: numeric -Infinity has no Iceberg decimal value: %s", ErrOutOfRange, fixValue)
	default:
		return decimal128.Num{}, fmt.Errorf("numeric: unknown sign 0x%04x", sign)
	}
	if len(v) != 8+2*ndigits {
		return decimal128.Num{}, fmt.Errorf("numeric: %d bytes for %d digits", len(v), ndigits)
	}
	neg := binary.BigEndian.Uint16(v[4:]) == numericNeg
	// The value is digits (as one integer) * 10^exp.
	exp := 4*(weight-ndigits+1) + int(scale)
	if ndigits <= 4 { // fits in a uint64 (10^16): the common case, without big.Int
		var u uint64
		for i := range ndigits {
			u = u*10000 + uint64(binary.BigEndian.Uint16(v[8+2*i:]))
		}
		if u, ok := rescaleU64(u, exp); ok && (prec >= 20 || u < pow10[prec]) {
			n := decimal128.FromU64(u)
			if neg {
				n = n.Negate()
			}
			return n, nil
		}
	}
	bi := new(big.Int)
	tenK := big.NewInt(10000)
	for i := range ndigits {
		bi.Mul(bi, tenK)
		bi.Add(bi, big.NewInt(int64(binary.BigEndian.Uint16(v[8+2*i:]))))
	}
	ten := big.NewInt(10)
	switch {
	case exp > 0:
		if exp > 38 && bi.Sign() != 0 {
			return decimal128.Num{}, numericErr(v, prec, scale, "does not fit")
		}
		bi.Mul(bi, new(big.Int).Exp(ten, big.NewInt(int64(exp)), nil))
	case exp < 0:
		var r big.Int
		bi.QuoRem(bi, new(big.Int).Exp(ten, big.NewInt(int64(-exp)), nil), &r)
		if r.Sign() != 0 {
			return decimal128.Num{}, numericErr(v, prec, scale, fmt.Sprintf("has more than %d fractional digits (it would be rounded)", scale))
		}
	}
	if bi.Cmp(new(big.Int).Exp(ten, big.NewInt(int64(prec)), nil)) >= 0 {
		return decimal128.Num{}, numericErr(v, prec, scale, "does not fit")
	}
	if neg {
		bi.Neg(bi)
	}
	return decimal128.FromBigInt(bi), nil
}

// numericErr is the error for a numeric (binary form v) that does not fit decimal(prec, scale).
func numericErr(v []byte, prec, scale int32, what string) error {
	return fmt.Errorf("%w: numeric %s %s decimal(%d,%d): declare the column numeric(p,s) with p <= 38, or set Config.NumericPrecision and NumericScale for unconstrained numerics, or %s",
		ErrOutOfRange, numericText(v), what, prec, scale, fixValue)
}

// numericText is numeric's binary form (checked by decodeNumeric) as text, for errors.
func numericText(v []byte) string {
	ndigits := int(binary.BigEndian.Uint16(v))
	weight := int(int16(binary.BigEndian.Uint16(v[2:])))
	var sb strings.Builder
	if binary.BigEndian.Uint16(v[4:]) == numericNeg {
		sb.WriteByte('-')
	}
	digit := func(i int) uint16 {
		if i < 0 || i >= ndigits {
			return 0
		}
		return binary.BigEndian.Uint16(v[8+2*i:])
	}
	if weight < 0 {
		sb.WriteByte('0')
	}
	for i := 0; i <= weight; i++ {
		if i == 0 {
			fmt.Fprintf(&sb, "%d", digit(i))
		} else {
			fmt.Fprintf(&sb, "%04d", digit(i))
		}
	}
	if ndigits > weight+1 {
		var frac strings.Builder
		for i := weight + 1; i < ndigits; i++ {
			fmt.Fprintf(&frac, "%04d", digit(i))
		}
		sb.WriteString("." + strings.TrimRight(frac.String(), "0"))
	}
	return sb.String()
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
