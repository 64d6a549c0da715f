package kafka

import (
	"cmp"
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
	fields []arrow.Field
	// decode turns a value's bytes after the wire format's header into one row, keyed by column name, with
	// values shred.Maps takes.
	decode func(payload []byte) (map[string]any, error)
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

// Decode decodes values written with any registered schemas into one batch whose columns are the union of
// their schemas' fields (by name, in the order of first appearance; a field some schemas lack is nullable).
// Where two schemas give a field different types, the schema with the higher ID (the newer one) wins, and the
// other's values are converted to it or fail as bad values. The batch's schema is the values', not the
// table's: the writer matches columns by name, evolves the table when it may, and fills absent optional
// columns with nulls.
func (d *registryDecoder) Decode(mem memory.Allocator, values [][]byte, _ *arrow.Schema) (arrow.RecordBatch, int, error) {
	var header sr.ConfluentHeader
	rows := make([]map[string]any, len(values))
	used := map[schemaKey]*writerSchema{}
	for i, v := range values {
		id, payload, err := header.DecodeID(v)
		var sel string
		if err == nil {
			sel, payload, err = d.format.split(payload)
		}
		if err != nil {
			return nil, i, fmt.Errorf("%w: %s: not in the schema registry's wire format: %w", ErrDecode, d.format.name(), err)
		}
		key := schemaKey{id, sel}
		ws, err := d.schema(key)
		if err != nil {
			return nil, i, err
		}
		row, err := ws.decode(payload)
		if err != nil {
			return nil, i, fmt.Errorf("%w: %s value of schema %d: %w", ErrDecode, d.format.name(), id, err)
		}
		rows[i], used[key] = row, ws
	}
	schema := mergeFields(used)
	rec, err := shred.Maps(mem, rows, schema)
	if err != nil {
		row := 0
		if fe := (*shred.FieldError)(nil); errors.As(err, &fe) {
			row = fe.Row
		}
		return nil, row, fmt.Errorf("%w: %w", ErrDecode, err)
	}
	return rec, 0, nil
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

// mergeFields is the union of the schemas' top-level fields, in ascending ID order.
func mergeFields(used map[schemaKey]*writerSchema) *arrow.Schema {
	ids := make([]schemaKey, 0, len(used))
	for k := range used {
		ids = append(ids, k)
	}
	slices.SortFunc(ids, func(a, b schemaKey) int { return cmp.Or(cmp.Compare(a.id, b.id), cmp.Compare(a.sel, b.sel)) })
	var fields []arrow.Field
	at := map[string]int{}
	seen := map[string]int{}
	for _, id := range ids {
		for _, f := range used[id].fields {
			seen[f.Name]++
			i, ok := at[f.Name]
			if !ok {
				at[f.Name] = len(fields)
				fields = append(fields, f)
				continue
			}
			nullable := fields[i].Nullable || f.Nullable
			fields[i] = f
			fields[i].Nullable = nullable
		}
	}
	for i := range fields {
		if seen[fields[i].Name] < len(ids) {
			fields[i].Nullable = true
		}
	}
	return arrow.NewSchema(fields, nil)
}

// RegistrySchema returns the Arrow schema the values of a subject's latest version decode into (Avro or
// Protobuf, by the schema's type; for Protobuf, the file's first message): what a table to receive them
// is created with (iceberg.WithCreate). Fields that are not nullable in the schema are required columns.
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
	return arrow.NewSchema(ws.fields, nil), nil
}
