package kafka_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/tabletest"
	"github.com/icewriter/iceberg/kafka"
	"github.com/icewriter/iceberg/shred"
)

// variantDocs are JSON documents of every kind a variant holds: objects (nested, empty, a key given twice),
// arrays, strings with escapes and non-ASCII text, integers to the int64 bounds, decimals, a double no decimal
// holds, booleans, and the JSON null.
var variantDocs = []string{
	`{"id":1,"name":"ann","tags":["a","b"],"address":{"city":"Köln","geo":{"lat":50.94,"lon":6.96}}}`,
	`{}`, `[]`, `[1,"two",3.5,null,true,{"k":[[]]}]`,
	`{"a":1,"a":{"b":2}}`,
	`"a string with \"quotes\", \\ and \u00e9 \ud83d\ude00"`,
	`42`, `-9223372036854775808`, `9223372036854775807`, `0.1`, `-12.50`, `1.5e300`, `true`, `false`, `null`,
	`{"deep":{"a":{"b":{"c":{"d":{"e":{"f":{"g":[1,{"h":null}]}}}}}}}}`,
	"\n{\n  \"pretty\": [1, 2]\n}\n",
}

// randomDoc is a JSON object of varying shape: keys drawn from 30, values of every kind, nested.
func randomDoc(r *rand.Rand, depth int) any {
	switch k := r.IntN(8); {
	case depth > 3 || k == 0:
		return r.Int64N(1<<40) - 1<<39
	case k == 1:
		return fmt.Sprintf("s-%d", r.IntN(1000))
	case k == 2:
		return json.Number(strconv.FormatFloat(float64(r.IntN(100000))/100, 'f', 2, 64))
	case k == 3:
		return r.IntN(2) == 0
	case k == 4:
		return nil
	case k == 5:
		xs := make([]any, r.IntN(4))
		for i := range xs {
			xs[i] = randomDoc(r, depth+1)
		}
		return xs
	default:
		m := map[string]any{}
		for range r.IntN(5) {
			m[fmt.Sprintf("k%d", r.IntN(30))] = randomDoc(r, depth+1)
		}
		return m
	}
}

// variantRows reads the table back with iceberg-go's scanner: the variant column's cell of each row, by the
// string column key's value.
func variantRows(t testing.TB, e *valuesEnv, ident table.Identifier, variantCol, key string) map[string]any {
	t.Helper()
	tbl := tabletest.Load(t, e.cat, ident)
	sc, it := tabletest.Records(t, tbl)
	vc, kc := tabletest.Column(t, sc, variantCol), tabletest.Column(t, sc, key)
	out := map[string]any{}
	for rec := range it {
		keys := rec.Column(kc).(*array.String)
		for r := range int(rec.NumRows()) {
			k := keys.Value(r)
			if _, dup := out[k]; dup {
				t.Errorf("key %s twice", k)
			}
			out[k] = tabletest.Variant(t, rec.Column(vc), r)
		}
	}
	return out
}

