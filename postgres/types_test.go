package postgres

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

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
		{"Infinity", []byte{0, 0, 0, 0, 0xD0, 0, 0, 0}, 10, 2, "", "Infinity"},
		{"-Infinity", []byte{0, 0, 0, 0, 0xF0, 0, 0, 0}, 10, 2, "", "-Infinity"},
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

// numericOf encodes a decimal literal as Postgres sends it: base-10000 digits around the decimal point, leading
// and trailing zero digits dropped (so the last digit may carry padding zeros), the weight of the first digit.
func numericOf(t *testing.T, lit string) []byte {
	t.Helper()
	neg := strings.HasPrefix(lit, "-")
	lit = strings.TrimPrefix(lit, "-")
	ip, fp, _ := strings.Cut(lit, ".")
	ip = strings.Repeat("0", (4-len(ip)%4)%4) + ip
	dscale := len(fp)
	fp += strings.Repeat("0", (4-len(fp)%4)%4)
	var groups []uint16
	for s := ip + fp; s != ""; s = s[4:] {
		g, err := strconv.Atoi(s[:4])
		if err != nil {
			t.Fatal(err)
		}
		groups = append(groups, uint16(g))
	}
	weight := len(ip)/4 - 1
	for len(groups) > 0 && groups[0] == 0 {
		groups, weight = groups[1:], weight-1
	}
	for len(groups) > 0 && groups[len(groups)-1] == 0 {
		groups = groups[:len(groups)-1]
	}
	if len(groups) == 0 {
		weight = 0
	}
	return numericBytes(neg, int16(weight), uint16(dscale), groups...)
}

