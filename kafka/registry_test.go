package kafka_test

import (
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/avro"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/kafka"
)

const orderV1 = `{"type":"record","name":"Order","namespace":"shop","fields":[
 {"name":"id","type":"long"},
 {"name":"customer","type":"string"},
 {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
 {"name":"day","type":{"type":"int","logicalType":"date"}},
 {"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"ref","type":{"type":"string","logicalType":"uuid"}},
 {"name":"tags","type":{"type":"array","items":"string"}},
 {"name":"counts","type":{"type":"map","values":"long"}},
 {"name":"address","type":["null",{"type":"record","name":"Address","fields":[
   {"name":"city","type":"string"},{"name":"zip","type":["null","int"],"default":null}]}],"default":null},
 {"name":"status","type":{"type":"enum","name":"Status","symbols":["NEW","PAID"]}}
]}`

// orderV2 adds an optional field: the sink's writer evolves the table to take it.
var orderV2 = orderV1[:len(orderV1)-2] + `,
 {"name":"note","type":["null","string"],"default":null}
]}`

var day0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// avroOrder is order id's value, as the model has it and the producer encodes it.
func avroOrder(id int64, withNote bool) map[string]any {
	v := map[string]any{
		"id": id, "customer": fmt.Sprintf("c-%d", id), "amount": big.NewRat(id*125, 100),
		"day": day0.AddDate(0, 0, int(id)), "at": day0.Add(time.Duration(id) * time.Second),
		"ref":  fmt.Sprintf("00000000-0000-4000-8000-%012d", id),
		"tags": []any{"t", fmt.Sprint(id)}, "counts": map[string]any{"n": id},
		"address": nil, "status": "NEW",
	}
	if id%2 == 1 {
		v["address"] = map[string]any{"city": fmt.Sprintf("city-%d", id), "zip": int32(id)}
		v["status"] = "PAID"
	}
	if withNote {
		v["note"] = fmt.Sprintf("note-%d", id)
	}
	return v
}

// registerAvro registers an Avro schema under subject and returns a serde that encodes values with it.
func (e *valuesEnv) registerAvro(serde *sr.Serde, subject, schema string) int {
	e.t.Helper()
	ss, err := e.sr.CreateSchema(e.ctx, subject, sr.Schema{Schema: schema, Type: sr.TypeAvro})
	if err != nil {
		e.t.Fatal(err)
	}
	s := avro.MustParse(schema)
	serde.Register(ss.ID, map[string]any{}, sr.EncodeFn(func(v any) ([]byte, error) { return s.Encode(v) }))
	return ss.ID
}

// avroEncoder registers schema under subject and returns an encoder of values in the wire format with it.
func (e *valuesEnv) avroEncoder(subject, schema string) func(ev map[string]any) []byte {
	e.t.Helper()
	serde := new(sr.Serde)
	e.registerAvro(serde, subject, schema)
	return func(ev map[string]any) []byte {
		b, err := serde.Encode(ev)
		if err != nil {
			e.t.Fatal(err)
		}
		return b
	}
}

// TestAvroValuesEvolveTheTable creates the table from a subject's Avro schema (RegistrySchema plus metadata
// columns), sinks values of it, registers a second version with an added optional field and sinks values of
// that: the table gains the column, and reads back as the model (every logical type, nested record, list and
// map, nulls), the old rows' note null.
func TestAvroValuesEvolveTheTable(t *testing.T) {
	const topic = "orders"
	e := newValuesEnv(t, topic)
	ident := table.Identifier{"kafka", "orders"}
	// Two serdes, one per version: a producer encodes with the version it knows.
	v1, v2 := new(sr.Serde), new(sr.Serde)
	id1 := e.registerAvro(v1, topic+"-value", orderV1)
	schema, err := kafka.RegistrySchema(e.ctx, e.sr, topic+"-value")
	if err != nil {
		t.Fatal(err)
	}
	e.createTable(ident, arrow.NewSchema(append(schema.Fields(),
		arrow.Field{Name: "_offset", Type: arrow.PrimitiveTypes.Int64}), nil))

	produce := func(serde *sr.Serde, id int, from, to int64, note bool) {
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			b, err := serde.Encode(avroOrder(i, note))
			if err != nil {
				t.Fatal(err)
			}
			if got, _, _ := new(sr.ConfluentHeader).DecodeID(b); got != id {
				t.Fatalf("encoded with schema %d, want %d", got, id)
			}
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % valuesParts), Value: b})
		}
		e.produce(recs...)
	}
	produce(v1, id1, 0, 60, false)
	run := e.start(kafka.Config{Topics: []string{topic}, Catalog: e.cat, Table: ident,
		Decoder: kafka.Avro(e.sr), Metadata: kafka.MetadataColumns{Offset: "_offset"},
		WriterOptions: []iceberg.Option{iceberg.WithSchemaEvolution()}})
	e.waitPositions(ident, topic)
	id2 := e.registerAvro(v2, topic+"-value", orderV2)
	produce(v2, id2, 60, 100, true)
	e.waitPositions(ident, topic)
	e.stop(run)

	if cols := e.tableColumns(ident); !slices.Contains(cols, "note") {
		t.Fatalf("table columns %v: no note column after the second schema version", cols)
	}
	rows := e.rows(ident)
	if len(rows) != 100 {
		t.Fatalf("%d rows, want 100", len(rows))
	}
	seen := map[string]bool{}
	for _, r := range rows {
		id := fmt.Sprint(r["id"])
		var n int64
		fmt.Sscan(id, &n)
		if seen[id] {
			t.Errorf("order %s twice", id)
		}
		seen[id] = true
		if diff := diffRow(r, wantOrder(n)); diff != "" {
			t.Errorf("order %d: %s", n, diff)
		}
	}
}

// wantOrder is order id's row as the table must hold it, each value as fmt prints the scanned value.
func wantOrder(id int64) map[string]string {
	v := avroOrder(id, id >= 60)
	w := map[string]string{
		"id": fmt.Sprint(id), "customer": v["customer"].(string),
		"amount": v["amount"].(*big.Rat).FloatString(2),
		"day":    v["day"].(time.Time).Format(time.DateOnly),
		"at":     v["at"].(time.Time).Format(time.RFC3339),
		"ref":    v["ref"].(string), "tags": fmt.Sprintf("[t %d]", id),
		"counts": fmt.Sprintf("[map[key:n value:%d]]", id), "address": "<nil>", "status": v["status"].(string),
		"note": "<nil>", "_offset": fmt.Sprint(id / valuesParts),
	}
	if id%2 == 1 {
		w["address"] = fmt.Sprintf("map[city:city-%d zip:%d]", id, id)
	}
	if id >= 60 {
		w["note"] = fmt.Sprintf("note-%d", id)
	}
	return w
}

// diffRow compares a scanned row with the wanted values (decimals by value): "" when they agree.
func diffRow(got map[string]any, want map[string]string) string {
	var diffs []string
	for k, w := range want {
		g := fmt.Sprint(got[k])
		if k == "amount" {
			a, _ := new(big.Rat).SetString(g)
			b, _ := new(big.Rat).SetString(w)
			if a != nil && b != nil && a.Cmp(b) == 0 {
				continue
			}
		}
		if g != w {
			diffs = append(diffs, fmt.Sprintf("%s = %s, want %s", k, g, w))
		}
	}
	if len(got) != len(want) {
		diffs = append(diffs, fmt.Sprintf("%d columns, want %d", len(got), len(want)))
	}
	slices.Sort(diffs)
	return strings.Join(diffs, "; ")
}
