package kafka_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/avro"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/icewriter/iceberg/internal/benchpair"
	"github.com/icewriter/iceberg/kafka"
)

const benchAvro = `{"type":"record","name":"Event","fields":[
 {"name":"id","type":"long"},{"name":"user_id","type":"long"},{"name":"event_type","type":"string"},
 {"name":"value","type":"double"},{"name":"info","type":"string"}]}`

const benchProto = `syntax = "proto3";
message Event { int64 id = 1; int64 user_id = 2; string event_type = 3; double value = 4; string info = 5; }
`

var benchSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "user_id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "event_type", Type: arrow.BinaryTypes.String},
	{Name: "value", Type: arrow.PrimitiveTypes.Float64},
	{Name: "info", Type: arrow.BinaryTypes.String},
}, nil)

// BenchmarkDecoders decodes polls of 1,000 seed-like events (five columns) with each decoder, the registry's
// schemas already cached: rows/s per decoder, compared within one run.
func BenchmarkDecoders(b *testing.B) {
	const n = 1000
	reg := srfake.New()
	defer reg.Close()
	cl, err := sr.NewClient(sr.URLs(reg.URL()))
	if err != nil {
		b.Fatal(err)
	}
	avroID, _, err := reg.RegisterSchema("events-value", sr.Schema{Schema: benchAvro, Type: sr.TypeAvro})
	if err != nil {
		b.Fatal(err)
	}
	protoID, _, err := reg.RegisterSchema("pevents-value", sr.Schema{Schema: benchProto, Type: sr.TypeProtobuf})
	if err != nil {
		b.Fatal(err)
	}
	as := avro.MustParse(benchAvro)
	md := compileProto(b, benchProto)
	var avroSerde, protoSerde sr.Serde
	avroSerde.Register(avroID, map[string]any{}, sr.EncodeFn(func(v any) ([]byte, error) { return as.Encode(v) }))
	protoSerde.Register(protoID, &dynamicpb.Message{}, sr.Index(0),
		sr.EncodeFn(func(v any) ([]byte, error) { return proto.Marshal(v.(proto.Message)) }))
	values := map[string][][]byte{}
	for i := range n {
		ev := map[string]any{"id": int64(i), "user_id": int64(i * 7 % 100000), "event_type": "click",
			"value": float64(i) / 3, "info": fmt.Sprintf("%092x", i)}
		j := fmt.Appendf(nil, `{"id": %d, "user_id": %d, "event_type": "click", "value": %g, "info": %q}`,
			ev["id"], ev["user_id"], ev["value"], ev["info"])
		a, err := avroSerde.Encode(ev)
		if err != nil {
			b.Fatal(err)
		}
		m := dynamicpb.NewMessage(md)
		for k, v := range ev {
			m.Set(md.Fields().ByName(protoreflect.Name(k)), protoreflect.ValueOf(v))
		}
		p, err := protoSerde.Encode(m)
		if err != nil {
			b.Fatal(err)
		}
		values["json"] = append(values["json"], j)
		values["avro"] = append(values["avro"], a)
		values["protobuf"] = append(values["protobuf"], p)
	}
	for _, c := range []struct {
		name string
		dec  kafka.Decoder
	}{{"json", kafka.JSON()}, {"avro", kafka.Avro(cl)}, {"protobuf", kafka.Protobuf(cl)}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				rec, k, err := c.dec.Decode(memory.DefaultAllocator, values[c.name], benchSchema)
				if err != nil || k != n {
					b.Fatalf("decoded %d: %v", k, err)
				}
				rec.Release()
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkJSONVariantPair decodes polls of 1,000 JSON objects of varying shape (randomDoc's) into one variant
// column with JSONVariant, and unmarshals the same values into map[string]any with encoding/json, in pairs:
// x-encoding-json above 1 means JSONVariant is faster (the median of the paired ratios, so a shared machine's
// load falls on both sides of each pair).
func BenchmarkJSONVariantPair(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	var values [][]byte
	for len(values) < 1000 {
		d, ok := randomDoc(r, 0).(map[string]any)
		if !ok || len(d) == 0 {
			continue
		}
		v, err := json.Marshal(d)
		if err != nil {
			b.Fatal(err)
		}
		values = append(values, v)
	}
	schema := arrow.NewSchema([]arrow.Field{{Name: "doc", Type: variantTableSchema.Field(0).Type, Nullable: true}}, nil)
	dec := kafka.JSONVariant("doc")
	var base, x []float64
	for b.Loop() {
		start := time.Now()
		for _, v := range values {
			var m map[string]any
			if err := json.Unmarshal(v, &m); err != nil {
				b.Fatal(err)
			}
		}
		base = append(base, time.Since(start).Seconds())
		start = time.Now()
		rec, k, err := dec.Decode(memory.DefaultAllocator, values, schema)
		if err != nil || k != len(values) {
			b.Fatalf("decoded %d: %v", k, err)
		}
		rec.Release()
		x = append(x, time.Since(start).Seconds())
	}
	b.ReportMetric(benchpair.Ratio(base, x), "x-encoding-json")
	b.ReportMetric(float64(len(values))/benchpair.Median(x), "rows/s")
}
