package kafka

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/icewriter/iceberg/shred"
)

// ErrRegistry is wrapped by the errors of a schema registry that cannot be reached or answers with an error
// other than "schema not found": the sink stops on them (a record is not bad because the registry is down).
var ErrRegistry = errors.New("kafka: schema registry")

// registryTimeout bounds one schema lookup of a decoder: Decode has no context of its own.
const registryTimeout = 30 * time.Second

// schemaFormat is what Avro and Protobuf add to the registry decoder: turning a registered schema into Arrow
// fields and a value decoder.
type schemaFormat interface {
	name() string
	// split separates what selects a type of the schema (Protobuf's message indexes; "" for Avro) from the
	// value's bytes.
	split(payload []byte) (sel string, value []byte, err error)
	// compile builds the decoding state of the selected type of a registered schema.
	compile(ctx context.Context, cl *sr.Client, s sr.Schema, sel string) (*writerSchema, error)
}

// schemaKey names a writer schema: its registry ID and the selected type.
type schemaKey struct {
	id  int
	sel string
}

// writerSchema is a registered schema, ready to decode the values written with it.
type writerSchema struct {
	schema *arrow.Schema // the columns: the record's or message's top-level fields
	// decode turns a value's bytes after the wire format's header into one row, keyed by column name, with
	// values shred.Maps takes.
	decode func(payload []byte) (map[string]any, error)
	// timeUnits (Avro) are the units of the integer timestamps of a Debezium envelope's before and after images,
	// by field name, from their Kafka Connect schema names (connect.name), which no Avro logical type carries.
	timeUnits map[string]time.Duration
	// fieldUnits (Avro) are the units of the record's own integer timestamps, by column, read the same way:
	// schema types those columns as timestamps, and Decode turns the numbers into times (epochColumns).
	fieldUnits map[string]time.Duration
}

func newWriterSchema(fields []arrow.Field, decode func([]byte) (map[string]any, error)) *writerSchema {
	return &writerSchema{schema: arrow.NewSchema(fields, nil), decode: decode}
}

// registryDecoder decodes values in the Confluent wire format (a zero byte, the schema ID as a big-endian
// uint32, then the value written with that schema): it fetches each writer schema once by ID and caches it.
type registryDecoder struct {
	cl     *sr.Client
	format schemaFormat

	mu   sync.Mutex
	byID map[schemaKey]*writerSchema
}

func newRegistryDecoder(cl *sr.Client, f schemaFormat) *registryDecoder {
	return &registryDecoder{cl: cl, format: f, byID: map[schemaKey]*writerSchema{}}
}

// check accepts any table: the values bring their own schema, matched to the table's columns by name.
func (d *registryDecoder) check(*arrow.Schema) error { return nil }

// Decode decodes the values up to the first one written with another schema (or another message of it) than
// the first value's: its batch's schema is that writer schema's, not the table's. The writer matches columns by
// name, evolves the table when it may, and fills absent optional columns with nulls.
func (d *registryDecoder) Decode(mem memory.Allocator, values [][]byte, table *arrow.Schema) (arrow.RecordBatch, int, error) {
	if len(values) == 0 {
		return nil, 0, fmt.Errorf("kafka: %s: no values to decode", d.format.name())
	}
	rows := make([]map[string]any, 0, len(values))
	var first schemaKey
	var ws *writerSchema
	for i, v := range values {
		key, payload, err := d.header(v)
		if err != nil {
			return nil, i, err
		}
		id := key.id
		if i == 0 {
			first = key
			if ws, err = d.schema(key); err != nil {
				return nil, i, err
			}
		} else if key != first {
			break
		}
		row, err := ws.decode(payload)
		if err != nil {
			return nil, i, fmt.Errorf("%w: %s value of schema %d: %w", ErrDecode, d.format.name(), id, err)
		}
		rows = append(rows, row)
	}
	sc := tableUnits(ws.schema, table)
	var err error
	if ws.fieldUnits != nil {
		var row int
		if sc, row, err = epochColumns(rows, sc, table, ws.fieldUnits); err != nil {
			return nil, row, fmt.Errorf("%w: %s value of schema %d: %w", ErrDecode, d.format.name(), first.id, err)
		}
	}
	rec, err := shred.Maps(mem, rows, sc)
	if err != nil {
		row := 0
		if fe := (*shred.FieldError)(nil); errors.As(err, &fe) {
			row = fe.Row
		}
		return nil, row, fmt.Errorf("%w: %w", ErrDecode, err)
	}
	return rec, len(rows), nil
}

// schema returns the writer schema of an ID, fetching and compiling it on first sight. A schema the registry
// does not have makes the value bad (ErrDecode); any other failure is the registry's (ErrRegistry).
func (d *registryDecoder) schema(key schemaKey) (*writerSchema, error) {
	id := key.id
	d.mu.Lock()
	ws, ok := d.byID[key]
	d.mu.Unlock()
	if ok {
		return ws, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), registryTimeout)
	defer cancel()
	s, err := d.cl.SchemaByID(ctx, id)
	if err != nil {
		if isNotFound(err) {
			return nil, fmt.Errorf("%w: %s: schema ID %d is not in the registry: %w", ErrDecode, d.format.name(), id, err)
		}
		return nil, fmt.Errorf("%w: fetching schema %d: %w", ErrRegistry, id, err)
	}
	ws, err = d.format.compile(ctx, d.cl, s, key.sel)
	if err != nil {
		return nil, fmt.Errorf("%w: %s schema %d: %w", ErrDecode, d.format.name(), id, err)
	}
	d.mu.Lock()
	d.byID[key] = ws
	d.mu.Unlock()
	return ws, nil
}

func isNotFound(err error) bool {
	var re *sr.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusNotFound
}

