package kafka_test

import (
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/bufbuild/protocompile"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/kafka"
)

const shipmentV1 = `syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
message Shipment {
  int64 id = 1;
  string carrier = 2;
  optional double weight = 3;
  google.protobuf.Timestamp at = 4;
  repeated string tags = 5;
  map<string, int64> counts = 6;
  Address address = 7;
  Status status = 8;
  uint32 qty = 9;
  message Address { string city = 1; }
  enum Status { NEW = 0; SENT = 1; }
}
`

// shipmentV2 adds a field: the table evolves to take it.
var shipmentV2 = strings.Replace(shipmentV1, "uint32 qty = 9;", "uint32 qty = 9;\n  string note = 10;", 1)

// compileProto compiles a .proto source (the test's own compile, independent of the decoder's).
func compileProto(t testing.TB, src string) protoreflect.MessageDescriptor {
	t.Helper()
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: func(path string) (io.ReadCloser, error) {
			if path != "shipment.proto" {
				return nil, fs.ErrNotExist
			}
			return io.NopCloser(strings.NewReader(src)), nil
		},
	})}
	files, err := c.Compile(t.Context(), "shipment.proto")
	if err != nil {
		t.Fatal(err)
	}
	return files[0].Messages().Get(0)
}

// shipment is shipment id as a message of md; odd ids have an address and a weight, and are SENT.
func shipment(md protoreflect.MessageDescriptor, id int64) proto.Message {
	m := dynamicpb.NewMessage(md)
	f := md.Fields()
	m.Set(f.ByName("id"), protoreflect.ValueOfInt64(id))
	m.Set(f.ByName("carrier"), protoreflect.ValueOfString(fmt.Sprintf("carrier-%d", id)))
	ts := dynamicpb.NewMessage(f.ByName("at").Message())
	ts.Set(ts.Descriptor().Fields().ByName("seconds"), protoreflect.ValueOfInt64(day0.Unix()+id))
	m.Set(f.ByName("at"), protoreflect.ValueOfMessage(ts))
	tags := m.Mutable(f.ByName("tags")).List()
	tags.Append(protoreflect.ValueOfString("t"))
	tags.Append(protoreflect.ValueOfString(fmt.Sprint(id)))
	m.Mutable(f.ByName("counts")).Map().Set(protoreflect.ValueOfString("n").MapKey(), protoreflect.ValueOfInt64(id))
	m.Set(f.ByName("qty"), protoreflect.ValueOfUint32(uint32(id)))
	if id%2 == 1 {
		m.Set(f.ByName("weight"), protoreflect.ValueOfFloat64(float64(id)/2))
		addr := dynamicpb.NewMessage(f.ByName("address").Message())
		addr.Set(addr.Descriptor().Fields().ByName("city"), protoreflect.ValueOfString(fmt.Sprintf("city-%d", id)))
		m.Set(f.ByName("address"), protoreflect.ValueOfMessage(addr))
		m.Set(f.ByName("status"), protoreflect.ValueOfEnum(1))
	}
	if note := f.ByName("note"); note != nil {
		m.Set(note, protoreflect.ValueOfString(fmt.Sprintf("note-%d", id)))
	}
	return m
}

// wantShipment is shipment id's row as the table must hold it (fmt's print of the scanned values).
func wantShipment(id int64, note bool) map[string]string {
	w := map[string]string{
		"id": fmt.Sprint(id), "carrier": fmt.Sprintf("carrier-%d", id), "weight": "<nil>",
		"at": day0.Add(time.Duration(id) * time.Second).Format(time.RFC3339), "tags": fmt.Sprintf("[t %d]", id),
		"counts": fmt.Sprintf("[map[key:n value:%d]]", id), "address": "<nil>", "status": "NEW",
		"qty": fmt.Sprint(id), "note": "<nil>",
	}
	if id%2 == 1 {
		w["weight"], w["address"], w["status"] = fmt.Sprint(float64(id)/2), fmt.Sprintf("map[city:city-%d]", id), "SENT"
	}
	if note {
		w["note"] = fmt.Sprintf("note-%d", id)
	}
	return w
}

// TestProtobufValuesEvolveTheTable is TestAvroValuesEvolveTheTable for Protobuf: a registered .proto importing
// a well-known type, messages encoded by a Serde (wire format with message indexes), a second version with an
// added field.
func TestProtobufValuesEvolveTheTable(t *testing.T) {
	const topic = "shipments"
	e := newValuesEnv(t, topic)
	ident := table.Identifier{"kafka", "shipments"}
	register := func(src string) (*sr.Serde, protoreflect.MessageDescriptor) {
		ss, err := e.sr.CreateSchema(e.ctx, topic+"-value", sr.Schema{Schema: src, Type: sr.TypeProtobuf})
		if err != nil {
			t.Fatal(err)
		}
		md := compileProto(t, src)
		var serde sr.Serde
		serde.Register(ss.ID, &dynamicpb.Message{}, sr.Index(0),
			sr.EncodeFn(func(v any) ([]byte, error) { return proto.Marshal(v.(proto.Message)) }))
		return &serde, md
	}
	v1, md1 := register(shipmentV1)
	schema, err := kafka.RegistrySchema(e.ctx, e.sr, topic+"-value")
	if err != nil {
		t.Fatal(err)
	}
	e.createTable(ident, schema)
	produce := func(serde *sr.Serde, md protoreflect.MessageDescriptor, from, to int64) {
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			b, err := serde.Encode(shipment(md, i))
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % valuesParts), Value: b})
		}
		e.produce(recs...)
	}
	produce(v1, md1, 0, 40)
	run := e.start(kafka.Config{Topics: []string{topic}, Catalog: e.cat, Table: ident, Decoder: kafka.Protobuf(e.sr),
		WriterOptions: []iceberg.Option{iceberg.WithSchemaEvolution()}})
	e.waitPositions(ident, topic)
	v2, md2 := register(shipmentV2)
	produce(v2, md2, 40, 60)
	e.waitPositions(ident, topic)
	e.stop(run)

	if cols := e.tableColumns(ident); !slices.Contains(cols, "note") {
		t.Fatalf("table columns %v: no note column after the second schema version", cols)
	}
	rows := e.rows(ident)
	if len(rows) != 60 {
		t.Fatalf("%d rows, want 60", len(rows))
	}
	seen := map[int64]bool{}
	for _, r := range rows {
		var id int64
		fmt.Sscan(fmt.Sprint(r["id"]), &id)
		if seen[id] {
			t.Errorf("shipment %d twice", id)
		}
		seen[id] = true
		if diff := diffRow(r, wantShipment(id, id >= 40)); diff != "" {
			t.Errorf("shipment %d: %s", id, diff)
		}
	}
}
