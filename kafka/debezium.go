package kafka

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/shred"
)

// DebeziumOptions configures the Debezium decoder.
type DebeziumOptions struct {
	// Keys are the key columns: an update whose before image has another key deletes that key. Default: the
	// table's identifier fields (what the writer upserts by); with Keys, the writer gets iceberg.WithKeys(Keys).
	Keys []string
	// Version names the column that carries each change's version, so that a replayed change older than its
	// key's last change is skipped (iceberg.ChangeColumns.Version): the event's source.lsn (PostgreSQL), or
	// with VersionFromOffset the record's offset (monotonic per partition, and Debezium puts a key's changes in
	// one partition). Default: "" (no version: changes apply in offset order, which the sink keeps).
	Version           string
	VersionFromOffset bool
	// Op and BeforePrefix name the op column and prefix the before-image key columns, as
	// iceberg.ChangeColumns does. Default: "op" and "before_".
	Op, BeforePrefix string
	// Registry, when set, makes the events Avro through this schema registry (the AvroConverter's output, in
	// the Confluent wire format) instead of JSON; logical types map as for Avro. Default: nil (JSON).
	Registry *sr.Client
}

// Debezium decodes Debezium change events in JSON (the JsonConverter's output, with or without its
// schema/payload envelope) or Avro (DebeziumOptions.Registry) into rows for the writer's Apply: the after image of a create ("c"), a snapshot read
// ("r") or an update ("u"), the before image of a delete ("d"), with the op, the before image's key columns
// and the version. The sink then applies them (upsert or delete by key) instead of appending, so the table
// must have a key (identifier fields, or Keys). The writer is opened with the matching
// iceberg.WithChangeColumns (and WithKeys when Keys is set) before Config.WriterOptions, which may override them;
// a writer given in Config.Writer must have been opened with them.
//
// A field the table lacks is an error (as for JSON); values follow JSON's rules. A number in a timestamp
// column is read in the unit its schema names (io.debezium.time.Timestamp: milliseconds, MicroTimestamp:
// microseconds, NanoTimestamp: nanoseconds, exact in a timestamp_ns column; an integer column keeps the
// number): the JsonConverter's schema envelope's, or the Avro schema's connect.name; a JSON event without an
// envelope is read as epoch microseconds. Strings are RFC 3339 (ZonedTimestamp). Configure the connector
// with decimal.handling.mode=string. A variant column (a format v3 table's) takes a
// JSON column's value (io.debezium.data.Json, a string of JSON text) as the document it holds: the JSON null
// is the variant null, a null field NULL. Tombstones (null values after a delete, for log
// compaction) are skipped; truncate ("t") and message ("m") events are bad records.
func Debezium(o DebeziumOptions) Decoder {
	if o.Op == "" {
		o.Op = iceberg.DefaultOpColumn
	}
	if o.BeforePrefix == "" {
		o.BeforePrefix = iceberg.DefaultBeforePrefix
	}
	d := &debeziumDecoder{o: o}
	if o.Registry != nil {
		d.avro = newRegistryDecoder(o.Registry, avroFormat{})
	}
	return d
}

type debeziumDecoder struct {
	o    DebeziumOptions
	avro *registryDecoder // nil: JSON events
}

// changeDecoder is a decoder of change events: the sink applies its rows (Writer.Apply) instead of writing
// them, and opens the writer with its options first.
type changeDecoder interface {
	opColumn() string
	writerOptions() []iceberg.Option
	// decodeChanges is Decode with the records (their offsets) and the key columns.
	decodeChanges(mem memory.Allocator, recs []*kgo.Record, schema *arrow.Schema, keys []string) (arrow.RecordBatch, int, error)
}

func (d *debeziumDecoder) opColumn() string { return d.o.Op }

func (d *debeziumDecoder) writerOptions() []iceberg.Option {
	opts := []iceberg.Option{iceberg.WithChangeColumns(iceberg.ChangeColumns{Op: d.o.Op, Version: d.o.Version,
		BeforePrefix: d.o.BeforePrefix})}
	if len(d.o.Keys) > 0 {
		opts = append(opts, iceberg.WithKeys(d.o.Keys...))
	}
	return opts
}

func (d *debeziumDecoder) check(*arrow.Schema) error {
	if d.o.VersionFromOffset && d.o.Version == "" {
		return fmt.Errorf("%w: Debezium: VersionFromOffset needs a Version column name", ErrConfig)
	}
	return nil
}

// Decode is decodeChanges without records: versions cannot come from offsets.
func (d *debeziumDecoder) Decode(mem memory.Allocator, values [][]byte, schema *arrow.Schema) (arrow.RecordBatch, int, error) {
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		recs[i] = &kgo.Record{Value: v, Offset: -1}
	}
	return d.decodeChanges(mem, recs, schema, d.o.Keys)
}