var variantTableSchema = arrow.NewSchema([]arrow.Field{
	{Name: "doc", Type: extensions.NewDefaultVariantType(), Nullable: true},
	{Name: "_key", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "_offset", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// newVariantEnv is a values environment with the topic and a v3 table of that name in variantTableSchema.
func newVariantEnv(t *testing.T, topic string) (*valuesEnv, table.Identifier) {
	t.Helper()
	e := newValuesEnv(t, topic)
	ident := table.Identifier{"kafka", topic}
	e.createTable(ident, variantTableSchema, iceberg.FormatVersion(3))
	return e, ident
}

// TestJSONVariantTakesWholeValues sinks JSON values of every kind, and 300 random objects of varying shape,
// into the variant column of a v3 table (the record key and offset into metadata columns), plus a tombstone:
// each row reads back as its JSON document (numbers by exact value, a key given twice as its last value), the
// JSON null as the variant null and the tombstone as SQL NULL.
func TestJSONVariantTakesWholeValues(t *testing.T) {
	const topic = "docs"
	e, ident := newVariantEnv(t, topic)

	want := map[string]any{}
	var recs []*kgo.Record
	add := func(key string, value []byte) {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(len(recs) % valuesParts),
			Key: []byte(key), Value: value})
		if value == nil {
			want[key] = tabletest.SQLNull
		} else {
			want[key] = tabletest.JSONValue(t, value)
		}
	}
	for i, d := range variantDocs {
		add(fmt.Sprint("fixed-", i), []byte(d))
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		b, err := json.Marshal(randomDoc(r, 0))
		if err != nil {
			t.Fatal(err)
		}
		add(fmt.Sprint("random-", i), b)
	}
	add("tombstone", nil)
	e.produce(recs...)
	run := e.start(kafka.Config{Topics: []string{topic}, Catalog: e.cat, Table: ident,
		Decoder: kafka.JSONVariant("doc"), Metadata: kafka.MetadataColumns{Key: "_key", Offset: "_offset"}})
	e.waitPositions(ident, topic)
	e.stop(run)

	got := variantRows(t, e, ident, "doc", "_key")
	if len(got) != len(want) {
		t.Errorf("%d rows, want %d", len(got), len(want))
	}
	for k, w := range want {
		if g, ok := got[k]; !ok {
			t.Errorf("%s: missing", k)
		} else if !reflect.DeepEqual(g, w) {
			t.Errorf("%s: read %#v, want %#v", k, g, w)
		}
	}
}

// TestJSONVariantFieldTakesOneField sinks JSON objects into a variant column through one top-level field:
// present (objects, arrays, scalars), a JSON null (the variant null) and missing (SQL NULL); other keys are
// ignored.
func TestJSONVariantFieldTakesOneField(t *testing.T) {
	const topic = "events"
	e, ident := newVariantEnv(t, topic)

	want := map[string]any{}
	var recs []*kgo.Record
	for i := range 120 {
		var value string
		switch i % 4 {
		case 0:
			value = fmt.Sprintf(`{"id":%d,"payload":{"n":%d,"list":[%d,"x"]}}`, i, i, i)
			want[fmt.Sprint(i)] = tabletest.JSONValue(t, fmt.Appendf(nil, `{"n":%d,"list":[%d,"x"]}`, i, i))
		case 1:
			value = fmt.Sprintf(`{"payload":"s-%d","id":%d}`, i, i)
			want[fmt.Sprint(i)] = fmt.Sprintf("s-%d", i)
		case 2:
			value = fmt.Sprintf(`{"id":%d,"payload":null}`, i)
			want[fmt.Sprint(i)] = nil
		case 3:
			value = fmt.Sprintf(`{"id":%d}`, i)
			want[fmt.Sprint(i)] = tabletest.SQLNull
		}
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % valuesParts), Key: []byte(fmt.Sprint(i)),
			Value: []byte(value)})
	}
	e.produce(recs...)
	run := e.start(kafka.Config{Topics: []string{topic}, Catalog: e.cat, Table: ident,
		Decoder: kafka.JSONVariantField("doc", "payload"), Metadata: kafka.MetadataColumns{Key: "_key", Offset: "_offset"}})
	e.waitPositions(ident, topic)
	e.stop(run)

	got := variantRows(t, e, ident, "doc", "_key")
	if !reflect.DeepEqual(got, want) {
		for k, w := range want {
			if !reflect.DeepEqual(got[k], w) {
				t.Errorf("%s: read %#v, want %#v", k, got[k], w)
			}
		}
		t.Fatalf("%d rows, want %d", len(got), len(want))
	}
}

// TestJSONVariantRejectsBadValues: a value that is not one JSON document (or, for a field, not an object; invalid
// UTF-8 in a string too), or holds a number no variant holds exactly (shred.ErrInexactNumber), is a bad record
// (ErrDecode) at its index, naming the column; a table without the variant column is refused at New.
func TestJSONVariantRejectsBadValues(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "doc", Type: extensions.NewDefaultVariantType(), Nullable: true}}, nil)
	for _, c := range []struct {
		dec     kafka.Decoder
		bad     string
		inexact bool
	}{
		{kafka.JSONVariant("doc"), `{"a":1`, false},
		{kafka.JSONVariant("doc"), `{"a":1} {"b":2}`, false},
		{kafka.JSONVariant("doc"), ``, false},
		{kafka.JSONVariant("doc"), `nope`, false},
		{kafka.JSONVariant("doc"), "\"\xff\"", false},
		{kafka.JSONVariant("doc"), `{"n": [1e-400]}`, true},
		{kafka.JSONVariant("doc"), `123456789012345678901234567890123456789012`, true},
		{kafka.JSONVariantField("doc", "a"), `[1,2]`, false},
		{kafka.JSONVariantField("doc", "a"), `{"a":1,}`, false},
		{kafka.JSONVariantField("doc", "a"), `{"a":1e400}`, true},
	} {
		_, n, err := c.dec.Decode(memory.DefaultAllocator, [][]byte{[]byte(`{"a":1}`), []byte(c.bad)}, schema)
		if !errors.Is(err, kafka.ErrDecode) || n != 1 || !strings.Contains(err.Error(), `"doc"`) {
			t.Errorf("%q: index %d, error %v; want ErrDecode at index 1 naming the column", c.bad, n, err)
		}
		if c.inexact && !errors.Is(err, shred.ErrInexactNumber) {
			t.Errorf("%q: %v, want shred.ErrInexactNumber", c.bad, err)
		}
	}

	e := newValuesEnv(t, "docs")
	ident := table.Identifier{"kafka", "strings"}
	e.createTable(ident, arrow.NewSchema([]arrow.Field{{Name: "doc", Type: arrow.BinaryTypes.String}}, nil))
	_, err := kafka.New(e.ctx, kafka.Config{Brokers: e.cluster.ListenAddrs(), Group: "g", Topics: []string{"docs"},
		Catalog: e.cat, Table: ident, Decoder: kafka.JSONVariant("doc")})
	if !errors.Is(err, kafka.ErrConfig) || !strings.Contains(err.Error(), "want variant") {
		t.Errorf("New on a string column: %v, want ErrConfig naming the type", err)
	}
}

