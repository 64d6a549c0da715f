package shred

import (
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/google/uuid"
)

type Address struct {
	City string
	Zip  *int32 `json:"zip_code"`
}

type AllTypes struct {
	B       bool
	I8      int8
	I16     int16
	I32     int32
	I64     int64
	I       int
	U8      uint8
	U16     uint16
	U32     uint32
	U64     uint64
	U       uint
	F32     float32
	F64     float64
	S       string
	Bytes   []byte
	Fixed   [16]byte
	ID      uuid.UUID
	TS      time.Time
	Price   decimal128.Num `iceberg:"price,decimal(10,2)"`
	PI      *int64
	PS      *string
	NS      sql.NullString
	NI64    sql.NullInt64
	NI32    sql.NullInt32
	NI16    sql.NullInt16
	NF      sql.NullFloat64
	NB      sql.NullBool
	NT      sql.NullTime
	NBy     sql.NullByte
	Addr    Address
	PAddr   *Address
	Tags    []string
	Scores  []*float64
	Attrs   map[string]int64
	ByCode  map[int32]string
	Dur     time.Duration
	Nested  [][]int32
	Generic sql.Null[string]
}

func ptr[T any](v T) *T { return &v }

func check(t *testing.T, mem *memory.CheckedAllocator) {
	t.Helper()
	mem.AssertSize(t, 0)
}

func col(t *testing.T, rec arrow.RecordBatch, name string) arrow.Array {
	t.Helper()
	idx := rec.Schema().FieldIndices(name)
	if len(idx) != 1 {
		t.Fatalf("no column %q in %v", name, rec.Schema())
	}
	return rec.Column(idx[0])
}

