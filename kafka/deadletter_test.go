package kafka_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/kafka"
)

const nullableIDSchema = `{"type":"record","name":"Item","fields":[
 {"name":"id","type":["null","long"]},{"name":"name","type":"string"}]}`

// TestDeadLetterTopicTakesExactlyTheBadRecords mixes bad records into good ones: values not in the registry's
// wire format and values naming a schema the registry lacks (they do not decode), and values whose id is null
// while the table's id is required (the writer rejects their batch; the sink writes it again record by record).
// The dead-letter topic ends holding exactly the bad records, with their source topic, partition and offset
// and the error in headers; the table holds exactly the good ones; the positions cover all (nothing retried).
func TestDeadLetterTopicTakesExactlyTheBadRecords(t *testing.T) {
	const topic, dlq = "items", "items-dlq"
	e := newValuesEnv(t, topic, dlq)
	ident := table.Identifier{"kafka", "items"}
	e.createTable(ident, arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil))
	serde := new(sr.Serde)
	e.registerAvro(serde, topic+"-value", nullableIDSchema)

	good := map[int64]bool{}
	why := map[int64]string{} // what is wrong with each bad record: a word its dead letter's error holds
	var recs []*kgo.Record
	for i := range int64(200) {
		var v []byte
		switch {
		case i%17 == 3:
			v, why[i] = []byte("not avro"), "wire format"
		case i%23 == 5:
			v, why[i] = []byte{0, 0, 0, 3, 231, 2}, "not in the registry"
		case i%11 == 7:
			b, err := serde.Encode(map[string]any{"id": nil, "name": fmt.Sprint("null-", i)})
			if err != nil {
				t.Fatal(err)
			}
			v, why[i] = b, `column "id"`
		default:
			b, err := serde.Encode(map[string]any{"id": i, "name": fmt.Sprint("n-", i)})
			if err != nil {
				t.Fatal(err)
			}
			v, good[i] = b, true
		}
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % valuesParts), Value: v,
			Key: []byte(strconv.FormatInt(i, 10))})
	}
	e.produce(recs...)
	bad := map[string]string{} // "partition/offset" -> the word its error must hold
	for _, r := range recs {
		if i, _ := strconv.ParseInt(string(r.Key), 10, 64); !good[i] {
			bad[fmt.Sprintf("%d/%d", r.Partition, r.Offset)] = why[i]
		}
	}
	run := e.start(kafka.Config{Topics: []string{topic}, Catalog: e.cat, Table: ident, Decoder: kafka.Avro(e.sr),
		DeadLetterTopic: dlq})
	e.waitPositions(ident, topic)
	e.stop(run)

	rows := e.rows(ident)
	seen := map[int64]int{}
	for _, r := range rows {
		i, _ := strconv.ParseInt(fmt.Sprint(r["id"]), 10, 64)
		seen[i]++
		if !good[i] || r["name"] != fmt.Sprint("n-", i) {
			t.Errorf("table row %v: not a good record", r)
		}
	}
	for i := range good {
		if seen[i] != 1 {
			t.Errorf("good record %d is %d times in the table", i, seen[i])
		}
	}

	// The dead-letter topic, read from its start: exactly the bad records, each once.
	cons, err := kgo.NewClient(kgo.SeedBrokers(e.cluster.ListenAddrs()...), kgo.ConsumeTopics(dlq),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := map[string]int{}
	for n := 0; n < len(bad); {
		fs := cons.PollFetches(e.ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			n++
			h := map[string]string{}
			for _, x := range r.Headers {
				h[x.Key] = string(x.Value)
			}
			if h[kafka.HeaderTopic] != topic || h[kafka.HeaderError] == "" {
				t.Errorf("dead letter with headers %v", h)
			}
			k := h[kafka.HeaderPartition] + "/" + h[kafka.HeaderOffset]
			got[k]++
			if !strings.Contains(h[kafka.HeaderError], bad[k]) {
				t.Errorf("dead letter %s: error %q, want one about %s", k, h[kafka.HeaderError], bad[k])
			}
		})
	}
	for k := range bad {
		if got[k] != 1 {
			t.Errorf("bad record %s is %d times in the dead-letter topic", k, got[k])
		}
	}
	if len(got) != len(bad) {
		t.Errorf("dead-letter topic holds %d records, want %d", len(got), len(bad))
	}
}

// TestBadRecordStopsTheSinkWithoutADeadLetterTopic: without a dead-letter topic a record that does not decode
// stops the sink with a *RecordError naming it, and the table's position stays before it; a registry that
// cannot be reached stops it with ErrRegistry (the record is not bad).
func TestBadRecordStopsTheSinkWithoutADeadLetterTopic(t *testing.T) {
	const topic = "items"
	e := newValuesEnv(t, topic)
	ident := table.Identifier{"kafka", "items"}
	e.createTable(ident, arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil))
	e.produce(&kgo.Record{Topic: topic, Partition: 0, Value: []byte(`{"id": 1}`)},
		&kgo.Record{Topic: topic, Partition: 0, Value: []byte(`{"id": `)})
	run := e.start(kafka.Config{Topics: []string{topic}, Catalog: e.cat, Table: ident})
	err := <-run.done
	var re *kafka.RecordError
	if !errors.As(err, &re) || !errors.Is(err, kafka.ErrDecode) || re.Topic != topic || re.Partition != 0 || re.Offset != 1 {
		t.Fatalf("Run: %v, want a *RecordError of %s/0@1", err, topic)
	}
	pos, err := iceberg.Positions(e.ctx, e.cat, ident)
	if err != nil {
		t.Fatal(err)
	}
	if p := pos[topic+"/0"]; p != "" && p != "0" {
		t.Errorf("position %q after a failed poll, want none", p)
	}

	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
	}))
	defer down.Close()
	cl, err := sr.NewClient(sr.URLs(down.URL))
	if err != nil {
		t.Fatal(err)
	}
	const other = "other"
	e2 := newValuesEnv(t, other)
	e2.createTable(ident, arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil))
	e2.produce(&kgo.Record{Topic: other, Partition: 0, Value: []byte{0, 0, 0, 0, 1, 2}})
	run = e2.start(kafka.Config{Topics: []string{other}, Catalog: e2.cat, Table: ident, Decoder: kafka.Avro(cl),
		DeadLetterTopic: "unused"})
	if err := <-run.done; !errors.Is(err, kafka.ErrRegistry) || errors.Is(err, kafka.ErrDecode) {
		t.Fatalf("Run with the registry down: %v, want ErrRegistry", err)
	}
}
