package kafka_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/tabletest"
	"github.com/icewriter/iceberg/kafka"
)

// cdcRow is a row of the model: the table's state of a key.
type cdcRow struct {
	Name string `json:"name"`
	Qty  *int64 `json:"qty"`
}

// debeziumStream generates Debezium events over keys (creates, updates, updates that change the key, deletes
// followed by tombstones, every third event in the JsonConverter's schema envelope) and applies each to the
// model as the table must; events of a key stay in one partition (id % valuesParts), as Debezium keys them.
type debeziumStream struct {
	rng   *rand.Rand
	lsn   int64
	model map[int64]cdcRow
	n     int
}

func (s *debeziumStream) event(topic string, encode func(ev map[string]any, n int) []byte) []*kgo.Record {
	s.n++
	id := s.rng.Int64N(24)
	row, live := s.model[id]
	s.lsn += 1 + s.rng.Int64N(3)
	img := func(id int64, r cdcRow) map[string]any {
		m := map[string]any{"id": id, "name": r.Name, "qty": nil}
		if r.Qty != nil {
			m["qty"] = *r.Qty
		}
		return m
	}
	var op string
	var before, after map[string]any
	qty := s.lsn
	next := cdcRow{Name: fmt.Sprintf("n-%d-%d", id, s.n), Qty: &qty}
	if s.n%5 == 0 {
		next.Qty = nil
	}
	switch r := s.rng.IntN(10); {
	case !live:
		op, after = "c", img(id, next)
		s.model[id] = next
	case r < 5:
		op, before, after = "u", img(id, row), img(id, next)
		s.model[id] = next
	case r < 7: // the key changes (REPLICA IDENTITY FULL: the before image names the old key)
		to := id + valuesParts*(1+s.rng.Int64N(3))
		if _, taken := s.model[to]; taken {
			return nil
		}
		op, before, after = "u", img(id, row), img(to, next)
		delete(s.model, id)
		s.model[to] = next
	default:
		op, before = "d", img(id, row)
		delete(s.model, id)
	}
	ev := map[string]any{"before": nilMap(before), "after": nilMap(after), "op": op, "ts_ms": int64(1),
		"source": map[string]any{"lsn": s.lsn, "connector": "postgresql"}}
	b := encode(ev, s.n)
	key := []byte(strconv.FormatInt(id, 10))
	recs := []*kgo.Record{{Topic: topic, Partition: int32(id % valuesParts), Key: key, Value: b}}
	if op == "d" {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(id % valuesParts), Key: key}) // tombstone
	}
	return recs
}

// nilMap is m, or an untyped nil for a nil map (no image), which encoders take as null.
func nilMap(m map[string]any) any {
	if m == nil {
		return nil
	}
	return m
}

