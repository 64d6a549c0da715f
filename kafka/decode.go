package kafka

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/icewriter/iceberg/shred"
)

// ErrDecode is wrapped by the *RecordError of a record whose value cannot be decoded into the table's columns.
var ErrDecode = errors.New("kafka: cannot decode record")

// RecordError names the record (topic, partition, offset) a decoding error is about.
type RecordError struct {
	Topic     string
	Partition int32
	Offset    int64
	Err       error

	index  int         // of the record in the records build was given
	record *kgo.Record // the record, for a dead letter
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("kafka: record %s@%d: %v", partitionKey(e.Topic, e.Partition), e.Offset, e.Err)
}

func (e *RecordError) Unwrap() error { return e.Err }

// Decoder turns record values into rows of the table's value columns: the table's columns other than the
// metadata columns, in the schema it is given, or, for values that carry their own schema (Avro, Protobuf), in
// that schema (the writer matches columns by name). It returns one row per value, in order, for the values or a
// prefix of them (at least one value), with the number of values it decoded: the sink calls it again with the
// rest (a registry decoder stops where the writer schema changes). On a bad value it returns an error wrapping
// ErrDecode and the index of the value (the sink turns it into a *RecordError); any other error stops the sink.
type Decoder interface {
	Decode(mem memory.Allocator, values [][]byte, schema *arrow.Schema) (arrow.RecordBatch, int, error)
	// check validates the value schema once, at New; the error names the column.
	check(schema *arrow.Schema) error
}

// JSON decodes each value as one JSON object whose keys are column names (shred.JSONLines' rules: a missing key
// or null is null, timestamps are RFC 3339 strings or epoch seconds, binary columns take base64). A key with no
// column is an error. A variant column (a format v3 table's) takes its key's JSON value, of any shape, as is
// (a JSON null: the variant null; a missing key: null), as JSONVariant does.
func JSON() Decoder { return jsonDecoder{} }

type jsonDecoder struct{}

func (jsonDecoder) check(*arrow.Schema) error { return nil }

func (jsonDecoder) Decode(mem memory.Allocator, values [][]byte, schema *arrow.Schema) (arrow.RecordBatch, int, error) {
	var split *variantSplit // the variant columns' documents, taken out of the values
	if hasVariant(schema) {
		split = newVariantSplit(schema)
	}
	var buf bytes.Buffer
	for i, v := range values {
		if bytes.IndexByte(v, '\n') >= 0 { // one value per line: a pretty-printed value is compacted first
			var c bytes.Buffer
			if err := json.Compact(&c, v); err != nil {
				return nil, i, fmt.Errorf("%w: %w", ErrDecode, err)
			}
			v = c.Bytes()
		}
		if len(bytes.TrimSpace(v)) == 0 { // JSONLines skips blank lines: an empty value would shift the rows
			return nil, i, fmt.Errorf("%w: empty value", ErrDecode)
		}
		if split != nil {
			var err error
			if v, err = split.take(v); err != nil {
				return nil, i, fmt.Errorf("%w: %w", ErrDecode, err)
			}
		}
		buf.Write(v)
		buf.WriteByte('\n')
	}
	lines := func(s *arrow.Schema) (arrow.RecordBatch, error) { return shred.JSONLines(mem, buf.Bytes(), s) }
	var rec arrow.RecordBatch
	var err error
	if split != nil {
		rec, err = withVariants(mem, schema, len(values), split.doc, lines)
	} else {
		rec, err = lines(schema)
	}
	if err != nil {
		row := 0
		if fe := (*shred.FieldError)(nil); errors.As(err, &fe) {
			row = fe.Row
		}
		return nil, row, fmt.Errorf("%w: %w", ErrDecode, err)
	}
	return rec, len(values), nil
}

// Raw puts each value's bytes, unchanged, into the binary column named column, which must be the table's only
// value column (the others being metadata columns).
func Raw(column string) Decoder { return rawDecoder{column: column} }

type rawDecoder struct{ column string }