// TestNumericTakesFullPrecision38: every numeric(38,s) value decodes exactly, the largest included (Postgres's
// padding digits are dropped before the digits are counted); a value past the precision is ErrOutOfRange.
func TestNumericTakesFullPrecision38(t *testing.T) {
	nines := func(n int) string { return strings.Repeat("9", n) }
	cases := []struct {
		lit   string
		scale int32
		fail  bool
	}{
		{nines(38), 0, false},
		{"-" + nines(38), 0, false},
		{nines(28) + "." + nines(10), 10, false},
		{"-" + nines(28) + "." + nines(10), 10, false},
		{nines(20) + "." + nines(18), 18, false},
		{"-" + nines(20) + "." + nines(18), 18, false},
		{"0." + nines(38), 38, false},
		{"-0." + nines(38), 38, false},
		{"1" + strings.Repeat("0", 37), 0, false},
		{"12345678901234567890123456789.012345678", 9, false},
		{"0.5", 18, false},
		{"1" + strings.Repeat("0", 38), 0, true},
		{"1" + strings.Repeat("0", 28) + ".5", 10, true},
		{"1" + strings.Repeat("0", 20) + ".5", 18, true},
		{"0." + nines(19), 18, true},
	}
	for _, c := range cases {
		t.Run(c.lit+"/"+strconv.Itoa(int(c.scale)), func(t *testing.T) {
			n, err := decodeNumeric(numericOf(t, c.lit), 38, c.scale)
			if c.fail {
				if !errors.Is(err, ErrOutOfRange) {
					t.Fatalf("err = %v, want ErrOutOfRange", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := c.lit
			if ip, fp, _ := strings.Cut(want, "."); int(c.scale) > len(fp) {
				want = ip + "." + fp + strings.Repeat("0", int(c.scale)-len(fp))
			}
			if got := n.ToString(c.scale); got != want {
				t.Fatalf("got %s, want %s", got, want)
			}
		})
	}
}

// pgMicros is t as Postgres stores a timestamp: microseconds from 2000-01-01 (t.Unix does not overflow where
// t.UnixMicro would).
func pgMicros(t time.Time) int64 {
	return (t.Unix()-946684800)*1_000_000 + int64(t.Nanosecond()/1000)
}

// TestTemporalOutsideIcebergRangeIsAnError: every temporal type at both ends of Postgres's range, and its
// infinities, decodes exactly or fails with ErrOutOfRange: never a wrapped value.
func TestTemporalOutsideIcebergRangeIsAnError(t *testing.T) {
	be64 := func(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }
	be32 := func(v int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }
	last := time.UnixMicro(math.MaxInt64).UTC() // Iceberg's last timestamp
	if got := last.Format("2006-01-02 15:04:05.999999"); got != "294247-01-10 04:00:54.775807" {
		t.Fatalf("last Iceberg timestamp %s", got)
	}
	pgFirst := time.Date(-4713, 11, 24, 0, 0, 0, 0, time.UTC) // 4714-11-24 BC
	pgLast := time.Date(294276, 12, 31, 23, 59, 59, 999999000, time.UTC)
	ts := &arrow.TimestampType{Unit: arrow.Microsecond}
	cases := []struct {
		name   string
		append func(array.Builder, []byte) error
		typ    arrow.DataType
		v      []byte
		want   string // the decoded value (ValueStr), "" for ErrOutOfRange
	}{
		{"timestamp first", appendTimestamp, ts, be64(pgMicros(pgFirst)), strconv.FormatInt(pgFirst.Unix()*1_000_000, 10)},
		{"timestamp last Iceberg", appendTimestamp, ts, be64(pgMicros(last)), strconv.FormatInt(math.MaxInt64, 10)},
		{"timestamp one past", appendTimestamp, ts, be64(pgMicros(last) + 1), ""},
		{"timestamp last Postgres", appendTimestamp, ts, be64(pgMicros(pgLast)), ""},
		{"timestamp infinity", appendTimestamp, ts, be64(math.MaxInt64), ""},
		{"timestamp -infinity", appendTimestamp, ts, be64(math.MinInt64), ""},
		{"date first", appendDate, arrow.FixedWidthTypes.Date32, be32(int32(pgMicros(pgFirst) / 86400e6)), strconv.FormatInt(pgFirst.Unix()/86400, 10)},
		{"date last Postgres", appendDate, arrow.FixedWidthTypes.Date32, be32(2145031948), strconv.Itoa(2145031948 + 10957)},
		{"date infinity", appendDate, arrow.FixedWidthTypes.Date32, be32(math.MaxInt32), ""},
		{"date -infinity", appendDate, arrow.FixedWidthTypes.Date32, be32(math.MinInt32), ""},
		{"time first", appendTime, arrow.FixedWidthTypes.Time64us, be64(0), "0"},
		{"time last", appendTime, arrow.FixedWidthTypes.Time64us, be64(86400e6 - 1), strconv.FormatInt(86400e6-1, 10)},
		{"time 24:00:00", appendTime, arrow.FixedWidthTypes.Time64us, be64(86400e6), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := array.NewBuilder(memory.DefaultAllocator, c.typ)
			defer b.Release()
			err := c.append(b, c.v)
			if c.want == "" {
				if !errors.Is(err, ErrOutOfRange) {
					t.Fatalf("err = %v, want ErrOutOfRange", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			a := b.NewArray()
			defer a.Release()
			var got int64
			switch a := a.(type) {
			case *array.Timestamp:
				got = int64(a.Value(0))
			case *array.Date32:
				got = int64(a.Value(0))
			case *array.Time64:
				got = int64(a.Value(0))
			}
			if strconv.FormatInt(got, 10) != c.want {
				t.Fatalf("got %d, want %s", got, c.want)
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
	header := len(stream)
	var rowEnds []int
	for i := range 3 {
		stream = binary.BigEndian.AppendUint16(stream, 2)
		stream = binary.BigEndian.AppendUint32(stream, 4)
		stream = binary.BigEndian.AppendUint32(stream, uint32(i))
		if i == 1 {
			stream = binary.BigEndian.AppendUint32(stream, 0xffffffff)
		} else {
			stream = binary.BigEndian.AppendUint32(stream, 0) // empty string, not null
		}
		rowEnds = append(rowEnds, len(stream))
	}
	stream = binary.BigEndian.AppendUint16(stream, 0xffff)
	// Each case is where the writes end: rows split anywhere, one row per write (as Postgres sends them, parsed
	// in place), everything at once, and rows split after whole ones.
	cuts := map[string][]int{"whole rows": append([]int{header}, rowEnds...), "all at once": nil,
		"a row and a half": {header, rowEnds[0] + 7, rowEnds[2]}}
	for _, n := range []int{1, 5} {
		var c []int
		for i := n; i < len(stream); i += n {
			c = append(c, i)
		}
		cuts[fmt.Sprintf("%d-byte writes", n)] = c
	}
	for name, cut := range cuts {
		t.Run(name, func(t *testing.T) {
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
			// Every write comes in the same buffer, overwritten after it (as pgconn reuses its read buffer): the
			// parser must copy what it keeps.
			scratch := make([]byte, len(stream))
			from := 0
			for _, to := range append(cut, len(stream)) {
				w := scratch[:copy(scratch, stream[from:to])]
				if _, err := p.Write(w); err != nil {
					t.Fatal(err)
				}
				for i := range w {
					w[i] = 0xee
				}
				from = to
			}
			if err := p.finish(); err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, ",") != "0E,1N,2E" {
				t.Fatalf("rows %v", got)
			}
		})
	}
}

func TestTableSchemaKeepsNotNull(t *testing.T) {
	sc := tableSchema([]column{{name: "id", notNull: true, typ: colType{arrow: arrow.PrimitiveTypes.Int64}},
		{name: "v", typ: colType{arrow: arrow.BinaryTypes.String}}})
	if sc.Field(0).Nullable || !sc.Field(1).Nullable {
		t.Fatalf("schema %v", sc)
	}
}

// TestPresizedRecordsKeepEveryValue: records built after presize (the room of the table's largest record) hold
// exactly their rows, when a record's strings and bytes outgrow the room, fall short of it, or are null.
func TestPresizedRecordsKeepEveryValue(t *testing.T) {
	m := &typeMapper{numPrec: 38, numScale: 18}
	var cols []column
	for _, c := range []struct {
		name string
		oid  uint32
	}{{"id", oidInt8}, {"s", oidText}, {"b", oidBytea}, {"n", oidNumeric}} {
		typ, err := m.mapType(context.Background(), c.oid, -1)
		if err != nil {
			t.Fatal(err)
		}
		cols = append(cols, column{name: c.name, typ: typ})
	}
	b := newRowBuilder("t", cols, []string{"id"}, tableSchema(cols))
	defer b.release()
	b.sizes = &rowSizes{}
	// Records of 3, 5 (longer values: past the room of the first), 2 (shorter) and 4 rows; every third row's
	// string and bytes are null.
	id := 0
	for r, rows := range []int{3, 5, 2, 4} {
		b.presize()
		var want []string
		for range rows {
			s := strings.Repeat(string(rune('a'+r)), 1+id*(r%2+1))
			vals := [][]byte{binary.BigEndian.AppendUint64(nil, uint64(id)), []byte(s), {byte(id), 0, 'x'},
				numericOf(t, fmt.Sprintf("-%d.25", id))}
			if id%3 == 0 {
				vals[1], vals[2] = nil, nil
				s = "(null)"
			}
			for i, v := range vals {
				if err := b.appendValue(i, v); err != nil {
					t.Fatal(err)
				}
			}
			b.rows++
			want = append(want, s)
			id++
		}
		rec := b.record()
		if int(rec.NumRows()) != rows {
			t.Fatalf("record %d: %d rows, want %d", r, rec.NumRows(), rows)
		}
		first := id - rows
		for j := range rows {
			row := first + j
			if got := rec.Column(0).(*array.Int64).Value(j); got != int64(row) {
				t.Fatalf("record %d row %d: id %d", r, j, got)
			}
			if got := rec.Column(1).ValueStr(j); got != want[j] {
				t.Fatalf("record %d row %d: s %q, want %q", r, j, got, want[j])
			}
			bytesCol := rec.Column(2).(*array.Binary)
			if row%3 == 0 != bytesCol.IsNull(j) || !bytesCol.IsNull(j) && string(bytesCol.Value(j)) != string([]byte{byte(row), 0, 'x'}) {
				t.Fatalf("record %d row %d: b %v", r, j, rec.Column(2))
			}
			if got, want := rec.Column(3).ValueStr(j), fmt.Sprintf("-%d.25", row); got != want {
				t.Fatalf("record %d row %d: n %s, want %s", r, j, got, want)
			}
		}
		rec.Release()
		if most := []int{3, 5, 5, 5}[r]; b.sizes.rows != most {
			t.Fatalf("sizes %+v after record %d: want the largest record's, %d rows", b.sizes, r, most)
		}
	}
}
