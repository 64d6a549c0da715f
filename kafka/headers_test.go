package kafka_test

import (
	"encoding/base64"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/icewriter/iceberg/kafka"
)

// TestHeadersColumn writes records' headers into a metadata column of each accepted type: a map keeps a key's
// last value, a list every header in order; a record without headers has an empty one.
func TestHeadersColumn(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	for _, tc := range []struct {
		name string
		typ  arrow.DataType
		want func(id int) string // the column's value as fmt prints the scanned value
	}{
		{"map", arrow.MapOf(arrow.BinaryTypes.String, arrow.BinaryTypes.Binary), func(id int) string {
			if id%3 == 0 {
				return "[]"
			}
			return fmt.Sprintf("[map[key:trace value:%s] map[key:dup value:%s]]", b64(fmt.Sprint("t-", id)), b64("second"))
		}},
		{"list", arrow.ListOf(arrow.StructOf(arrow.Field{Name: "key", Type: arrow.BinaryTypes.String},
			arrow.Field{Name: "value", Type: arrow.BinaryTypes.String, Nullable: true})), func(id int) string {
			if id%3 == 0 {
				return "[]"
			}
			return fmt.Sprintf("[map[key:trace value:t-%d] map[key:dup value:first] map[key:dup value:second]]", id)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const topic = "events"
			e := newValuesEnv(t, topic)
			ident := table.Identifier{"kafka", "events"}
			e.createTable(ident, arrow.NewSchema([]arrow.Field{
				{Name: "id", Type: arrow.PrimitiveTypes.Int64},
				{Name: "_headers", Type: tc.typ},
			}, nil))
			var recs []*kgo.Record
			for id := range 30 {
				r := &kgo.Record{Topic: topic, Partition: int32(id % valuesParts), Value: fmt.Appendf(nil, `{"id": %d}`, id)}
				if id%3 != 0 {
					r.Headers = []kgo.RecordHeader{{Key: "trace", Value: fmt.Appendf(nil, "t-%d", id)},
						{Key: "dup", Value: []byte("first")}, {Key: "dup", Value: []byte("second")}}
				}
				recs = append(recs, r)
			}
			e.produce(recs...)
			run := e.start(kafka.Config{Topics: []string{topic}, Catalog: e.cat, Table: ident,
				Metadata: kafka.MetadataColumns{Headers: "_headers"}})
			e.waitPositions(ident, topic)
			e.stop(run)
			rows := e.rows(ident)
			if len(rows) != 30 {
				t.Fatalf("%d rows, want 30", len(rows))
			}
			for _, r := range rows {
				var id int
				fmt.Sscan(fmt.Sprint(r["id"]), &id)
				if got, want := fmt.Sprint(r["_headers"]), tc.want(id); got != want {
					t.Errorf("record %d: headers %s, want %s", id, got, want)
				}
			}
		})
	}
}
