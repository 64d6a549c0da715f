package shred

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/icewriter/iceberg/internal/benchpair"
)

// JSON of varying shape into one variant column: each document draws 4 to 16
// of 100 distinct keys, with numbers, strings, booleans, nulls, nested
// objects and arrays.

const variantKeys = 100

// variantDoc appends one document of varying shape.
func variantDoc(buf []byte, r *rand.Rand, depth int) []byte {
	buf = append(buf, '{')
	n := 4 + r.IntN(13)
	if depth > 0 {
		n = 1 + r.IntN(4)
	}
	first := r.IntN(variantKeys)
	for k := range n {
		if k > 0 {
			buf = append(buf, ',')
		}
		buf = fmt.Appendf(buf, `"key%02d":`, (first+k*7)%variantKeys)
		buf = variantScalarOrNested(buf, r, depth)
	}
	return append(buf, '}')
}

func variantScalarOrNested(buf []byte, r *rand.Rand, depth int) []byte {
	switch c := r.IntN(10); {
	case c == 0 && depth < 3:
		return variantDoc(buf, r, depth+1)
	case c == 1 && depth < 3:
		buf = append(buf, '[')
		for i := range 1 + r.IntN(5) {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = variantScalarOrNested(buf, r, depth+1)
		}
		return append(buf, ']')
	case c <= 3:
		return strconv.AppendInt(buf, r.Int64N(1_000_000)-500_000, 10)
	case c == 4:
		return strconv.AppendFloat(buf, float64(r.IntN(100000))/100, 'f', 2, 64)
	case c <= 7:
		return strconv.AppendQuote(buf, eventTypes[r.IntN(len(eventTypes))]+"-"+strconv.Itoa(r.IntN(1000)))
	case c == 8:
		return strconv.AppendBool(buf, r.IntN(2) == 0)
	}
	return append(buf, "null"...)
}

// variantLines returns n documents and the same documents as JSON lines
// {"id": i, "payload": doc}.
func variantLines(n int) (docs [][]byte, lines []byte) {
	r := rand.New(rand.NewPCG(3, 4))
	var buf []byte
	for i := range n {
		doc := variantDoc(nil, r, 0)
		docs = append(docs, doc)
		buf = fmt.Appendf(buf, `{"id":%d,"payload":`, i)
		buf = append(append(buf, doc...), "}\n"...)
	}
	return docs, buf
}

var variantSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "payload", Type: extensions.NewDefaultVariantType(), Nullable: true},
}, nil)

func variantJSONLinesOnce(b *testing.B, lines []byte) {
	rec, err := JSONLines(memory.DefaultAllocator, lines, variantSchema)
	if err != nil {
		b.Fatal(err)
	}
	rec.Release()
}

func encodingJSONMapsOnce(b *testing.B, lines []byte) {
	for len(lines) > 0 {
		k := bytes.IndexByte(lines, '\n')
		var m map[string]any
		if err := json.Unmarshal(lines[:k], &m); err != nil {
			b.Fatal(err)
		}
		lines = lines[k+1:]
	}
}

// BenchmarkVariantJSONLines converts 10,000 lines whose payload column is
// variant (the JSON text goes straight into the variant encoding).
func BenchmarkVariantJSONLines(b *testing.B) { benchVariantLines(b, variantJSONLinesOnce) }

// BenchmarkVariantEncodingJSONMaps is the baseline: encoding/json
// unmarshalling the same lines into map[string]any.
func BenchmarkVariantEncodingJSONMaps(b *testing.B) { benchVariantLines(b, encodingJSONMapsOnce) }

func benchVariantLines(b *testing.B, once func(*testing.B, []byte)) {
	_, lines := variantLines(benchRows)
	b.SetBytes(int64(len(lines)))
	b.ReportAllocs()
	for b.Loop() {
		once(b, lines)
	}
	reportRows(b, benchRows)
}

// BenchmarkVariantAppendJSON appends the 10,000 documents one by one with
// AppendVariantJSON (the entry point of the Kafka and Postgres sources).
func BenchmarkVariantAppendJSON(b *testing.B) {
	docs, _ := variantLines(benchRows)
	vb := extensions.NewVariantBuilder(memory.DefaultAllocator, extensions.NewDefaultVariantType())
	defer vb.Release()
	b.ReportAllocs()
	for b.Loop() {
		for _, d := range docs {
			if err := AppendVariantJSON(vb, d); err != nil {
				b.Fatal(err)
			}
		}
		vb.NewArray().Release()
	}
	reportRows(b, benchRows)
}

// BenchmarkVariantPair runs JSONLines into the variant column and the
// encoding/json baseline in pairs of 1,000 lines and reports the median of
// their paired ratios (x-encoding-json above 1: JSONLines is faster), so the
// load of a shared machine falls on both sides of each pair.
func BenchmarkVariantPair(b *testing.B) {
	_, lines := variantLines(benchRows)
	var chunks [][]byte
	for len(lines) > 0 {
		end := 0
		for range 1000 {
			end += bytes.IndexByte(lines[end:], '\n') + 1
			if end == len(lines) {
				break
			}
		}
		chunks = append(chunks, lines[:end])
		lines = lines[end:]
	}
	var base, x []float64
	for b.Loop() {
		for _, c := range chunks {
			start := time.Now()
			encodingJSONMapsOnce(b, c)
			base = append(base, time.Since(start).Seconds())
			start = time.Now()
			variantJSONLinesOnce(b, c)
			x = append(x, time.Since(start).Seconds())
		}
	}
	b.ReportMetric(benchpair.Ratio(base, x), "x-encoding-json")
	b.ReportMetric(1000/benchpair.Median(x), "rows/s")
}
