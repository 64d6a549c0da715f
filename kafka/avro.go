package kafka

import (
	"context"
	"fmt"
	"math/big"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/twmb/avro"
	"github.com/twmb/franz-go/pkg/sr"
)

// Avro decodes values written by a schema-registry Avro serializer (Confluent wire format: a zero byte, the
// writer schema's ID, the Avro binary value). Each writer schema is fetched from cl once, by ID, and mapped to
// Arrow: records are structs, arrays lists, maps maps with string keys, enums strings, fixed fixed-size binary,
// a union of null and one type is that type, nullable (other unions are not supported); logical types: decimal
// (bytes or fixed) is decimal(precision, scale), date a date, timestamp-millis/micros a timestamp in
// microseconds with zone UTC and timestamp-nanos one in nanoseconds (timestamptz_ns, a format version 3 type),
// local-timestamp-* the same without zone, uuid a UUID, time-millis/micros a long of microseconds. A timestamp
// goes into its table column in the column's unit: a nanosecond value into a microsecond column (a v2 table's)
// is truncated to the microsecond, as before there were nanosecond columns. A top-level long field without a
// logical type whose Kafka Connect schema name (connect.name) is a Debezium timestamp (io.debezium.time.Timestamp
// milliseconds, MicroTimestamp microseconds, NanoTimestamp nanoseconds; a row as Debezium's
// ExtractNewRecordState transform leaves it) or Kafka Connect's Timestamp is a timestamp column (nanoseconds for
// NanoTimestamp, else microseconds; zone UTC for Kafka Connect's, none for Debezium's) read in that unit, as
// the Debezium decoder reads it: into the table's timestamp column of any unit and zone, while an integer
// column keeps the number. A record's top-level fields are the batch's columns, matched to the table's by name: a field
// the table lacks evolves the table when the writer has iceberg.WithSchemaEvolution, else it is an error. A
// schema's named-type references to other subjects are resolved through the registry.
//
// A value that is not in the wire format, names a schema the registry does not have, or does not decode is a
// bad record (ErrDecode: with Config.DeadLetterTopic it goes there); a registry that cannot be reached stops
// the sink (ErrRegistry).
func Avro(cl *sr.Client) Decoder { return newRegistryDecoder(cl, avroFormat{}) }

type avroFormat struct{}

func (avroFormat) name() string { return "Avro" }

func (avroFormat) split(payload []byte) (string, []byte, error) { return "", payload, nil }

func (avroFormat) compile(ctx context.Context, cl *sr.Client, s sr.Schema, _ string) (*writerSchema, error) {
	if s.Type != sr.TypeAvro {
		return nil, fmt.Errorf("schema type is %s, not Avro", s.Type)
	}
	var cache avro.SchemaCache
	if err := parseAvroReferences(ctx, cl, &cache, s.References, map[string]bool{}); err != nil {
		return nil, err
	}
	sch, err := cache.Parse(s.Schema)
	if err != nil {
		return nil, err
	}
	root := sch.Root()
	if root.Type != "record" {
		return nil, fmt.Errorf("the schema is a %s, want a record (its fields are the columns)", root.Type)
	}
	typ, fix, err := avroMapper{}.typ("value", *root, 0)
	if err != nil {
		return nil, err
	}
	ws := newWriterSchema(typ.(*arrow.StructType).Fields(), func(payload []byte) (map[string]any, error) {
		var v any
		rest, err := sch.Decode(payload, &v)
		if err != nil {
			return nil, err
		}
		if len(rest) != 0 {
			return nil, fmt.Errorf("%d bytes after the value", len(rest))
		}
		row, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("decoded a %T, want a record", v)
		}
		if fix != nil {
			fix(row)
		}
		return row, nil
	})
	ws.timeUnits = avroTimeUnits(*root)
	if ws.fieldUnits = recordTimeUnits(*root, nil); ws.fieldUnits != nil {
		// The record's own integer timestamps are timestamp columns (a flattened Debezium row: its
		// ExtractNewRecordState transform), read in their unit by Decode (epochColumns).
		fields := ws.schema.Fields()
		for i, f := range fields {
			if u, ok := ws.fieldUnits[f.Name]; ok {
				fields[i].Type = connectTimestampType(u, f.Name, *root)
			}
		}
		ws.schema = arrow.NewSchema(fields, nil)
	}
	return ws, nil
}