func (d rawDecoder) check(schema *arrow.Schema) error {
	if schema.NumFields() != 1 || schema.Field(0).Name != d.column {
		return fmt.Errorf("%w: Raw(%q): the table's value columns are %v, want only %q (others must be metadata columns)",
			ErrConfig, d.column, fieldNames(schema), d.column)
	}
	if t := schema.Field(0).Type.ID(); t != arrow.BINARY && t != arrow.LARGE_BINARY {
		return fmt.Errorf("%w: Raw(%q): column %q is %s, want binary", ErrConfig, d.column, d.column, schema.Field(0).Type)
	}
	return nil
}

func (d rawDecoder) Decode(mem memory.Allocator, values [][]byte, schema *arrow.Schema) (arrow.RecordBatch, int, error) {
	b := array.NewBuilder(mem, schema.Field(0).Type)
	defer b.Release()
	switch bb := b.(type) {
	case *array.BinaryBuilder:
		for _, v := range values {
			if v == nil {
				bb.AppendNull()
			} else {
				bb.Append(v)
			}
		}
	}
	col := b.NewArray()
	defer col.Release()
	return array.NewRecordBatch(schema, []arrow.Array{col}, int64(len(values))), len(values), nil
}

func fieldNames(s *arrow.Schema) []string {
	names := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		names[i] = f.Name
	}
	return names
}

// MetadataColumns names the table columns that receive each record's metadata; an empty name: not written.
// Topic is a string column, Partition an int32 or int64 one, Offset int64, Timestamp a timestamp (any unit),
// Key binary or string (null for a record without a key). Headers is map<string, binary> (a key given twice:
// its last value) or list<struct<key: string, value: binary>> (every header, in order); a value may be binary
// or string, and a record without headers has an empty map or list.
type MetadataColumns struct {
	Topic, Partition, Offset, Timestamp, Key string
	Headers                                  string
}

type metaKind int

const (
	metaNone metaKind = iota
	metaTopic
	metaPartition
	metaOffset
	metaTimestamp
	metaKey
	metaHeaders
)

// rowPlan assembles a poll's rows in the table's schema: the decoder's value columns, then the metadata
// columns, each at its table position.
type rowPlan struct {
	table  *arrow.Schema
	values *arrow.Schema // the table's columns minus the metadata ones, in table order
	kinds  []metaKind    // per table column
	keys   []string      // the table's key columns, for change decoders
}

func newRowPlan(tbl *arrow.Schema, keys []string, dec Decoder, m MetadataColumns) (*rowPlan, error) {
	names := map[string]metaKind{}
	for kind, name := range map[metaKind]string{metaTopic: m.Topic, metaPartition: m.Partition,
		metaOffset: m.Offset, metaTimestamp: m.Timestamp, metaKey: m.Key, metaHeaders: m.Headers} {
		if name != "" {
			names[name] = kind
		}
	}
	p := &rowPlan{table: tbl, keys: keys, kinds: make([]metaKind, tbl.NumFields())}
	var values []arrow.Field
	for i, f := range tbl.Fields() {
		kind, ok := names[f.Name]
		if !ok {
			values = append(values, f)
			continue
		}
		delete(names, f.Name)
		if err := checkMetaType(kind, f); err != nil {
			return nil, err
		}
		p.kinds[i] = kind
	}
	for name := range names {
		return nil, fmt.Errorf("%w: metadata column %q is not a column of the table", ErrConfig, name)
	}
	p.values = arrow.NewSchema(values, nil)
	if err := dec.check(p.values); err != nil {
		return nil, err
	}
	return p, nil
}

func checkMetaType(kind metaKind, f arrow.Field) error {
	id := f.Type.ID()
	ok := false
	switch kind {
	case metaTopic:
		ok = id == arrow.STRING || id == arrow.LARGE_STRING
	case metaPartition:
		ok = id == arrow.INT32 || id == arrow.INT64
	case metaOffset:
		ok = id == arrow.INT64
	case metaTimestamp:
		ok = id == arrow.TIMESTAMP
	case metaKey:
		ok = id == arrow.BINARY || id == arrow.STRING
	case metaHeaders:
		ok = headersType(f.Type)
	}
	if !ok {
		return fmt.Errorf("%w: metadata column %q is %s, a type it cannot hold", ErrConfig, f.Name, f.Type)
	}
	return nil
}