// jsonEvent encodes an event as the JsonConverter does, every third one in its schema envelope.
func jsonEvent(ev map[string]any, n int) []byte {
	var v any = ev
	if n%3 == 0 {
		v = map[string]any{"schema": map[string]any{"type": "struct"}, "payload": ev}
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// debeziumAvro is the Avro envelope of the items table, as Debezium's AvroConverter registers it (trimmed).
const debeziumAvro = `{"type":"record","name":"Envelope","namespace":"pg.public.items","fields":[
 {"name":"before","type":["null",{"type":"record","name":"Value","fields":[
   {"name":"id","type":"long"},{"name":"name","type":["null","string"],"default":null},
   {"name":"qty","type":["null","long"],"default":null}]}],"default":null},
 {"name":"after","type":["null","Value"],"default":null},
 {"name":"source","type":{"type":"record","name":"Source","namespace":"io.debezium.connector.postgresql","fields":[
   {"name":"connector","type":"string"},{"name":"lsn","type":["null","long"],"default":null}]}},
 {"name":"op","type":"string"},
 {"name":"ts_ms","type":["null","long"],"default":null}]}`

// TestDebeziumEnvelopesApplyToTheModel streams creates, updates (some changing the key), deletes and tombstones
// through a sink whose decoder is Debezium (versions from source.lsn, keys from the table's identifier field),
// in JSON and in Avro through the schema registry, restarts the member half-way (another writer ID: it resumes
// from the table), and reads the table back: it holds exactly the model's final state.
func TestDebeziumEnvelopesApplyToTheModel(t *testing.T) {
	t.Run("json", func(t *testing.T) { testDebezium(t, false) })
	t.Run("avro", func(t *testing.T) { testDebezium(t, true) })
}

func testDebezium(t *testing.T, avro bool) {
	const topic = "pg.public.items"
	e := newValuesEnv(t, topic)
	ident := table.Identifier{"kafka", "items"}
	e.createTable(ident, arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "qty", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil), iceberg.IdentifierFields("id"))
	s := &debeziumStream{rng: rand.New(rand.NewPCG(16, 4)), model: map[int64]cdcRow{}}
	opts := kafka.DebeziumOptions{Version: "lsn"}
	encode := jsonEvent
	if avro {
		serde := new(sr.Serde)
		e.registerAvro(serde, topic+"-value", debeziumAvro)
		encode = func(ev map[string]any, _ int) []byte {
			b, err := serde.Encode(ev)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		opts.Registry = e.sr
	}
	produce := func(n int) {
		var recs []*kgo.Record
		for range n {
			recs = append(recs, s.event(topic, encode)...)
		}
		e.produce(recs...)
	}
	cfg := kafka.Config{Topics: []string{topic}, Catalog: e.cat, Table: ident, Decoder: kafka.Debezium(opts)}
	produce(300)
	cfg.WriterID = "first"
	run := e.start(cfg)
	e.waitPositions(ident, topic)
	e.stop(run)
	produce(300)
	cfg.WriterID = "second"
	run = e.start(cfg)
	e.waitPositions(ident, topic)
	e.stop(run)

	got := map[int64]cdcRow{}
	for _, r := range e.rows(ident) {
		id, _ := strconv.ParseInt(fmt.Sprint(r["id"]), 10, 64)
		if _, dup := got[id]; dup {
			t.Errorf("key %d twice in the table", id)
		}
		row := cdcRow{Name: fmt.Sprint(r["name"])}
		if r["qty"] != nil {
			q, _ := strconv.ParseInt(fmt.Sprint(r["qty"]), 10, 64)
			row.Qty = &q
		}
		got[id] = row
	}
	show := func(r cdcRow) string {
		if r.Qty == nil {
			return r.Name + "/null"
		}
		return fmt.Sprintf("%s/%d", r.Name, *r.Qty)
	}
	for id, want := range s.model {
		if g, ok := got[id]; !ok || show(g) != show(want) {
			t.Errorf("key %d: table %v (present %v), model %s", id, show(g), ok, show(want))
		}
	}
	for id, g := range got {
		if _, ok := s.model[id]; !ok {
			t.Errorf("key %d: in the table (%s), deleted in the model", id, show(g))
		}
	}
	if len(s.model) == 0 || len(s.model) == 24 {
		t.Fatalf("model holds %d keys: the stream exercised nothing", len(s.model))
	}
}

// debeziumTimesAvro is the Avro envelope of a table with integer timestamps as Debezium's AvroConverter
// registers it (trimmed): the Kafka Connect schema name is the unit, with no Avro logical type.
const debeziumTimesAvro = `{"type":"record","name":"Envelope","namespace":"pg.public.times","fields":[
 {"name":"before","type":["null",{"type":"record","name":"Value","fields":[
   {"name":"id","type":"long"},
   {"name":"t_ms","type":["null",{"type":"long","connect.name":"io.debezium.time.Timestamp"}],"default":null},
   {"name":"t_us","type":["null",{"type":"long","connect.name":"io.debezium.time.MicroTimestamp"}],"default":null},
   {"name":"t_ns","type":["null",{"type":"long","connect.name":"io.debezium.time.NanoTimestamp"}],"default":null},
   {"name":"t_raw","type":["null",{"type":"long","connect.name":"io.debezium.time.Timestamp"}],"default":null}]}],"default":null},
 {"name":"after","type":["null","Value"],"default":null},
 {"name":"op","type":"string"}]}`

// debeziumRowAvro is the Avro schema of the after image alone, as Debezium's ExtractNewRecordState transform
// leaves a row for the generic registry decoder (kafka.Avro): connect.name on the record's own fields.
const debeziumRowAvro = `{"type":"record","name":"Value","namespace":"pg.public.times","fields":[
 {"name":"id","type":"long"},
 {"name":"t_ms","type":["null",{"type":"long","connect.name":"io.debezium.time.Timestamp"}],"default":null},
 {"name":"t_us","type":["null",{"type":"long","connect.name":"io.debezium.time.MicroTimestamp"}],"default":null},
 {"name":"t_ns","type":["null",{"type":"long","connect.name":"io.debezium.time.NanoTimestamp"}],"default":null},
 {"name":"t_raw","type":["null",{"type":"long","connect.name":"io.debezium.time.Timestamp"}],"default":null}]}`

// TestDebeziumTimestampUnits: a number in a timestamp column is read in the unit its schema names
// (io.debezium.time.Timestamp milliseconds, MicroTimestamp microseconds, NanoTimestamp nanoseconds, the last
// exact in a timestamptz_ns column): the JsonConverter's schema envelope's, or the Avro schema's connect.name,
// in the after image and in a delete's before image; and by the generic registry decoder (kafka.Avro), the
// connect.name of a record's own fields. A JSON event without envelope is read as epoch microseconds; an
// integer column keeps the number. Read back with the scanner, exactly.
func TestDebeziumTimestampUnits(t *testing.T) {
	for _, mode := range []string{"json", "avro", "registry"} {
		t.Run(mode, func(t *testing.T) { debeziumTimestampUnits(t, mode) })
	}
}

func debeziumTimestampUnits(t *testing.T, mode string) {
	const topic = "pg.public.times"
	e := newValuesEnv(t, topic)
	ident := table.Identifier{"kafka", "times"}
	us := &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	e.createTable(ident, arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "t_ms", Type: us, Nullable: true},
		{Name: "t_us", Type: us, Nullable: true},
		{Name: "t_ns", Type: &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "t_raw", Type: arrow.PrimitiveTypes.Int64, Nullable: true}, // an integer column keeps the number
	}, nil), iceberg.FormatVersion(3), iceberg.IdentifierFields("id"))
	field := func(name, unit string) map[string]any {
		return map[string]any{"type": "int64", "optional": true, "name": "io.debezium.time." + unit, "field": name}
	}
	image := func(name string) map[string]any {
		return map[string]any{"type": "struct", "optional": true, "field": name, "fields": []any{
			map[string]any{"type": "int64", "field": "id"},
			field("t_ms", "Timestamp"), field("t_us", "MicroTimestamp"), field("t_ns", "NanoTimestamp"),
			field("t_raw", "Timestamp")}}
	}
	schema := map[string]any{"type": "struct", "fields": []any{image("before"), image("after"),
		map[string]any{"type": "string", "field": "op"}}}
	opts := kafka.DebeziumOptions{}
	encode := func(ev map[string]any) []byte {
		b, err := json.Marshal(map[string]any{"schema": schema, "payload": ev})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var dec kafka.Decoder
	switch mode {
	case "avro":
		encode = e.avroEncoder(topic+"-value", debeziumTimesAvro)
		opts.Registry = e.sr
	case "registry":
		row := e.avroEncoder(topic+"-value", debeziumRowAvro)
		encode = func(ev map[string]any) []byte { return row(ev["after"].(map[string]any)) }
		dec = kafka.Avro(e.sr)
		// What a table created from the subject gets: Debezium's timestamps as timestamp columns (no zone: a
		// column's local date and time), nanoseconds as timestamp_ns.
		sc, err := kafka.RegistrySchema(e.ctx, e.sr, topic+"-value")
		if err != nil {
			t.Fatal(err)
		}
		const want = "id: int64, t_ms: timestamp[us], t_us: timestamp[us], t_ns: timestamp[ns], t_raw: timestamp[us]"
		var got []string
		for _, f := range sc.Fields() {
			got = append(got, f.Name+": "+f.Type.String())
		}
		if strings.Join(got, ", ") != want {
			t.Fatalf("RegistrySchema: %s, want %s", strings.Join(got, ", "), want)
		}
	}
	if dec == nil {
		dec = kafka.Debezium(opts)
	}
	at := []time.Time{
		time.Date(2026, 12, 3, 10, 11, 12, 123456789, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Unix(0, 1).UTC(),
	}
	img := func(id int64, t time.Time) map[string]any {
		return map[string]any{"id": id, "t_ms": t.UnixMilli(), "t_us": t.UnixMicro(), "t_ns": t.UnixNano(),
			"t_raw": t.UnixMilli()}
	}
	var recs []*kgo.Record
	send := func(id int64, value []byte) {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(id % valuesParts), Value: value})
	}
	for i, ts := range at {
		send(int64(i), encode(map[string]any{"op": "c", "before": nil, "after": img(int64(i), ts)}))
	}
	if mode != "registry" { // a delete, whose before image is read in the same units
		send(10, encode(map[string]any{"op": "c", "before": nil, "after": img(10, at[0])}))
		send(10, encode(map[string]any{"op": "d", "before": img(10, at[0]), "after": nil}))
	}
	type row struct{ ms, us, ns, raw *int64 }
	p := func(v int64) *int64 { return &v }
	want := map[int64]row{}
	for i, ts := range at {
		want[int64(i)] = row{p(ts.UnixMilli() * 1000), p(ts.UnixMicro()), p(ts.UnixNano()), p(ts.UnixMilli())}
	}
	if mode == "json" { // a JSON event without envelope: epoch microseconds
		bare := time.Date(2026, 1, 2, 3, 4, 5, 678000, time.UTC)
		b, err := json.Marshal(map[string]any{"op": "c", "before": nil, "after": map[string]any{"id": 3, "t_us": bare.UnixMicro()}})
		if err != nil {
			t.Fatal(err)
		}
		send(3, b)
		want[3] = row{us: p(bare.UnixMicro())}
	}
	e.produce(recs...)
	run := e.start(kafka.Config{Topics: []string{topic}, Catalog: e.cat, Table: ident, Decoder: dec})
	e.waitPositions(ident, topic)
	e.stop(run)

	got := map[int64]row{}
	sc, it := tabletest.Records(t, tabletest.Load(t, e.cat, ident))
	for rec := range it {
		ids := rec.Column(tabletest.Column(t, sc, "id")).(*array.Int64)
		cell := func(name string, r int) *int64 {
			switch c := rec.Column(tabletest.Column(t, sc, name)).(type) {
			case *array.Timestamp:
				if !c.IsNull(r) {
					return p(int64(c.Value(r)))
				}
			case *array.Int64:
				if !c.IsNull(r) {
					return p(c.Value(r))
				}
			}
			return nil
		}
		for r := range int(rec.NumRows()) {
			got[ids.Value(r)] = row{cell("t_ms", r), cell("t_us", r), cell("t_ns", r), cell("t_raw", r)}
		}
	}
	if !reflect.DeepEqual(got, want) {
		for id, w := range want {
			if g := got[id]; !reflect.DeepEqual(g, w) {
				t.Errorf("id %d: read %v, want %v", id, fmtRow(g.ms, g.us, g.ns, g.raw), fmtRow(w.ms, w.us, w.ns, w.raw))
			}
		}
		t.Fatalf("read %d rows, want %d", len(got), len(want))
	}
}

// fmtRow prints nullable values.
func fmtRow(vs ...*int64) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = "null"
		if v != nil {
			out[i] = strconv.FormatInt(*v, 10)
		}
	}
	return out
}
