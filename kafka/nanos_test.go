package kafka_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/tabletest"
	"github.com/icewriter/iceberg/kafka"
)

// nanoTimes are instants a nanosecond column must keep exactly: around the epoch by ±1 ns, before 1970, with
// every sub-second digit, and near the ends of the nanosecond range.
var nanoTimes = []time.Time{
	time.Unix(0, 0), time.Unix(0, 1), time.Unix(0, -1), time.Unix(-1, 999_999_999),
	time.Date(1969, 7, 20, 20, 17, 40, 123_456_789, time.UTC), time.Date(2026, 12, 3, 13, 46, 21, 987_654_321, time.UTC),
	time.Date(1677, 9, 21, 0, 12, 44, 1, time.UTC), time.Date(2262, 4, 11, 23, 47, 16, 854_775_000, time.UTC),
}

// nanoTime is the instant of record i.
func nanoTime(i int) time.Time {
	return nanoTimes[i%len(nanoTimes)].Add(time.Duration(i/len(nanoTimes)) * 7)
}

// timestampColumns reads the table back with iceberg-go's scanner: per id, each named timestamp column's
// value in its own unit, "null" for a null.
func timestampColumns(t *testing.T, e *valuesEnv, ident table.Identifier, cols ...string) map[int64][]string {
	t.Helper()
	out := map[int64][]string{}
	for _, c := range cols {
		for id, v := range byID(t, e, ident, c, timestampText) {
			out[id] = append(out[id], v)
		}
	}
	return out
}

// sinkEach sinks the topic, as produced so far, into each table in turn (a group per table), with dec.
func (e *valuesEnv) sinkEach(topic string, dec kafka.Decoder, idents ...table.Identifier) {
	e.t.Helper()
	for _, ident := range idents {
		run := e.start(kafka.Config{Topics: []string{topic}, Group: strings.Join(ident, "."), Catalog: e.cat,
			Table: ident, Decoder: dec})
		e.waitPositions(ident, topic)
		e.stop(run)
	}
}

// epoch is ts in unit as timestampColumns prints it: microseconds truncated (toward the past), as the decoders
// and time.Time.UnixMicro do.
func epoch(ts time.Time, unit arrow.TimeUnit) string {
	v := ts.UnixNano()
	if unit == arrow.Microsecond {
		v = ts.UnixMicro()
	}
	return fmt.Sprintf("%d %s", v, unit)
}

const nanosAvro = `{"type":"record","name":"Reading","fields":[
 {"name":"id","type":"long"},
 {"name":"at","type":{"type":"long","logicalType":"timestamp-nanos"}},
 {"name":"local","type":["null",{"type":"long","logicalType":"local-timestamp-nanos"}],"default":null},
 {"name":"inner","type":{"type":"record","name":"Inner","fields":[
   {"name":"at","type":{"type":"long","logicalType":"timestamp-nanos"}}]}}
]}`