// build decodes one partition's records, or a prefix of them, into a batch in the table's schema or, for a
// decoder whose values carry their own schema (Avro, Protobuf), into the values' columns followed by the
// metadata columns: the writer matches columns by name. It returns the number of records the batch holds. A
// bad value is a *RecordError wrapping ErrDecode; any other error (a registry that cannot be reached) is the
// decoder's.
func (p *rowPlan) build(mem memory.Allocator, dec Decoder, recs []*kgo.Record) (arrow.RecordBatch, int, error) {
	values := make([][]byte, len(recs))
	for i, r := range recs {
		values[i] = r.Value
	}
	var vals arrow.RecordBatch
	var n int
	var err error
	if cd, ok := dec.(changeDecoder); ok {
		vals, n, err = cd.decodeChanges(mem, recs, p.values, p.keys)
	} else {
		vals, n, err = dec.Decode(mem, values, p.values)
	}
	if err != nil {
		if !errors.Is(err, ErrDecode) {
			return nil, 0, err
		}
		bad := min(max(n, 0), len(recs)-1)
		r := recs[bad]
		return nil, 0, &RecordError{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Err: err, index: bad, record: r}
	}
	defer vals.Release()
	recs = recs[:n]
	if !vals.Schema().Equal(p.values) {
		return p.appendMeta(mem, vals, recs), n, nil
	}
	if int(vals.NumCols()) != len(p.kinds) { // metadata columns to add
		cols := make([]arrow.Array, len(p.kinds))
		v := 0
		for i, kind := range p.kinds {
			if kind == metaNone {
				cols[i] = vals.Column(v)
				cols[i].Retain()
				v++
				continue
			}
			cols[i] = metaColumn(mem, kind, p.table.Field(i).Type, recs)
		}
		defer releaseAll(cols)
		return array.NewRecordBatch(p.table, cols, int64(n)), n, nil
	}
	vals.Retain()
	return vals, n, nil
}

// appendMeta is vals' columns followed by the metadata columns (those vals lacks).
func (p *rowPlan) appendMeta(mem memory.Allocator, vals arrow.RecordBatch, recs []*kgo.Record) arrow.RecordBatch {
	fields := slices.Clone(vals.Schema().Fields())
	cols := slices.Clone(vals.Columns())
	for _, c := range cols {
		c.Retain()
	}
	for i, kind := range p.kinds {
		if kind == metaNone || vals.Schema().HasField(p.table.Field(i).Name) {
			continue
		}
		fields = append(fields, p.table.Field(i))
		cols = append(cols, metaColumn(mem, kind, p.table.Field(i).Type, recs))
	}
	defer releaseAll(cols)
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, int64(len(recs)))
}

func releaseAll(cols []arrow.Array) {
	for _, c := range cols {
		c.Release()
	}
}

func metaColumn(mem memory.Allocator, kind metaKind, typ arrow.DataType, recs []*kgo.Record) arrow.Array {
	b := array.NewBuilder(mem, typ)
	defer b.Release()
	if kind == metaHeaders {
		appendHeaders(b, recs)
		return b.NewArray()
	}
	for _, r := range recs {
		switch bb := b.(type) {
		case *array.StringBuilder:
			if kind == metaTopic {
				bb.Append(r.Topic)
			} else if r.Key == nil {
				bb.AppendNull()
			} else {
				bb.Append(string(r.Key))
			}
		case *array.LargeStringBuilder:
			bb.Append(r.Topic)
		case *array.Int32Builder:
			bb.Append(r.Partition)
		case *array.Int64Builder:
			if kind == metaPartition {
				bb.Append(int64(r.Partition))
			} else {
				bb.Append(r.Offset)
			}
		case *array.TimestampBuilder:
			unit := typ.(*arrow.TimestampType).Unit
			ts, _ := arrow.TimestampFromTime(r.Timestamp, unit)
			bb.Append(ts)
		case *array.BinaryBuilder:
			if r.Key == nil {
				bb.AppendNull()
			} else {
				bb.Append(r.Key)
			}
		}
	}
	return b.NewArray()
}

// field reads one top-level field of a JSON object (numbers as json.Number).
func (jsonDecoder) field(value []byte, name string) (any, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(value, &m); err != nil {
		return nil, err
	}
	raw, ok := m[name]
	if !ok {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}