// JSONVariant is the decoder of a sink whose table keeps each record's JSON value, of any shape, in one variant
// column; JSONVariantField takes one top-level field of it. Decode is what the sink calls on each poll.
func ExampleJSONVariant() {
	schema := arrow.NewSchema([]arrow.Field{{Name: "doc", Type: extensions.NewDefaultVariantType(), Nullable: true}}, nil)
	values := [][]byte{[]byte(`{"id":1,"tags":["a"]}`), []byte(`{"id":2,"payload":{"n":2.5}}`), nil}
	for _, dec := range []kafka.Decoder{kafka.JSONVariant("doc"), kafka.JSONVariantField("doc", "payload")} {
		rec, _, err := dec.Decode(memory.DefaultAllocator, values, schema)
		if err != nil {
			panic(err)
		}
		fmt.Println(rec.Column(0))
		rec.Release()
	}
	// Output:
	// VariantArray[{"id":1,"tags":["a"]} {"id":2,"payload":{"n":2.5}} (null)]
	// VariantArray[(null) {"n":2.5} (null)]
}

// debeziumDocsAvro is the Avro envelope of a table (id, doc json) as Debezium's AvroConverter registers it
// (trimmed): the json column is a string of connect.name io.debezium.data.Json.
const debeziumDocsAvro = `{"type":"record","name":"Envelope","namespace":"pg.public.docs","fields":[
 {"name":"before","type":["null",{"type":"record","name":"Value","fields":[
   {"name":"id","type":"long"},
   {"name":"doc","type":["null",{"type":"string","connect.name":"io.debezium.data.Json"}],"default":null}]}],"default":null},
 {"name":"after","type":["null","Value"],"default":null},
 {"name":"op","type":"string"}]}`

// TestDebeziumJSONColumnsIntoVariant applies Debezium change events of a table with a json column (its values
// JSON text in a string) to a v3 table whose column is a variant, in JSON and in Avro: creates, updates between
// documents, to the JSON null and to NULL, a key change, deletes with tombstones. The table reads back as the
// model: each document by value, the JSON null as the variant null, NULL as NULL.
func TestDebeziumJSONColumnsIntoVariant(t *testing.T) {
	for _, avro := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "avro"}[avro], func(t *testing.T) {
			const topic = "pg.public.docs"
			e := newValuesEnv(t, topic)
			ident := table.Identifier{"kafka", "docs"}
			e.createTable(ident, arrow.NewSchema([]arrow.Field{
				{Name: "id", Type: arrow.PrimitiveTypes.Int64},
				{Name: "doc", Type: extensions.NewDefaultVariantType(), Nullable: true},
			}, nil), iceberg.FormatVersion(3), iceberg.IdentifierFields("id"))
			encode := func(ev map[string]any) []byte { return jsonEvent(ev, 1) }
			opts := kafka.DebeziumOptions{}
			if avro {
				encode = e.avroEncoder(topic+"-value", debeziumDocsAvro)
				opts.Registry = e.sr
			}
			model := map[int64]any{}
			var recs []*kgo.Record
			img := func(id int64, doc *string) map[string]any {
				m := map[string]any{"id": id, "doc": nil}
				if doc != nil {
					m["doc"] = *doc
				}
				return m
			}
			docOf := func(i int) *string {
				if i%6 == 5 {
					return nil
				}
				d := variantDocs[i%len(variantDocs)]
				return &d
			}
			state := map[int64]*string{}
			change := func(op string, before, after int64, doc *string) {
				ev := map[string]any{"op": op, "before": nil, "after": nil}
				if op != "c" {
					ev["before"] = img(before, state[before])
					delete(state, before)
					delete(model, before)
				}
				if op != "d" {
					ev["after"] = img(after, doc)
					state[after] = doc
					model[after] = tabletest.SQLNull
					if doc != nil {
						model[after] = tabletest.JSONValue(t, []byte(*doc))
					}
				}
				key := before
				if op == "c" {
					key = after
				}
				recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(key % valuesParts), Value: encode(ev)})
				if op == "d" {
					recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(key % valuesParts)})
				}
			}
			for i := range int64(30) {
				change("c", 0, i, docOf(int(i)))
			}
			jsonNull := "null"
			for i := int64(0); i < 30; i += 3 {
				switch i % 4 {
				case 0:
					change("u", i, i, &jsonNull)
				case 1:
					change("u", i, i, nil)
				default:
					change("u", i, i, docOf(int(i)+7))
				}
			}
			change("u", 4, 4+valuesParts*50, docOf(3)) // a key change, in the same partition
			for i := int64(1); i < 30; i += 5 {
				change("d", i, 0, nil)
			}
			e.produce(recs...)
			run := e.start(kafka.Config{Topics: []string{topic}, Catalog: e.cat, Table: ident, Decoder: kafka.Debezium(opts)})
			e.waitPositions(ident, topic)
			e.stop(run)

			tbl := tabletest.Load(t, e.cat, ident)
			sc, it := tabletest.Records(t, tbl)
			got := map[int64]any{}
			for rec := range it {
				ids := rec.Column(tabletest.Column(t, sc, "id")).(*array.Int64)
				for r := range int(rec.NumRows()) {
					got[ids.Value(r)] = tabletest.Variant(t, rec.Column(tabletest.Column(t, sc, "doc")), r)
				}
			}
			if !reflect.DeepEqual(got, model) {
				for id, w := range model {
					if !reflect.DeepEqual(got[id], w) {
						t.Errorf("id %d: read %#v, want %#v", id, got[id], w)
					}
				}
				t.Fatalf("%d rows, want %d", len(got), len(model))
			}
		})
	}
}