// TestAvroNanosecondTimestamps sinks Avro values with timestamp-nanos and local-timestamp-nanos fields (top
// level, nullable, nested) into a v3 table created from RegistrySchema: the columns are timestamptz_ns and
// timestamp_ns, and read back to the nanosecond. The same values into a table whose columns are microseconds
// (as a v2 table's are) read back truncated to the microsecond, as before.
func TestAvroNanosecondTimestamps(t *testing.T) {
	const topic = "readings"
	e := newValuesEnv(t, topic)
	serde := new(sr.Serde)
	e.registerAvro(serde, topic+"-value", nanosAvro)
	schema, err := kafka.RegistrySchema(e.ctx, e.sr, topic+"-value")
	if err != nil {
		t.Fatal(err)
	}
	nanos := table.Identifier{"kafka", "nanos"}
	e.createTable(nanos, schema, iceberg.FormatVersion(3))
	if got := tabletest.Load(t, e.cat, nanos).Schema().String(); !strings.Contains(got, "at: required timestamptz_ns") ||
		!strings.Contains(got, "local: optional timestamp_ns") {
		t.Fatalf("table from RegistrySchema:\n%s\nwant at timestamptz_ns, local timestamp_ns", got)
	}
	micros := table.Identifier{"kafka", "micros"}
	e.createTable(micros, arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "at", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		{Name: "local", Type: &arrow.TimestampType{Unit: arrow.Microsecond}, Nullable: true},
		{Name: "inner", Type: arrow.StructOf(arrow.Field{Name: "at", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}})},
	}, nil))

	const n = 64
	var recs []*kgo.Record
	for i := range n {
		v := map[string]any{"id": int64(i), "at": nanoTime(i), "local": nil,
			"inner": map[string]any{"at": nanoTime(i + 1)}}
		if i%3 != 0 {
			v["local"] = nanoTime(i + 2)
		}
		b, err := serde.Encode(v)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % valuesParts), Value: b})
	}
	e.produce(recs...)
	e.sinkEach(topic, kafka.Avro(e.sr), nanos, micros)

	for ident, unit := range map[string]arrow.TimeUnit{"nanos": arrow.Nanosecond, "micros": arrow.Microsecond} {
		got := timestampColumns(t, e, table.Identifier{"kafka", ident}, "at", "local")
		inner := innerTimes(t, e, table.Identifier{"kafka", ident})
		if len(got) != n {
			t.Errorf("%s: %d rows, want %d", ident, len(got), n)
		}
		for i := range n {
			want := []string{epoch(nanoTime(i), unit), "null"}
			if i%3 != 0 {
				want[1] = epoch(nanoTime(i+2), unit)
			}
			if g := got[int64(i)]; fmt.Sprint(g) != fmt.Sprint(want) {
				t.Errorf("%s: id %d: at, local = %v, want %v", ident, i, g, want)
			}
			if g, w := inner[int64(i)], epoch(nanoTime(i+1), unit); g != w {
				t.Errorf("%s: id %d: inner.at = %s, want %s", ident, i, g, w)
			}
		}
	}
}

// innerTimes is, per id, the scanned inner.at.
func innerTimes(t *testing.T, e *valuesEnv, ident table.Identifier) map[int64]string {
	return byID(t, e, ident, "inner", func(col arrow.Array, r int) string {
		return timestampText(col.(*array.Struct).Field(0), r)
	})
}

// byID reads the table back with iceberg-go's scanner: per row's id, f of column's cell.
func byID(t *testing.T, e *valuesEnv, ident table.Identifier, column string, f func(col arrow.Array, r int) string) map[int64]string {
	t.Helper()
	tbl := tabletest.Load(t, e.cat, ident)
	sc, it := tabletest.Records(t, tbl)
	out := map[int64]string{}
	for rec := range it {
		ids := rec.Column(tabletest.Column(t, sc, "id")).(*array.Int64)
		col := rec.Column(tabletest.Column(t, sc, column))
		for r := range int(rec.NumRows()) {
			out[ids.Value(r)] = f(col, r)
		}
	}
	return out
}

// timestampText is a timestamp cell as "value unit", "null" for a null.
func timestampText(col arrow.Array, r int) string {
	if col.IsNull(r) {
		return "null"
	}
	return fmt.Sprintf("%d %s", col.(*array.Timestamp).Value(r), col.DataType().(*arrow.TimestampType).Unit)
}

const nanosProto = `syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
message Reading {
  int64 id = 1;
  google.protobuf.Timestamp at = 2;
  Inner inner = 3;
  repeated google.protobuf.Timestamp seen = 4;
  message Inner { google.protobuf.Timestamp at = 1; }
}
`

