package pipeline

import (
	"fmt"

	"github.com/icewriter/iceberg/internal/arrowx"
	"github.com/icewriter/iceberg/internal/changes"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Small calls are gathered: a call of fewer than GatherMaxRows rows is conformed without a copy of its own and
// its rows are appended to builders shared with the calls before it, which are finished into one record every
// gatherRows rows (or at a checkpoint, a seal, a change of source, kind or schema). One retained record per call
// made a 1-row Write cost 30x a 1,000-row one: an allocation per buffer per call on the way in, and a Parquet
// column write per call on the way out.
const (
	GatherMaxRows = 64
	gatherRows    = arrowx.RecordRows
)

// gather is the open buffer's growing tail: rows of consecutive small calls of one source and one kind.
type gather struct {
	b      *array.RecordBuilder
	schema *arrow.Schema
	kind   changes.Kind
	source string
	rows   int64
	bytes  int64           // what the memory limit counts for the rows (arrowx.ViewSize of what was appended)
	undo   []*changes.Undo // the undo of the calls gathered (Record.undo)
}

func newGather(mem memory.Allocator, rec Record) *gather {
	return &gather{b: array.NewRecordBuilder(mem, rec.Rec.Schema()), schema: rec.Rec.Schema(), kind: rec.Kind,
		source: rec.Source}
}

// fits reports whether rec's rows may join the gather.
func (g *gather) fits(rec Record) bool {
	return g.kind == rec.Kind && g.source == rec.Source && g.schema == rec.Rec.Schema() && g.rows < gatherRows
}

// add copies the rows of a view into the builders.
func (g *gather) add(rec Record) {
	for i, col := range rec.Rec.Columns() {
		appendArray(g.b.Field(i), col)
	}
	g.rows += rec.Rec.NumRows()
	g.bytes += rec.Size
	g.undo = append(g.undo, rec.Undo...)
}

// finish turns the gathered rows into an owned record (the builders are released).
func (g *gather) finish() Record {
	rec := g.b.NewRecordBatch()
	g.b.Release()
	return Record{Rec: rec, Size: g.bytes, Kind: g.kind, Source: g.source, Undo: g.undo}
}

// release drops the gathered rows.
func (g *gather) release() { g.b.Release() }

// Gatherable reports whether appendArray copies every column type of the schema.
func Gatherable(s *arrow.Schema) bool {
	for _, f := range s.Fields() {
		if !gatherableType(f.Type) {
			return false
		}
	}
	return true
}

func gatherableType(t arrow.DataType) bool {
	switch t := t.(type) {
	case *arrow.StructType:
		for _, f := range t.Fields() {
			if !gatherableType(f.Type) {
				return false
			}
		}
		return true
	case *arrow.ListType:
		return gatherableType(t.Elem())
	case *arrow.LargeListType:
		return gatherableType(t.Elem())
	case *arrow.MapType:
		return gatherableType(t.KeyType()) && gatherableType(t.ItemType())
	}
	switch t.ID() {
	case arrow.BOOL, arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32,
		arrow.UINT64, arrow.FLOAT32, arrow.FLOAT64, arrow.DATE32, arrow.DATE64, arrow.TIME32, arrow.TIME64,
		arrow.TIMESTAMP, arrow.DECIMAL128, arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY,
		arrow.FIXED_SIZE_BINARY:
		return true
	}
	return false
}

// valuer is an array whose elements a builder of the same type appends one by one.
type valuer[T any] interface {
	arrow.Array
	Value(int) T
}

type appender[T any] interface {
	Append(T)
	AppendNull()
}

func appendValues[T any](b appender[T], a valuer[T]) {
	for i := range a.Len() {
		if a.IsNull(i) {
			b.AppendNull()
		} else {
			b.Append(a.Value(i))
		}
	}
}

// appendArray appends a's elements to b, a builder of the same type (gatherable types only: the caller
// checked). arrow-go has no generic append of an array to a builder.
func appendArray(b array.Builder, a arrow.Array) {
	switch b := b.(type) {
	case *array.BooleanBuilder:
		appendValues(b, a.(*array.Boolean))
	case *array.Int8Builder:
		appendValues(b, a.(*array.Int8))
	case *array.Int16Builder:
		appendValues(b, a.(*array.Int16))
	case *array.Int32Builder:
		appendValues(b, a.(*array.Int32))
	case *array.Int64Builder:
		appendValues(b, a.(*array.Int64))
	case *array.Uint8Builder:
		appendValues(b, a.(*array.Uint8))
	case *array.Uint16Builder:
		appendValues(b, a.(*array.Uint16))
	case *array.Uint32Builder:
		appendValues(b, a.(*array.Uint32))
	case *array.Uint64Builder:
		appendValues(b, a.(*array.Uint64))
	case *array.Float32Builder:
		appendValues(b, a.(*array.Float32))
	case *array.Float64Builder:
		appendValues(b, a.(*array.Float64))
	case *array.Date32Builder:
		appendValues(b, a.(*array.Date32))
	case *array.Date64Builder:
		appendValues(b, a.(*array.Date64))
	case *array.Time32Builder:
		appendValues(b, a.(*array.Time32))
	case *array.Time64Builder:
		appendValues(b, a.(*array.Time64))
	case *array.TimestampBuilder:
		appendValues(b, a.(*array.Timestamp))
	case *array.Decimal128Builder:
		appendValues(b, a.(*array.Decimal128))
	case *array.StringBuilder:
		appendValues(b, a.(*array.String))
	case *array.LargeStringBuilder:
		appendValues(b, a.(*array.LargeString))
	case *array.BinaryBuilder:
		switch a := a.(type) {
		case *array.Binary:
			appendValues(b, a)
		case *array.LargeBinary:
			appendValues(b, a)
		}
	case *array.FixedSizeBinaryBuilder:
		appendValues(b, a.(*array.FixedSizeBinary))
	case *array.StructBuilder:
		sa := a.(*array.Struct)
		// Children hold a slot under a null struct too (arrow-go slices them to the struct's rows), so the
		// validity goes in alone (Append(false) would add a null to every child as well).
		valid := make([]bool, sa.Len())
		for i := range valid {
			valid[i] = sa.IsValid(i)
		}
		b.AppendValues(valid)
		for f := range sa.NumField() {
			appendArray(b.FieldBuilder(f), sa.Field(f))
		}
	case array.ListLikeBuilder: // lists, large lists and maps
		la := a.(array.ListLike)
		vb := b.ValueBuilder()
		for i := range la.Len() {
			if la.IsNull(i) {
				b.AppendNull()
				continue
			}
			b.Append(true)
			if start, end := la.ValueOffsets(i); end > start {
				vals := array.NewSlice(la.ListValues(), start, end)
				appendArray(vb, vals)
				vals.Release()
			}
		}
	default:
		panic(fmt.Sprintf("iceberg: no gathering for %s", a.DataType()))
	}
}

// recordViewSize is arrowx.ViewSize over a record's columns.
func recordViewSize(rec arrow.RecordBatch) int64 {
	var n int64
	for _, c := range rec.Columns() {
		n += arrowx.ViewSize(c)
	}
	return n
}