func (d *debeziumDecoder) decodeChanges(mem memory.Allocator, recs []*kgo.Record, schema *arrow.Schema, keys []string) (arrow.RecordBatch, int, error) {
	if len(d.o.Keys) > 0 {
		keys = d.o.Keys
	}
	target, err := d.target(schema, keys)
	if err != nil {
		return nil, 0, err
	}
	stamps := map[string]bool{} // the timestamp columns, which take an envelope's integer timestamps as times
	for _, f := range target.Fields() {
		if f.Type.ID() == arrow.TIMESTAMP {
			stamps[f.Name] = true
		}
	}
	rows := make([]map[string]any, len(recs))
	for i, r := range recs {
		if rows[i], err = d.row(r, keys, stamps); err != nil {
			if errors.Is(err, ErrRegistry) {
				return nil, i, err // the registry is down: the event is not bad
			}
			return nil, i, fmt.Errorf("%w: Debezium event: %w", ErrDecode, err)
		}
	}
	rec, err := mapsWithVariants(mem, rows, target, shred.MapOptions{EpochUnit: arrow.Microsecond})
	if err != nil {
		row := 0
		if fe := (*shred.FieldError)(nil); errors.As(err, &fe) {
			row = fe.Row
		}
		return nil, row, fmt.Errorf("%w: %w", ErrDecode, err)
	}
	return rec, len(recs), nil
}

// target is the schema of the decoded rows: the table's value columns, all nullable (a delete's before image
// may hold only the key), then the op, version and before-image key columns the table does not have.
func (d *debeziumDecoder) target(schema *arrow.Schema, keys []string) (*arrow.Schema, error) {
	fields := make([]arrow.Field, 0, schema.NumFields()+len(keys)+2)
	for _, f := range schema.Fields() {
		f.Nullable = true
		fields = append(fields, f)
	}
	add := func(name string, typ arrow.DataType) {
		if !schema.HasField(name) {
			fields = append(fields, arrow.Field{Name: name, Type: typ, Nullable: true})
		}
	}
	add(d.o.Op, arrow.BinaryTypes.String)
	if d.o.Version != "" {
		add(d.o.Version, arrow.PrimitiveTypes.Int64)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: Debezium: the table has no identifier fields and DebeziumOptions.Keys is empty: changes need a key", ErrConfig)
	}
	for _, k := range keys {
		idx := schema.FieldIndices(k)
		if len(idx) == 0 {
			return nil, fmt.Errorf("%w: Debezium: key column %q is not a value column of the table", ErrConfig, k)
		}
		add(d.o.BeforePrefix+k, schema.Field(idx[0]).Type)
	}
	return arrow.NewSchema(fields, nil), nil
}

// row turns one event into a change row; a tombstone into a row whose op is null (put drops it).
func (d *debeziumDecoder) row(r *kgo.Record, keys []string, stamps map[string]bool) (map[string]any, error) {
	if r.Value == nil {
		return map[string]any{}, nil
	}
	ev, units, err := d.event(r.Value)
	if err != nil {
		return nil, err
	}
	if p, ok := ev["payload"].(map[string]any); ok && ev["op"] == nil { // the JsonConverter's schema envelope
		units = envelopeTimeUnits(ev["schema"])
		ev = p
	}
	op, _ := ev["op"].(string)
	before, _ := ev["before"].(map[string]any)
	after, _ := ev["after"].(map[string]any)
	for _, img := range []map[string]any{before, after} {
		if err := epochTimes(img, units, stamps); err != nil {
			return nil, err
		}
	}
	var row map[string]any
	switch op {
	case "c", "r", "u":
		if after == nil {
			return nil, fmt.Errorf("op %q without an after image", op)
		}
		row = after
	case "d":
		if before == nil {
			return nil, fmt.Errorf("delete without a before image")
		}
		row = maps(before)
	default:
		return nil, fmt.Errorf("op %q cannot be applied (want c, r, u or d)", op)
	}
	row[d.o.Op] = op
	if before != nil {
		for _, k := range keys {
			row[d.o.BeforePrefix+k] = before[k]
		}
	}
	if d.o.Version != "" {
		v, err := d.version(r, ev)
		if err != nil {
			return nil, err
		}
		row[d.o.Version] = v
	}
	return row, nil
}

// timeUnits are the units of the integer timestamps Debezium sends, by their Kafka Connect schema name.
var timeUnits = map[string]time.Duration{
	"io.debezium.time.Timestamp":      time.Millisecond,
	connectTimestamp:                  time.Millisecond,
	"io.debezium.time.MicroTimestamp": time.Microsecond,
	"io.debezium.time.NanoTimestamp":  time.Nanosecond,
}

// connectTimestamp is Kafka Connect's own Timestamp logical type: epoch milliseconds of an instant.
const connectTimestamp = "org.apache.kafka.connect.data.Timestamp"