func TestStructsRoundTripAllTypes(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer check(t, mem)
	ts := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.FixedZone("X", 3600))
	u := uuid.MustParse("0b7e8d3c-2f4b-4b8a-9a7e-1c2d3e4f5a6b")
	rows := []AllTypes{{
		B: true, I8: -8, I16: -16, I32: -32, I64: math.MinInt64, I: 42, U8: 255, U16: 65535, U32: math.MaxUint32,
		U64: math.MaxInt64, U: 7, F32: 1.5, F64: math.Pi, S: "héllo", Bytes: []byte{1, 2, 3}, Fixed: [16]byte{9},
		ID: u, TS: ts, Price: decimal128.FromI64(12345), PI: ptr(int64(5)), PS: ptr("p"),
		NS: sql.NullString{String: "ns", Valid: true}, NI64: sql.NullInt64{Int64: 64, Valid: true},
		NI32: sql.NullInt32{Int32: 32, Valid: true}, NI16: sql.NullInt16{Int16: 16, Valid: true},
		NF: sql.NullFloat64{Float64: 2.5, Valid: true}, NB: sql.NullBool{Bool: true, Valid: true},
		NT: sql.NullTime{Time: ts, Valid: true}, NBy: sql.NullByte{Byte: 200, Valid: true},
		Addr: Address{City: "Oslo", Zip: ptr(int32(150))}, PAddr: &Address{City: "Bergen"},
		Tags: []string{"a", "b"}, Scores: []*float64{ptr(1.0), nil}, Attrs: map[string]int64{"k": 1},
		ByCode: map[int32]string{404: "nf"}, Dur: time.Second, Nested: [][]int32{{1, 2}, nil, {}},
		Generic: sql.Null[string]{V: "g", Valid: true},
	}, {}}
	rec, err := Structs(mem, rows, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	if rec.NumRows() != 2 {
		t.Fatalf("rows = %d", rec.NumRows())
	}
	wantTypes := map[string]string{
		"b": "bool", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "i": "int64", "u8": "int16",
		"u16": "int32", "u32": "int64", "u64": "int64", "u": "int64", "f32": "float32", "f64": "float64",
		"s": "utf8", "bytes": "binary", "fixed": "extension<arrow.uuid>", "id": "extension<arrow.uuid>",
		"ts": "timestamp[us, tz=UTC]", "price": "decimal(10, 2)", "pi": "int64", "ps": "utf8",
		"dur": "int64", "n_by": "int16", "nt": "timestamp[us, tz=UTC]",
	}
	for name, want := range wantTypes {
		if got := col(t, rec, name).DataType().String(); got != want {
			t.Errorf("column %s type = %s, want %s", name, got, want)
		}
	}
	r0 := func(name string) any { return col(t, rec, name).GetOneForMarshal(0) }
	eq := func(name string, want any) {
		t.Helper()
		if got := r0(name); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s[0] = %#v, want %#v", name, got, want)
		}
	}
	eq("b", true)
	eq("i8", int8(-8))
	eq("i16", int16(-16))
	eq("i32", int32(-32))
	eq("i64", int64(math.MinInt64))
	eq("i", int64(42))
	eq("u8", int16(255))
	eq("u16", int32(65535))
	eq("u32", int64(math.MaxUint32))
	eq("u64", int64(math.MaxInt64))
	eq("u", int64(7))
	eq("f32", float32(1.5))
	eq("f64", math.Pi)
	eq("s", "héllo")
	eq("pi", int64(5))
	eq("ps", "p")
	eq("ns", "ns")
	eq("ni64", int64(64))
	eq("ni32", int32(32))
	eq("ni16", int16(16))
	eq("nf", 2.5)
	eq("nb", true)
	eq("n_by", int16(200))
	eq("dur", int64(time.Second))
	eq("generic", "g")
	if got := col(t, rec, "bytes").(*array.Binary).Value(0); string(got) != "\x01\x02\x03" {
		t.Errorf("bytes = %v", got)
	}
	if got := col(t, rec, "id").(*extensions.UUIDArray).Value(0); got != u {
		t.Errorf("id = %v", got)
	}
	if got := col(t, rec, "fixed").(*extensions.UUIDArray).Value(0); got != uuid.UUID([16]byte{9}) {
		t.Errorf("fixed = %v", got)
	}
	if got := col(t, rec, "ts").(*array.Timestamp).Value(0); int64(got) != ts.UnixMicro() {
		t.Errorf("ts = %v want %v", got, ts.UnixMicro())
	}
	if got := col(t, rec, "nt").(*array.Timestamp).Value(0); int64(got) != ts.UnixMicro() {
		t.Errorf("n_t = %v", got)
	}
	if got := col(t, rec, "price").(*array.Decimal128).Value(0); got != decimal128.FromI64(12345) {
		t.Errorf("price = %v", got)
	}
	addr := col(t, rec, "addr").(*array.Struct)
	if got := addr.Field(0).(*array.String).Value(0); got != "Oslo" {
		t.Errorf("addr.city = %q", got)
	}
	if got := addr.Field(1).(*array.Int32).Value(0); got != 150 || !addr.Field(1).IsNull(1) {
		t.Errorf("addr.zip_code = %v", got)
	}
	paddr := col(t, rec, "p_addr").(*array.Struct)
	if paddr.IsNull(0) || !paddr.IsNull(1) || paddr.Field(0).(*array.String).Value(0) != "Bergen" {
		t.Errorf("p_addr = %v", paddr)
	}
	tags := col(t, rec, "tags").(*array.List)
	if s := tags.String(); s != `[["a" "b"] (null)]` {
		t.Errorf("tags = %s", s)
	}
	if s := col(t, rec, "scores").String(); s != `[[1 (null)] (null)]` {
		t.Errorf("scores = %s", s)
	}
	if s := col(t, rec, "nested").String(); s != `[[[1 2] (null) []] (null)]` {
		t.Errorf("nested = %s", s)
	}
	attrs := col(t, rec, "attrs").(*array.Map)
	if attrs.Keys().(*array.String).Value(0) != "k" || attrs.Items().(*array.Int64).Value(0) != 1 || !attrs.IsNull(1) {
		t.Errorf("attrs = %v", attrs)
	}
	bycode := col(t, rec, "by_code").(*array.Map)
	if bycode.Keys().(*array.Int32).Value(0) != 404 || bycode.Items().(*array.String).Value(0) != "nf" {
		t.Errorf("by_code = %v", bycode)
	}
	// Row 1: zero values; pointers and sql.Null are null, plain scalars are not.
	for _, name := range []string{"pi", "ps", "ns", "ni64", "ni32", "ni16", "nf", "nb", "nt", "n_by", "p_addr", "tags", "attrs", "generic", "bytes"} {
		if !col(t, rec, name).IsNull(1) {
			t.Errorf("%s[1] should be null", name)
		}
	}
	for _, name := range []string{"b", "i64", "s", "ts", "price", "addr", "id"} {
		if col(t, rec, name).IsNull(1) {
			t.Errorf("%s[1] should not be null", name)
		}
	}
}

