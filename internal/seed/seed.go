// Package seed generates the seed benchmark's events (DESIGN.md), one generator for benchmarks, tests and
// examples: id int64 sequential and required, user_id int64 uniform in [0, 100000), event_type one of six
// strings, value float64 uniform in [0, 1000), info 92 random hex characters, ts a microsecond timestamp with
// zone, one millisecond apart. About 148 bytes per row in Arrow buffers.
package seed

import (
	"math/rand/v2"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// EventTypes are the values of event_type.
var EventTypes = []string{"click", "view", "purchase", "signup", "logout", "search"}

// Start is the timestamp of event 0.
var Start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Schema is the events' Arrow schema.
var Schema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: false},
	{Name: "user_id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "event_type", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "value", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "info", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
}, nil)

// Generator produces events with sequential ids from a seeded random source.
type Generator struct {
	next int64
	rng  *rand.Rand
	mem  memory.Allocator
	b    *array.RecordBuilder
	hex  []byte
}

// New returns a generator whose first id is first, deterministic for a given seed.
func New(first int64, seed uint64) *Generator {
	mem := memory.NewGoAllocator()
	return &Generator{next: first, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), mem: mem,
		b: array.NewRecordBuilder(mem, Schema), hex: make([]byte, 92)}
}

const hexDigits = "0123456789abcdef"

// Batch returns the next n events as one record batch (the caller releases it).
func (g *Generator) Batch(n int) arrow.RecordBatch {
	ids := g.b.Field(0).(*array.Int64Builder)
	users := g.b.Field(1).(*array.Int64Builder)
	types := g.b.Field(2).(*array.StringBuilder)
	values := g.b.Field(3).(*array.Float64Builder)
	infos := g.b.Field(4).(*array.StringBuilder)
	ts := g.b.Field(5).(*array.TimestampBuilder)
	for _, bld := range []array.Builder{ids, users, values, ts} {
		bld.Reserve(n)
	}
	types.Reserve(n)
	types.ReserveData(n * 8)
	infos.Reserve(n)
	infos.ReserveData(n * 92)
	start := Start.UnixMicro()
	for i := 0; i < n; i++ {
		id := g.next
		g.next++
		ids.UnsafeAppend(id)
		users.UnsafeAppend(g.rng.Int64N(100000))
		types.Append(EventTypes[g.rng.IntN(len(EventTypes))])
		values.UnsafeAppend(g.rng.Float64() * 1000)
		for j := 0; j < len(g.hex); j += 16 {
			r := g.rng.Uint64()
			for k := j; k < j+16 && k < len(g.hex); k++ {
				g.hex[k] = hexDigits[r&15]
				r >>= 4
			}
		}
		infos.BinaryBuilder.Append(g.hex)
		ts.UnsafeAppend(arrow.Timestamp(start + id*1000))
	}
	return g.b.NewRecordBatch()
}

// Next is the id the next event gets.
func (g *Generator) Next() int64 { return g.next }