// TestJSONDecoderFillsVariantColumns: the JSON decoder puts a key's value, of any shape, into the variant
// column of that name, beside ordinary columns (JSONLines' rules): present, JSON null (the variant null) and
// missing (NULL), in compact and pretty-printed values. Read back with the scanner, exactly.
func TestJSONDecoderFillsVariantColumns(t *testing.T) {
	const topic = "mixed"
	e := newValuesEnv(t, topic)
	ident := table.Identifier{"kafka", "mixed"}
	e.createTable(ident, arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "payload", Type: extensions.NewDefaultVariantType(), Nullable: true},
		{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil), iceberg.FormatVersion(3))
	type row struct {
		payload any
		note    string
	}
	want := map[int64]row{}
	var recs []*kgo.Record
	for i := range int64(90) {
		payload := variantDocs[int(i)%len(variantDocs)]
		value := fmt.Sprintf(`{"id": %d, "payload": %s, "note": "n-%d"}`, i, payload, i)
		want[i] = row{tabletest.JSONValue(t, []byte(payload)), fmt.Sprint("n-", i)}
		if i%5 == 4 {
			value = fmt.Sprintf(`{"note": "n-%d", "id": %d}`, i, i)
			want[i] = row{tabletest.SQLNull, fmt.Sprint("n-", i)}
		}
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % valuesParts), Value: []byte(value)})
	}
	e.produce(recs...)
	e.sinkEach(topic, kafka.JSON(), ident)

	tbl := tabletest.Load(t, e.cat, ident)
	sc, it := tabletest.Records(t, tbl)
	got := map[int64]row{}
	for rec := range it {
		ids := rec.Column(tabletest.Column(t, sc, "id")).(*array.Int64)
		notes := rec.Column(tabletest.Column(t, sc, "note")).(*array.String)
		for r := range int(rec.NumRows()) {
			got[ids.Value(r)] = row{tabletest.Variant(t, rec.Column(tabletest.Column(t, sc, "payload")), r), notes.Value(r)}
		}
	}
	if !reflect.DeepEqual(got, want) {
		for id, w := range want {
			if !reflect.DeepEqual(got[id], w) {
				t.Errorf("id %d: read %#v, want %#v", id, got[id], w)
			}
		}
		t.Fatalf("%d rows, want %d", len(got), len(want))
	}

	// A key with no column is a bad record, as without variant columns, and so is a bad document.
	schema := arrow.NewSchema([]arrow.Field{{Name: "payload", Type: extensions.NewDefaultVariantType(), Nullable: true}}, nil)
	for _, bad := range []string{`{"payload": 1, "other": 2}`, `{"payload": 1e400}`, `[1]`} {
		_, n, err := kafka.JSON().Decode(memory.DefaultAllocator, [][]byte{[]byte(`{"payload": {}}`), []byte(bad)}, schema)
		if !errors.Is(err, kafka.ErrDecode) || n != 1 {
			t.Errorf("%s: index %d, error %v; want ErrDecode at index 1", bad, n, err)
		}
	}
}