type Base struct {
	ID      int64 `iceberg:"id,required"`
	Created time.Time
}

type Meta struct {
	Source string
	ID     int64 // shadowed by Base.ID? both depth 1: Base.ID is tagged, so it wins
}

type Mapped struct {
	Base
	*Meta
	UserID     int64
	HTTPCode   int32
	EventType  string
	JSONName   string `json:"jname,omitempty"`
	Override   string `iceberg:"ice" json:"js"`
	Skipped    string `iceberg:"-"`
	JSkipped   string `json:"-"`
	unexported int
	URLPath    string
}

func TestMappingRules(t *testing.T) {
	s, err := SchemaOf[Mapped]()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range s.Fields() {
		names = append(names, f.Name)
	}
	want := "id,created,source,user_id,http_code,event_type,jname,ice,url_path"
	if got := strings.Join(names, ","); got != want {
		t.Fatalf("columns = %s, want %s", got, want)
	}
	if f, _ := s.FieldsByName("id"); f[0].Nullable {
		t.Error("id should be required (Nullable=false)")
	}
	if f, _ := s.FieldsByName("user_id"); !f[0].Nullable {
		t.Error("user_id should be nullable")
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer check(t, mem)
	rows := []Mapped{{Base: Base{ID: 1}, Meta: &Meta{Source: "s"}, UserID: 2}, {Base: Base{ID: 3}}}
	rec, err := Structs(mem, rows, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	src := col(t, rec, "source")
	if src.(*array.String).Value(0) != "s" || !src.IsNull(1) {
		t.Errorf("source = %v", src)
	}
	if col(t, rec, "id").(*array.Int64).Value(1) != 3 {
		t.Error("id[1]")
	}
	_ = rows[0].unexported
}

func TestSnakeCase(t *testing.T) {
	for in, want := range map[string]string{
		"UserID": "user_id", "HTTPCode": "http_code", "ID": "id", "EventType": "event_type", "TS": "ts",
		"Value2": "value2", "simple": "simple", "URLPath": "url_path", "A": "a", "MyHTTPServer": "my_http_server",
	} {
		if got := SnakeCase(in); got != want {
			t.Errorf("SnakeCase(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestUnsupportedTypes(t *testing.T) {
	type C struct {
		OK  int
		Bad chan int
	}
	type F struct{ Fn func() }
	type I struct{ Any fmt.Stringer } // any maps to a variant column; other interfaces have no mapping
	type X struct{ Z complex128 }
	type D struct{ Price decimal128.Num }
	type MK struct{ M map[float64]string }
	for name, f := range map[string]func() error{
		"bad":   func() error { _, err := SchemaOf[C](); return err },
		"fn":    func() error { _, err := NewConverter[F](nil); return err },
		"any":   func() error { _, err := Structs[I](nil, nil, nil); return err },
		"z":     func() error { _, err := SchemaOf[X](); return err },
		"price": func() error { _, err := SchemaOf[D](); return err },
		"m":     func() error { _, err := SchemaOf[MK](); return err },
	} {
		err := f()
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Column != name {
			t.Errorf("%s: err = %v", name, err)
			continue
		}
		if name != "price" && !errors.Is(err, ErrUnsupportedType) {
			t.Errorf("%s: err = %v, want ErrUnsupportedType", name, err)
		}
	}
	if _, err := SchemaOf[int](); err == nil {
		t.Error("SchemaOf[int] should fail")
	}
}

type Small struct {
	ID    int32 `iceberg:"id"`
	Score float32
	Name  string
	When  time.Time
	Big   uint64
	Opt   *int64
}

func TestTargetSchemaConversion(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer check(t, mem)
	target := arrow.NewSchema([]arrow.Field{
		{Name: "extra", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "name", Type: arrow.BinaryTypes.LargeString, Nullable: true},
		{Name: "when", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
		{Name: "big", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "opt", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	}, nil)
	c, err := NewConverter[Small](target)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	day := time.Date(1969, 12, 31, 23, 0, 0, 0, time.UTC)
	rec, err := c.Convert(mem, []Small{{ID: 7, Score: 0.5, Name: "n", When: day, Big: 9, Opt: ptr(int64(-3))}})
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Schema().Equal(target) {
		t.Errorf("schema = %v", rec.Schema())
	}
	if !rec.Column(0).IsNull(0) || rec.Column(1).(*array.Int64).Value(0) != 7 || rec.Column(2).(*array.Float64).Value(0) != 0.5 ||
		rec.Column(3).(*array.LargeString).Value(0) != "n" || rec.Column(4).(*array.Date32).Value(0) != -1 ||
		rec.Column(6).(*array.Int32).Value(0) != -3 {
		t.Errorf("values: %v", rec)
	}
	rec.Release()

	// Row-level errors name the column and row and leave the converter usable.
	_, err = c.Convert(mem, []Small{{}, {Big: math.MaxUint64}})
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Column != "big" || fe.Row != 1 || !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("err = %v", err)
	}
	_, err = c.Convert(mem, []Small{{}, {}, {Opt: ptr(int64(math.MaxInt32) + 1)}})
	if !errors.As(err, &fe) || fe.Column != "opt" || fe.Row != 2 || !strings.Contains(err.Error(), `column "opt" (row 2)`) {
		t.Fatalf("err = %v", err)
	}
	rec, err = c.Convert(mem, []Small{{ID: 1}, {ID: 2}})
	if err != nil || rec.NumRows() != 2 || rec.Column(1).(*array.Int64).Value(1) != 2 {
		t.Fatalf("after error: %v %v", rec, err)
	}
	rec.Release()

	// Plan errors.
	missing := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	if _, err := NewConverter[Small](missing); !errors.As(err, &fe) || fe.Column != "score" || !errors.Is(err, ErrUnknownColumn) {
		t.Errorf("unknown column: %v", err)
	}
	wrong := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "score", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String}, {Name: "when", Type: TimestampType},
		{Name: "big", Type: arrow.PrimitiveTypes.Int64}, {Name: "opt", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	if _, err := NewConverter[Small](wrong); !errors.As(err, &fe) || fe.Column != "score" || !errors.Is(err, ErrTypeMismatch) {
		t.Errorf("type mismatch: %v", err)
	}
	req := arrow.NewSchema(append(wrong.Fields()[:0:0], append([]arrow.Field{{Name: "must", Type: arrow.PrimitiveTypes.Int64}}, target.Fields()[1:]...)...), nil)
	if _, err := NewConverter[Small](req); !errors.As(err, &fe) || fe.Column != "must" {
		t.Errorf("required missing: %v", err)
	}
	// A nil pointer into a required column.
	reqOpt := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "score", Type: arrow.PrimitiveTypes.Float32},
		{Name: "name", Type: arrow.BinaryTypes.String}, {Name: "when", Type: &arrow.TimestampType{Unit: arrow.Nanosecond}},
		{Name: "big", Type: arrow.PrimitiveTypes.Int64}, {Name: "opt", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	c2, err := NewConverter[Small](reqOpt)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Release()
	if _, err := c2.Convert(mem, []Small{{Opt: ptr(int64(1)), When: day}, {When: day}}); !errors.As(err, &fe) || fe.Column != "opt" || fe.Row != 1 || !errors.Is(err, ErrNull) {
		t.Errorf("null into required: %v", err)
	}
}

func TestConverterNestedErrorRow(t *testing.T) {
	type Inner struct{ V uint64 }
	type Outer struct{ Items []Inner }
	c, err := NewConverter[Outer](nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	_, err = c.Convert(nil, []Outer{{}, {Items: []Inner{{1}, {math.MaxUint64}}}})
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Column != "items.v" || fe.Row != 1 {
		t.Fatalf("err = %v", err)
	}
}

func TestConverterAllocs(t *testing.T) {
	rows := seedEvents(1000)
	c, err := NewConverter[SeedEvent](nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	mem := memory.DefaultAllocator
	allocs := testing.AllocsPerRun(20, func() {
		rec, err := c.Convert(mem, rows)
		if err != nil {
			t.Fatal(err)
		}
		rec.Release()
	})
	// Per-batch allocations only (arrays, buffers): far below one per row.
	if allocs > 100 {
		t.Errorf("allocs per batch of %d rows = %v", len(rows), allocs)
	}
	t.Logf("allocs per batch of %d rows: %v", len(rows), allocs)
}