// envelopeTimeUnits reads, from a JsonConverter schema envelope, the unit of each integer timestamp field of
// the before and after images, by field name; nil when the schema names none.
func envelopeTimeUnits(schema any) map[string]time.Duration {
	var units map[string]time.Duration
	sc, _ := schema.(map[string]any)
	images, _ := sc["fields"].([]any)
	for _, img := range images {
		im, _ := img.(map[string]any)
		if f, _ := im["field"].(string); f != "before" && f != "after" {
			continue
		}
		fields, _ := im["fields"].([]any)
		for _, f := range fields {
			fm, _ := f.(map[string]any)
			name, _ := fm["name"].(string)
			field, _ := fm["field"].(string)
			if u, ok := timeUnits[name]; ok && field != "" {
				if units == nil {
					units = map[string]time.Duration{}
				}
				units[field] = u
			}
		}
	}
	return units
}

// epochTimes turns the integer timestamps of an image whose unit its schema named (units) into times, so that
// each goes into its column exactly whatever the column's unit; only for timestamp columns (stamps: an integer
// column keeps the number). Numbers without a unit stay epoch microseconds.
func epochTimes(img map[string]any, units map[string]time.Duration, stamps map[string]bool) error {
	for field, unit := range units {
		if !stamps[field] {
			continue
		}
		var v int64
		switch n := img[field].(type) {
		case json.Number:
			var err error
			if v, err = n.Int64(); err != nil {
				return fmt.Errorf("field %q: timestamp %s is not an integer", field, n)
			}
		case int64:
			v = n
		default:
			continue
		}
		switch unit {
		case time.Millisecond:
			img[field] = time.UnixMilli(v).UTC()
		case time.Microsecond:
			img[field] = time.UnixMicro(v).UTC()
		default:
			img[field] = time.Unix(0, v).UTC()
		}
	}
	return nil
}

// event decodes an event into its fields: JSON (numbers as json.Number), or Avro through the registry with the
// units of its images' integer timestamps (the schema's).
func (d *debeziumDecoder) event(value []byte) (map[string]any, map[string]time.Duration, error) {
	if d.avro != nil {
		key, payload, err := d.avro.header(value)
		if err != nil {
			return nil, nil, err
		}
		ws, err := d.avro.schema(key)
		if err != nil {
			return nil, nil, err
		}
		ev, err := ws.decode(payload)
		return ev, ws.timeUnits, err
	}
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.UseNumber()
	var ev map[string]any
	if err := dec.Decode(&ev); err != nil {
		return nil, nil, err
	}
	return ev, nil, nil
}

func maps(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (d *debeziumDecoder) version(r *kgo.Record, ev map[string]any) (int64, error) {
	if d.o.VersionFromOffset {
		if r.Offset < 0 {
			return 0, fmt.Errorf("no record offset for version column %q", d.o.Version)
		}
		return r.Offset, nil
	}
	src, _ := ev["source"].(map[string]any)
	lsn, ok := src["lsn"]
	if !ok || lsn == nil {
		return 0, fmt.Errorf("no source.lsn for version column %q (set VersionFromOffset for connectors without one)", d.o.Version)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(fmt.Sprint(lsn)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("source.lsn %v: %w", lsn, err)
	}
	return n, nil
}

// tableKeys returns the table's identifier fields (the writer's default key).
func tableKeys(w *iceberg.Writer) []string {
	sc := w.Table().Schema()
	var keys []string
	for _, id := range sc.IdentifierFieldIDs {
		if n, ok := sc.FindColumnName(id); ok {
			keys = append(keys, n)
		}
	}
	return keys
}

// dropNullOps returns batch without its rows whose op is null (tombstones), retained; nil when none is left.
func dropNullOps(batch arrow.RecordBatch, op string) (arrow.RecordBatch, error) {
	idx := batch.Schema().FieldIndices(op)
	if len(idx) == 0 || batch.Column(idx[0]).NullN() == 0 {
		batch.Retain()
		return batch, nil
	}
	col := batch.Column(idx[0])
	if col.NullN() == col.Len() {
		return nil, nil
	}
	mb := array.NewBooleanBuilder(memory.DefaultAllocator)
	defer mb.Release()
	for i := range col.Len() {
		mb.Append(col.IsValid(i))
	}
	mask := mb.NewArray()
	defer mask.Release()
	out, err := compute.FilterRecordBatch(context.Background(), batch, mask, compute.DefaultFilterOptions())
	if err != nil {
		return nil, fmt.Errorf("kafka: dropping tombstones: %w", err)
	}
	return out, nil
}

// decoderOptions are the writer options a decoder needs, before the caller's.
func decoderOptions(dec Decoder) []iceberg.Option {
	if cd, ok := dec.(changeDecoder); ok {
		return cd.writerOptions()
	}
	return nil
}

// field returns a field of the event's after image (the before image for a delete).
func (d *debeziumDecoder) field(value []byte, name string) (any, error) {
	if value == nil {
		return nil, nil // a tombstone: routed by topic or Default
	}
	row, err := d.row(&kgo.Record{Value: value, Offset: -1}, nil, nil)
	if err != nil && d.o.Version != "" {
		// The version is not needed to route: only the images are.
		o := d.o
		o.Version = ""
		row, err = (&debeziumDecoder{o: o}).row(&kgo.Record{Value: value}, nil, nil)
	}
	if err != nil {
		return nil, err
	}
	return row[name], nil
}