// avroTimeUnits reads the units of the integer timestamps of a Debezium envelope's before and after images
// (recordTimeUnits of each), by field name; nil for other records.
func avroTimeUnits(root avro.SchemaNode) map[string]time.Duration {
	var units map[string]time.Duration
	for _, img := range root.Fields {
		if img.Name != "before" && img.Name != "after" {
			continue
		}
		for _, rec := range append([]avro.SchemaNode{img.Type}, img.Type.Branches...) {
			if rec.Type == "record" {
				units = recordTimeUnits(rec, units)
			}
		}
	}
	return units
}

// recordTimeUnits adds to units (nil: a new map when there is any) the units of the integer timestamps among a
// record's fields: long fields without an Avro logical type whose Kafka Connect schema name (connect.name) is
// one of timeUnits, by field name.
func recordTimeUnits(rec avro.SchemaNode, units map[string]time.Duration) map[string]time.Duration {
	for _, f := range rec.Fields {
		n := connectLong(f.Type)
		name, _ := n.Props["connect.name"].(string)
		if u, ok := timeUnits[name]; ok && n.Type == "long" && n.LogicalType == "" {
			if units == nil {
				units = map[string]time.Duration{}
			}
			units[f.Name] = u
		}
	}
	return units
}

// connectLong is the non-null branch of a [null, T] union, else n.
func connectLong(n avro.SchemaNode) avro.SchemaNode {
	for _, b := range n.Branches {
		if b.Type != "null" {
			n = b
		}
	}
	return n
}

// connectTimestampType is the column type of a record's integer timestamp field of unit u: nanoseconds for a
// NanoTimestamp (timestamp_ns, a format version 3 type), else microseconds; with zone UTC for Kafka Connect's
// Timestamp (an instant), without for Debezium's, which carry a column's local date and time.
func connectTimestampType(u time.Duration, field string, rec avro.SchemaNode) arrow.DataType {
	unit := arrow.Microsecond
	if u == time.Nanosecond {
		unit = arrow.Nanosecond
	}
	zone := ""
	for _, f := range rec.Fields {
		if name, _ := connectLong(f.Type).Props["connect.name"].(string); f.Name == field && name == connectTimestamp {
			zone = "UTC"
		}
	}
	return &arrow.TimestampType{Unit: unit, TimeZone: zone}
}

// parseAvroReferences parses the schemas a schema references (depth first, each once) into cache, so that
// the schema's references to their named types resolve.
func parseAvroReferences(ctx context.Context, cl *sr.Client, cache *avro.SchemaCache, refs []sr.SchemaReference, done map[string]bool) error {
	for _, ref := range refs {
		key := fmt.Sprintf("%s/%d", ref.Subject, ref.Version)
		if done[key] {
			continue
		}
		done[key] = true
		s, err := cl.SchemaByVersion(ctx, ref.Subject, ref.Version)
		if err != nil {
			return fmt.Errorf("reference %q (subject %q version %d): %w", ref.Name, ref.Subject, ref.Version, err)
		}
		if err := parseAvroReferences(ctx, cl, cache, s.References, done); err != nil {
			return err
		}
		if _, err := cache.Parse(s.Schema.Schema); err != nil {
			return fmt.Errorf("reference %q: %w", ref.Name, err)
		}
	}
	return nil
}

// maxAvroDepth bounds the nesting of a mapped schema: a recursive record (a linked list) has no Arrow type.
const maxAvroDepth = 32

// avroMapper maps Avro schema nodes to Arrow fields, with the conversion (nil: none) that turns a decoded value
// into one shred.Maps takes for the field.
type avroMapper struct{}

func (m avroMapper) field(name string, n avro.SchemaNode, depth int) (arrow.Field, func(any) any, error) {
	if depth > maxAvroDepth {
		return arrow.Field{}, nil, fmt.Errorf("field %q: nested deeper than %d (a recursive schema?)", name, maxAvroDepth)
	}
	nullable := false
	if n.Type == "union" {
		var other []avro.SchemaNode
		for _, b := range n.Branches {
			if b.Type == "null" {
				nullable = true
			} else {
				other = append(other, b)
			}
		}
		if len(other) != 1 {
			return arrow.Field{}, nil, fmt.Errorf("field %q: a union of %d non-null types has no column type (only [null, T] unions are supported)", name, len(other))
		}
		n = other[0]
	}
	typ, fix, err := m.typ(name, n, depth)
	if err != nil {
		return arrow.Field{}, nil, err
	}
	return arrow.Field{Name: name, Type: typ, Nullable: nullable}, fix, nil
}

