package main

import (
	"math/rand/v2"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The seed event, as DESIGN.md pins it (a copy: internal/seed cannot be imported across modules): id int64
// sequential and required, user_id int64 uniform in [0, 100000), event_type one of six strings, value float64
// uniform in [0, 1000), info 92 random hex characters, ts a microsecond timestamp with zone (UTC), one
// millisecond apart. About 148 bytes per row in Arrow buffers.

var eventTypes = []string{"click", "view", "purchase", "signup", "logout", "search"}

var seedStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// seedInfoLen is the length of the info column of the seed event.
const seedInfoLen = 92

var seedSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: false},
	{Name: "user_id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "event_type", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "value", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "info", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
}, nil)

// generator produces seed events from a seeded random source, deterministic for a given seed.
type generator struct {
	next    int64
	rng     *rand.Rand
	b       *array.RecordBuilder
	info    []byte
	version int64 // added to value, so that an upserted row differs from the row it replaces
}

// newGenerator returns a generator whose first sequential id is first and whose info column has infoLen hex
// characters (seedInfoLen for the seed event).
func newGenerator(first int64, seed uint64, infoLen int) *generator {
	return &generator{next: first, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		b: array.NewRecordBuilder(memory.NewGoAllocator(), seedSchema), info: make([]byte, infoLen)}
}

const hexDigits = "0123456789abcdef"

// batch returns the next n events with sequential ids (the caller releases it).
func (g *generator) batch(n int) arrow.RecordBatch {
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = g.next
		g.next++
	}
	return g.batchIDs(ids)
}

// batchIDs returns one event per id, in the order given (the caller releases it).
func (g *generator) batchIDs(idList []int64) arrow.RecordBatch {
	n := len(idList)
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
	infos.ReserveData(n * len(g.info))
	start := seedStart.UnixMicro()
	for _, id := range idList {
		ids.UnsafeAppend(id)
		users.UnsafeAppend(g.rng.Int64N(100000))
		types.Append(eventTypes[g.rng.IntN(len(eventTypes))])
		values.UnsafeAppend(g.rng.Float64()*1000 + float64(g.version)*1000)
		for j := 0; j < len(g.info); j += 16 {
			r := g.rng.Uint64()
			for k := j; k < j+16 && k < len(g.info); k++ {
				g.info[k] = hexDigits[r&15]
				r >>= 4
			}
		}
		infos.BinaryBuilder.Append(g.info)
		ts.UnsafeAppend(arrow.Timestamp(start + id*1000))
	}
	return g.b.NewRecordBatch()
}

// seedBatches pre-generates rows events in batches of batchRows (the last one may be shorter), so that the
// generator is not what a point measures.
func seedBatches(rows, batchRows int) []arrow.RecordBatch {
	g := newGenerator(0, 42, seedInfoLen)
	var out []arrow.RecordBatch
	for n := 0; n < rows; n += batchRows {
		out = append(out, g.batch(min(batchRows, rows-n)))
	}
	return out
}

func releaseAll(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}
