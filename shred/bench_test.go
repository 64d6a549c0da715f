package shred

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

const benchRows = 10000

func reportRows(b *testing.B, perOp int) {
	b.ReportMetric(float64(perOp)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkStructs converts 10,000 seed events per op with a reused Converter.
func BenchmarkStructs(b *testing.B) {
	rows := seedEvents(benchRows)
	c, err := NewConverter[SeedEvent](nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Release()
	mem := memory.DefaultAllocator
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rec, err := c.Convert(mem, rows)
		if err != nil {
			b.Fatal(err)
		}
		rec.Release()
	}
	reportRows(b, benchRows)
}

// BenchmarkHandWrittenBuilders is the baseline: arrow-go builder code written
// by hand for SeedEvent, with a reused RecordBuilder.
func BenchmarkHandWrittenBuilders(b *testing.B) {
	rows := seedEvents(benchRows)
	schema, err := SchemaOf[SeedEvent]()
	if err != nil {
		b.Fatal(err)
	}
	rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer rb.Release()
	id := rb.Field(0).(*array.Int64Builder)
	uid := rb.Field(1).(*array.Int64Builder)
	et := rb.Field(2).(*array.StringBuilder)
	val := rb.Field(3).(*array.Float64Builder)
	info := rb.Field(4).(*array.StringBuilder)
	ts := rb.Field(5).(*array.TimestampBuilder)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rb.Reserve(len(rows))
		for i := range rows {
			r := &rows[i]
			id.Append(r.ID)
			uid.Append(r.UserID)
			et.Append(r.EventType)
			val.Append(r.Value)
			info.Append(r.Info)
			ts.Append(arrow.Timestamp(r.TS.UnixMicro()))
		}
		rec := rb.NewRecordBatch()
		rec.Release()
	}
	reportRows(b, benchRows)
}

func seedJSONLines(n int) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, e := range seedEvents(n) {
		if err := enc.Encode(map[string]any{
			"id": e.ID, "user_id": e.UserID, "event_type": e.EventType, "value": e.Value, "info": e.Info,
			"ts": e.TS.Format("2006-01-02T15:04:05.000000Z07:00"),
		}); err != nil {
			panic(err)
		}
	}
	return buf.Bytes()
}

// BenchmarkJSONLines converts 10,000 seed-event lines into a known schema.
func BenchmarkJSONLines(b *testing.B) {
	data := seedJSONLines(benchRows)
	target, err := SchemaOf[SeedEvent]()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		rec, err := JSONLines(memory.DefaultAllocator, data, target)
		if err != nil {
			b.Fatal(err)
		}
		rec.Release()
	}
	reportRows(b, benchRows)
}

// BenchmarkJSONLinesInferred is the no-schema path (maps, inference, conversion).
func BenchmarkJSONLinesInferred(b *testing.B) {
	data := seedJSONLines(benchRows)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		rec, err := JSONLines(memory.DefaultAllocator, data, nil)
		if err != nil {
			b.Fatal(err)
		}
		rec.Release()
	}
	reportRows(b, benchRows)
}

// BenchmarkEncodingJSONMaps is the baseline: encoding/json decoding the same
// bytes into map[string]any (no Arrow at all).
func BenchmarkEncodingJSONMaps(b *testing.B) {
	data := seedJSONLines(benchRows)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		dec := json.NewDecoder(bytes.NewReader(data))
		for {
			var m map[string]any
			if err := dec.Decode(&m); err != nil {
				break
			}
		}
	}
	reportRows(b, benchRows)
}
