package postgres

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// numericBytes encodes numeric's binary form: base-10000 digits, weight, sign, display scale.
func numericBytes(neg bool, weight int16, dscale uint16, digits ...uint16) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(len(digits)))
	b = binary.BigEndian.AppendUint16(b, uint16(weight))
	sign := uint16(numericPos)
	if neg {
		sign = numericNeg
	}
	b = binary.BigEndian.AppendUint16(b, sign)
	b = binary.BigEndian.AppendUint16(b, dscale)
	for _, d := range digits {
		b = binary.BigEndian.AppendUint16(b, d)
	}
	return b
}

func TestNumericDecodesExactlyOrFails(t *testing.T) {
	cases := []struct {
		name       string
		v          []byte
		prec, sc   int32
		want, fail string
	}{
		{"1.5 as (10,2)", numericBytes(false, 0, 1, 1, 5000), 10, 2, "1.50", ""},
		{"-12345.678 as (38,18)", numericBytes(true, 1, 3, 1, 2345, 6780), 38, 18, "-12345.678000000000000000", ""},
		{"zero", numericBytes(false, 0, 0), 10, 2, "0.00", ""},
		{"-7.05 as (12,2) (uint64 path)", numericBytes(true, 0, 2, 7, 500), 12, 2, "-7.05", ""},
		{"1234.5 as (4,1): too many digits (uint64 path)", numericBytes(false, 0, 1, 1234, 5000), 4, 1, "", "does not fit"},
		{"1e8 as (12,0)", numericBytes(false, 2, 0, 1), 12, 0, "100000000", ""},
		{"0.0001 as (10,4)", numericBytes(false, -1, 4, 1), 10, 4, "0.0001", ""},
		{"long value", numericBytes(false, 4, 0, 1, 2345, 6789, 1234, 5678), 38, 0, "12345678912345678", ""},
		{"too many fractional digits", numericBytes(false, 0, 3, 1, 5), 10, 2, "", "fractional"},
		{"too large", numericBytes(false, 3, 0, 1), 10, 2, "", "does not fit"},
		{"NaN", []byte{0, 0, 0, 0, 0xC0, 0, 0, 0}, 10, 2, "", "NaN"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, err := decodeNumeric(c.v, c.prec, c.sc)
			if c.fail != "" {
				if err == nil || !strings.Contains(err.Error(), c.fail) {
					t.Fatalf("err = %v, want one saying %q", err, c.fail)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := n.ToString(c.sc); got != c.want {
				t.Fatalf("got %s, want %s", got, c.want)
			}
		})
	}
}

func TestArrayDecodesOneDimensionWithNulls(t *testing.T) {
	m := &typeMapper{numPrec: 38, numScale: 18, lookup: func(ctx context.Context, oid uint32) (pgType, error) {
		return pgType{OID: oid, Name: "_int4", Category: 'A', Elem: oidInt4}, nil
	}}
	ct, err := m.mapType(context.Background(), 1007, -1)
	if err != nil {
		t.Fatal(err)
	}
	// int4[] {7, NULL, -1}
	v := binary.BigEndian.AppendUint32(nil, 1)
	v = binary.BigEndian.AppendUint32(v, 1)
	v = binary.BigEndian.AppendUint32(v, oidInt4)
	v = binary.BigEndian.AppendUint32(v, 3)
	v = binary.BigEndian.AppendUint32(v, 1)
	v = binary.BigEndian.AppendUint32(v, 4)
	v = binary.BigEndian.AppendUint32(v, 7)
	v = binary.BigEndian.AppendUint32(v, 0xffffffff)
	v = binary.BigEndian.AppendUint32(v, 4)
	v = binary.BigEndian.AppendUint32(v, 0xffffffff)
	b := array.NewBuilder(memory.DefaultAllocator, ct.arrow)
	defer b.Release()
	if err := ct.append(b, v); err != nil {
		t.Fatal(err)
	}
	arr := b.NewArray()
	defer arr.Release()
	if got := arr.String(); got != "[[7 (null) -1]]" {
		t.Fatalf("got %s", got)
	}
}

func TestUnmappedTypeIsAnError(t *testing.T) {
	m := &typeMapper{numPrec: 38, numScale: 18, lookup: func(ctx context.Context, oid uint32) (pgType, error) {
		return pgType{OID: oid, Name: "interval", Kind: 'b', Category: 'T'}, nil
	}}
	_, err := m.mapType(context.Background(), 1186, -1)
	if !errors.Is(err, ErrUnsupportedType) || !strings.Contains(err.Error(), "interval") {
		t.Fatalf("err = %v, want ErrUnsupportedType naming interval", err)
	}
	if _, err := m.mapType(context.Background(), oidNumeric, int32((40<<16|2)+4)); !errors.Is(err, ErrUnsupportedType) {
		t.Fatalf("numeric(40,2): err = %v, want ErrUnsupportedType", err)
	}
}

func TestCopyParserTakesRowsSplitAcrossWrites(t *testing.T) {
	var stream []byte
	stream = append(stream, copySignature...)
	stream = binary.BigEndian.AppendUint32(stream, 0)
	stream = binary.BigEndian.AppendUint32(stream, 0)
	for i := range 3 {
		stream = binary.BigEndian.AppendUint16(stream, 2)
		stream = binary.BigEndian.AppendUint32(stream, 4)
		stream = binary.BigEndian.AppendUint32(stream, uint32(i))
		if i == 1 {
			stream = binary.BigEndian.AppendUint32(stream, 0xffffffff)
		} else {
			stream = binary.BigEndian.AppendUint32(stream, 0) // empty string, not null
		}
	}
	stream = binary.BigEndian.AppendUint16(stream, 0xffff)
	var got []string
	p := &copyParser{row: func(vals [][]byte) error {
		s := ""
		for _, v := range vals {
			switch {
			case v == nil:
				s += "N"
			case len(v) == 0:
				s += "E"
			default:
				s += string(rune('0' + v[3]))
			}
		}
		got = append(got, s)
		return nil
	}}
	for i := 0; i < len(stream); i += 5 { // 5-byte writes split every row and the header
		if _, err := p.Write(stream[i:min(i+5, len(stream))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.finish(); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "0E,1N,2E" {
		t.Fatalf("rows %v", got)
	}
}

func TestTableSchemaKeepsNotNull(t *testing.T) {
	sc := tableSchema([]column{{name: "id", notNull: true, typ: colType{arrow: arrow.PrimitiveTypes.Int64}},
		{name: "v", typ: colType{arrow: arrow.BinaryTypes.String}}})
	if sc.Field(0).Nullable || !sc.Field(1).Nullable {
		t.Fatalf("schema %v", sc)
	}
}