func (m avroMapper) typ(name string, n avro.SchemaNode, depth int) (arrow.DataType, func(any) any, error) {
	switch n.LogicalType {
	case "decimal":
		if n.Precision > 38 {
			return nil, nil, fmt.Errorf("field %q: decimal precision %d is more than 38", name, n.Precision)
		}
		scale := n.Scale
		return &arrow.Decimal128Type{Precision: int32(n.Precision), Scale: int32(scale)}, func(v any) any {
			if r, ok := v.(*big.Rat); ok {
				return r.FloatString(scale)
			}
			return v
		}, nil
	case "date":
		return arrow.FixedWidthTypes.Date32, nil, nil
	case "timestamp-millis", "timestamp-micros":
		return &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, nil, nil
	case "timestamp-nanos":
		return &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}, nil, nil
	case "local-timestamp-millis", "local-timestamp-micros":
		return &arrow.TimestampType{Unit: arrow.Microsecond}, nil, nil
	case "local-timestamp-nanos":
		return &arrow.TimestampType{Unit: arrow.Nanosecond}, nil, nil
	case "uuid":
		if n.Type == "string" || (n.Type == "fixed" && n.Size == 16) {
			return extensions.NewUUIDType(), nil, nil
		}
	case "time-millis", "time-micros":
		return arrow.PrimitiveTypes.Int64, func(v any) any {
			if d, ok := v.(time.Duration); ok {
				return d.Microseconds()
			}
			return v
		}, nil
	}
	switch n.Type {
	case "boolean":
		return arrow.FixedWidthTypes.Boolean, nil, nil
	case "int":
		return arrow.PrimitiveTypes.Int32, nil, nil
	case "long":
		return arrow.PrimitiveTypes.Int64, nil, nil
	case "float":
		return arrow.PrimitiveTypes.Float32, nil, nil
	case "double":
		return arrow.PrimitiveTypes.Float64, nil, nil
	case "string", "enum":
		return arrow.BinaryTypes.String, nil, nil
	case "bytes":
		return arrow.BinaryTypes.Binary, nil, nil
	case "fixed":
		return &arrow.FixedSizeBinaryType{ByteWidth: n.Size}, nil, nil
	case "array":
		elem, fix, err := m.field("element", *n.Items, depth+1)
		if err != nil {
			return nil, nil, fmt.Errorf("field %q: %w", name, err)
		}
		return arrow.ListOfField(elem), eachElem(fix), nil
	case "map":
		val, fix, err := m.field("value", *n.Values, depth+1)
		if err != nil {
			return nil, nil, fmt.Errorf("field %q: %w", name, err)
		}
		mt := arrow.MapOfWithMetadata(arrow.BinaryTypes.String, arrow.Metadata{}, val.Type, arrow.Metadata{})
		mt.SetItemNullable(val.Nullable)
		return mt, eachValue(fix), nil
	case "record":
		fields := make([]arrow.Field, len(n.Fields))
		fixes := map[string]func(any) any{}
		for i, f := range n.Fields {
			var fix func(any) any
			var err error
			if fields[i], fix, err = m.field(f.Name, f.Type, depth+1); err != nil {
				return nil, nil, fmt.Errorf("field %q: %w", name, err)
			}
			if fix != nil {
				fixes[f.Name] = fix
			}
		}
		return arrow.StructOf(fields...), eachField(fixes), nil
	case "null", "union":
		return nil, nil, fmt.Errorf("field %q: type %s has no column type", name, n.Type)
	}
	// A reference to a named type defined elsewhere: its own schema resolves it.
	s, err := n.Schema()
	if err != nil {
		return nil, nil, fmt.Errorf("field %q: type %q: %w", name, n.Type, err)
	}
	return m.typ(name, *s.Root(), depth+1)
}

func eachElem(fix func(any) any) func(any) any {
	if fix == nil {
		return nil
	}
	return func(v any) any {
		xs, ok := v.([]any)
		if !ok {
			return v
		}
		for i, x := range xs {
			if x != nil {
				xs[i] = fix(x)
			}
		}
		return xs
	}
}

func eachValue(fix func(any) any) func(any) any {
	if fix == nil {
		return nil
	}
	return func(v any) any {
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		for k, x := range m {
			if x != nil {
				m[k] = fix(x)
			}
		}
		return m
	}
}

func eachField(fixes map[string]func(any) any) func(any) any {
	if len(fixes) == 0 {
		return nil
	}
	return func(v any) any {
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		for k, fix := range fixes {
			if x := m[k]; x != nil {
				m[k] = fix(x)
			}
		}
		return m
	}
}