// TestProtobufTimestampIntoNanosecondColumns sinks Protobuf messages whose google.protobuf.Timestamp fields
// (top level, in a nested message, repeated) carry nanoseconds into a v3 table whose columns are timestamptz_ns:
// every value reads back to the nanosecond. Into the table RegistrySchema describes (microseconds) the same
// messages read back truncated to the microsecond, as before.
func TestProtobufTimestampIntoNanosecondColumns(t *testing.T) {
	const topic = "readings"
	e := newValuesEnv(t, topic)
	ss, err := e.sr.CreateSchema(e.ctx, topic+"-value", sr.Schema{Schema: nanosProto, Type: sr.TypeProtobuf})
	if err != nil {
		t.Fatal(err)
	}
	var serde sr.Serde
	serde.Register(ss.ID, &dynamicpb.Message{}, sr.Index(0),
		sr.EncodeFn(func(v any) ([]byte, error) { return proto.Marshal(v.(proto.Message)) }))
	schema, err := kafka.RegistrySchema(e.ctx, e.sr, topic+"-value")
	if err != nil {
		t.Fatal(err)
	}
	micros := table.Identifier{"kafka", "micros"}
	e.createTable(micros, schema)
	tsNs := &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}
	nanos := table.Identifier{"kafka", "nanos"}
	e.createTable(nanos, arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "at", Type: tsNs, Nullable: true},
		{Name: "inner", Type: arrow.StructOf(arrow.Field{Name: "at", Type: tsNs, Nullable: true}), Nullable: true},
		{Name: "seen", Type: arrow.ListOfField(arrow.Field{Name: "element", Type: tsNs})},
	}, nil), iceberg.FormatVersion(3))

	md := compileProto(t, nanosProto)
	f := md.Fields()
	stamp := func(fd protoreflect.FieldDescriptor, ts time.Time) protoreflect.Value {
		m := dynamicpb.NewMessage(fd.Message())
		m.Set(m.Descriptor().Fields().ByName("seconds"), protoreflect.ValueOfInt64(ts.Unix()))
		m.Set(m.Descriptor().Fields().ByName("nanos"), protoreflect.ValueOfInt32(int32(ts.Nanosecond())))
		return protoreflect.ValueOfMessage(m)
	}
	const n = 48
	var recs []*kgo.Record
	for i := range n {
		m := dynamicpb.NewMessage(md)
		m.Set(f.ByName("id"), protoreflect.ValueOfInt64(int64(i)))
		m.Set(f.ByName("at"), stamp(f.ByName("at"), nanoTime(i)))
		inner := dynamicpb.NewMessage(f.ByName("inner").Message())
		innerAt := inner.Descriptor().Fields().ByName("at")
		inner.Set(innerAt, stamp(innerAt, nanoTime(i+1)))
		m.Set(f.ByName("inner"), protoreflect.ValueOfMessage(inner))
		seen := m.Mutable(f.ByName("seen")).List()
		seen.Append(stamp(f.ByName("seen"), nanoTime(i+2)))
		seen.Append(stamp(f.ByName("seen"), nanoTime(i+3)))
		b, err := serde.Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % valuesParts), Value: b})
	}
	e.produce(recs...)
	e.sinkEach(topic, kafka.Protobuf(e.sr), nanos, micros)

	for ident, unit := range map[string]arrow.TimeUnit{"nanos": arrow.Nanosecond, "micros": arrow.Microsecond} {
		id := table.Identifier{"kafka", ident}
		got, inner, seen := timestampColumns(t, e, id, "at"), innerTimes(t, e, id), seenTimes(t, e, id)
		if len(got) != n {
			t.Errorf("%s: %d rows, want %d", ident, len(got), n)
		}
		for i := range n {
			if g, w := fmt.Sprint(got[int64(i)]), fmt.Sprint([]string{epoch(nanoTime(i), unit)}); g != w {
				t.Errorf("%s: id %d: at = %s, want %s", ident, i, g, w)
			}
			if g, w := inner[int64(i)], epoch(nanoTime(i+1), unit); g != w {
				t.Errorf("%s: id %d: inner.at = %s, want %s", ident, i, g, w)
			}
			if g, w := seen[int64(i)], fmt.Sprint([]string{epoch(nanoTime(i+2), unit), epoch(nanoTime(i+3), unit)}); g != w {
				t.Errorf("%s: id %d: seen = %s, want %s", ident, i, g, w)
			}
		}
	}
}

// seenTimes is, per id, the scanned list seen.
func seenTimes(t *testing.T, e *valuesEnv, ident table.Identifier) map[int64]string {
	return byID(t, e, ident, "seen", func(col arrow.Array, r int) string {
		lists := col.(*array.List)
		from, to := lists.ValueOffsets(r)
		var vals []string
		for j := from; j < to; j++ {
			vals = append(vals, timestampText(lists.ListValues(), int(j)))
		}
		return fmt.Sprint(vals)
	})
}