// RegistrySchema returns the Arrow schema the values of a subject's latest version decode into (Avro or
// Protobuf, by the schema's type; for Protobuf, the file's first message): what a table to receive them
// is created with (iceberg.WithCreate). Fields that are not nullable in the schema are required columns. An
// Avro long with a Debezium connect.name is a timestamp column (see Avro).
func RegistrySchema(ctx context.Context, cl *sr.Client, subject string) (*arrow.Schema, error) {
	s, err := cl.SchemaByVersion(ctx, subject, -1)
	if err != nil {
		return nil, fmt.Errorf("%w: subject %q: %w", ErrRegistry, subject, err)
	}
	var f schemaFormat
	switch s.Type {
	case sr.TypeAvro:
		f = avroFormat{}
	case sr.TypeProtobuf:
		f = protoFormat{}
	default:
		return nil, fmt.Errorf("%w: subject %q: schema type %s: want Avro or Protobuf", ErrConfig, subject, s.Type)
	}
	ws, err := f.compile(ctx, cl, s.Schema, "")
	if err != nil {
		return nil, fmt.Errorf("kafka: subject %q: %w", subject, err)
	}
	return ws.schema, nil
}

// header reads the wire format's header: the writer schema's key, and the value after it.
func (d *registryDecoder) header(value []byte) (schemaKey, []byte, error) {
	var header sr.ConfluentHeader
	id, payload, err := header.DecodeID(value)
	var sel string
	if err == nil {
		sel, payload, err = d.format.split(payload)
	}
	if err != nil {
		return schemaKey{}, nil, fmt.Errorf("%w: %s: not in the schema registry's wire format: %w", ErrDecode, d.format.name(), err)
	}
	return schemaKey{id, sel}, payload, nil
}

// field decodes the value and returns one of its top-level fields.
func (d *registryDecoder) field(value []byte, name string) (any, error) {
	key, payload, err := d.header(value)
	if err != nil {
		return nil, err
	}
	ws, err := d.schema(key)
	if err != nil {
		return nil, err
	}
	row, err := ws.decode(payload)
	if err != nil {
		return nil, err
	}
	return row[name], nil
}

// epochColumns turns the integer timestamps of rows (columns of known units) into times, as the Debezium
// decoder does with its images' (epochTimes), and returns schema with those columns typed as the table's: a
// timestamp column of the table's unit and zone (the number names no zone, as in the Debezium decoder), an
// integer column as int64, which keeps the number.
func epochColumns(rows []map[string]any, schema, table *arrow.Schema, units map[string]time.Duration) (*arrow.Schema, int, error) {
	stamps := make(map[string]bool, len(units))
	fields := schema.Fields()
	for i, f := range fields {
		if _, ok := units[f.Name]; !ok {
			continue
		}
		var col arrow.DataType
		if table != nil {
			if j := table.FieldIndices(f.Name); len(j) > 0 {
				col = table.Field(j[0]).Type
			}
		}
		switch {
		case col != nil && arrow.IsInteger(col.ID()):
			fields[i].Type = arrow.PrimitiveTypes.Int64
			continue
		case col != nil && col.ID() == arrow.TIMESTAMP:
			fields[i].Type = col
		}
		stamps[f.Name] = true
	}
	for i, row := range rows {
		if err := epochTimes(row, units, stamps); err != nil {
			return nil, i, err
		}
	}
	return arrow.NewSchema(fields, nil), 0, nil
}

// tableUnits is the writer schema with each timestamp, at any depth, in the unit of the table's column at the
// same path (columns and struct fields matched by name), so that a nanosecond column receives nanoseconds and a
// microsecond one microseconds; columns the table lacks keep the writer's unit. It is schema itself when no
// unit differs.
func tableUnits(schema, table *arrow.Schema) *arrow.Schema {
	if table == nil {
		return schema
	}
	fields, changed := fieldsInUnits(schema.Fields(), table.Fields())
	if !changed {
		return schema
	}
	return arrow.NewSchema(fields, nil)
}

func fieldsInUnits(fields, table []arrow.Field) ([]arrow.Field, bool) {
	var out []arrow.Field
	for i, f := range fields {
		j := slices.IndexFunc(table, func(t arrow.Field) bool { return t.Name == f.Name })
		if j < 0 {
			continue
		}
		typ, changed := typeInUnits(f.Type, table[j].Type)
		if !changed {
			continue
		}
		if out == nil {
			out = slices.Clone(fields)
		}
		out[i].Type = typ
	}
	if out == nil {
		return fields, false
	}
	return out, true
}

func typeInUnits(w, t arrow.DataType) (arrow.DataType, bool) {
	switch wt := w.(type) {
	case *arrow.TimestampType:
		if tt, ok := t.(*arrow.TimestampType); ok && tt.Unit != wt.Unit {
			return &arrow.TimestampType{Unit: tt.Unit, TimeZone: wt.TimeZone}, true
		}
	case *arrow.StructType:
		if tt, ok := t.(*arrow.StructType); ok {
			if fields, changed := fieldsInUnits(wt.Fields(), tt.Fields()); changed {
				return arrow.StructOf(fields...), true
			}
		}
	case *arrow.ListType:
		if tt, ok := t.(arrow.ListLikeType); ok {
			if elem, changed := typeInUnits(wt.Elem(), tt.Elem()); changed {
				f := wt.ElemField()
				f.Type = elem
				return arrow.ListOfField(f), true
			}
		}
	case *arrow.MapType:
		if tt, ok := t.(*arrow.MapType); ok {
			if item, changed := typeInUnits(wt.ItemType(), tt.ItemType()); changed {
				mt := arrow.MapOf(wt.KeyType(), item)
				mt.SetItemNullable(wt.ItemField().Nullable)
				return mt, true
			}
		}
	}
	return w, false
}
