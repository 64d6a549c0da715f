package iceberg_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/seed"
)

// changeStream is an interleaved change stream of seed events: benchRows changes over keys keys, calls of
// perCall changes. A change picks a key uniformly; a key the stream has not inserted (or has deleted) is
// inserted ("c"), a present one updated ("u", 3 in 4) or deleted ("d"). changes are Apply's batches (an op
// column before the seed columns), versioned the same with a version column lsn (the change's ordinal), rows
// the same rows without either.
type changeStream struct {
	changes, versioned, rows []arrow.RecordBatch
}

func newChangeStream(b *testing.B, keys int64, perCall int) *changeStream {
	g := seed.New(0, 21)
	rng := rand.New(rand.NewPCG(21, 12))
	present := make([]bool, keys)
	s := &changeStream{}
	opField := arrow.Field{Name: "op", Type: arrow.BinaryTypes.String}
	schema := arrow.NewSchema(append([]arrow.Field{opField}, seed.Schema.Fields()...), nil)
	lsnField := arrow.Field{Name: "lsn", Type: arrow.PrimitiveTypes.Int64}
	versioned := arrow.NewSchema(append(slices.Clone(schema.Fields()), lsnField), nil)
	lsn := int64(0)
	for n := 0; n < benchRows; n += perCall {
		rec := g.Batch(perCall)
		ids := rec.Column(0).(*array.Int64).Int64Values()
		ob := array.NewStringBuilder(memory.NewGoAllocator())
		for i := range ids {
			k := rng.Int64N(keys)
			ids[i] = k
			switch {
			case !present[k]:
				ob.Append("c")
				present[k] = true
			case rng.IntN(4) < 3:
				ob.Append("u")
			default:
				ob.Append("d")
				present[k] = false
			}
		}
		op := ob.NewArray()
		ob.Release()
		lb := array.NewInt64Builder(memory.NewGoAllocator())
		for range ids {
			lb.Append(lsn)
			lsn++
		}
		lsns := lb.NewArray()
		lb.Release()
		cols := append([]arrow.Array{op}, rec.Columns()...)
		s.changes = append(s.changes, array.NewRecordBatch(schema, cols, rec.NumRows()))
		s.versioned = append(s.versioned, array.NewRecordBatch(versioned, append(cols, lsns), rec.NumRows()))
		op.Release()
		lsns.Release()
		s.rows = append(s.rows, rec)
	}
	b.Cleanup(func() {
		for _, r := range slices.Concat(s.changes, s.versioned, s.rows) {
			r.Release()
		}
	})
	return s
}

// split applies the stream as a source without Apply must: each call's changes cut into runs of consecutive
// upserts (c, u) and deletes, each run one Upsert or Delete call.
func (s *changeStream) split(ctx context.Context, w *iceberg.Writer) error {
	keySchema := arrow.NewSchema([]arrow.Field{seed.Schema.Field(0)}, nil)
	for i, ch := range s.changes {
		ops := ch.Column(0).(*array.String)
		rows := s.rows[i]
		for start := 0; start < int(rows.NumRows()); {
			del := ops.Value(start) == "d"
			end := start + 1
			for end < int(rows.NumRows()) && (ops.Value(end) == "d") == del {
				end++
			}
			part := rows.NewSlice(int64(start), int64(end))
			var err error
			if del {
				keys := array.NewRecordBatch(keySchema, part.Columns()[:1], part.NumRows())
				err = w.Delete(ctx, keys)
				keys.Release()
			} else {
				err = w.Upsert(ctx, part)
			}
			part.Release()
			if err != nil {
				return err
			}
			start = end
		}
	}
	return nil
}

// BenchmarkApply applies an interleaved change stream (200,000 changes over 50,000 keys, 1,000 changes per
// Apply call: inserts of absent keys, updates and deletes of present ones, 3 to 1) into a keyed table with
// default options (merge-on-read, format v2), Close included, and reports, measured alternately in the same
// iterations: x-append, its rate over Write of the same rows (goal: at least 0.5); x-split, its rate over the
// same stream cut into runs of Upsert and Delete calls (goal: at least 10); x-append-versions, the rate of
// Apply with a version column (lsn, kept in memory: not a table column) over the append rate; and the peak Go
// heap growth of Apply, of Apply with versions and of the split calls (peak-heap-MiB, versions-peak-heap-MiB,
// split-peak-heap-MiB) next to the writer's memory limit (limit-MiB, of which versions take a quarter). The
// process's CPU time per million changes of Apply and of the split calls (cpu-s/M-changes,
// split-cpu-s/M-changes) and their ratio (x-split-cpu) read the same on a loaded machine, where the rates do
// not: the split calls overlap their encoding with the calls on both cores, and lose that under load.
func BenchmarkApply(b *testing.B) {
	s := newChangeStream(b, 50_000, 1000)
	ctx := context.Background()
	var dur, cpu [4]time.Duration
	var peaks [4]uint64
	const appendRun, applyRun, splitRun, versionsRun = 0, 1, 2, 3
	for i := 0; i < b.N; i++ {
		for run := range dur {
			cat := openCatalog(b)
			opts := []iceberg.Option{iceberg.WithCreate(seed.Schema, iceberg.IdentifierFields("id"))}
			if run == versionsRun {
				opts = append(opts, iceberg.WithChangeColumns(iceberg.ChangeColumns{Version: "lsn"}))
			}
			w, err := iceberg.NewWriter(ctx, cat, table.Identifier{"bench", fmt.Sprintf("apply%d", run)}, opts...)
			if err != nil {
				b.Fatal(err)
			}
			peak := heapPeak()
			start, startCPU := time.Now(), cpuTime()
			switch run {
			case appendRun:
				for _, r := range s.rows {
					if err = w.Write(ctx, r); err != nil {
						break
					}
				}
			case applyRun:
				for _, r := range s.changes {
					if err = w.Apply(ctx, r); err != nil {
						break
					}
				}
			case splitRun:
				err = s.split(ctx, w)
			case versionsRun:
				for _, r := range s.versioned {
					if err = w.Apply(ctx, r); err != nil {
						break
					}
				}
			}
			if err == nil {
				err = w.Close(ctx)
			}
			if err != nil {
				b.Fatal(err)
			}
			dur[run] += time.Since(start)
			cpu[run] += cpuTime() - startCPU
			peaks[run] = max(peaks[run], peak())
		}
	}
	b.ReportMetric(float64(benchRows)*float64(b.N)/dur[applyRun].Seconds(), "changes/s")
	b.ReportMetric(float64(benchRows)*float64(b.N)/dur[splitRun].Seconds(), "split-changes/s")
	b.ReportMetric(dur[appendRun].Seconds()/dur[applyRun].Seconds(), "x-append")
	b.ReportMetric(dur[splitRun].Seconds()/dur[applyRun].Seconds(), "x-split")
	perM := func(d time.Duration) float64 { return d.Seconds() / (float64(benchRows) * float64(b.N) / 1e6) }
	b.ReportMetric(perM(cpu[applyRun]), "cpu-s/M-changes")
	b.ReportMetric(perM(cpu[splitRun]), "split-cpu-s/M-changes")
	b.ReportMetric(cpu[splitRun].Seconds()/cpu[applyRun].Seconds(), "x-split-cpu")
	b.ReportMetric(float64(peaks[applyRun])/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(peaks[splitRun])/(1<<20), "split-peak-heap-MiB")
	b.ReportMetric(dur[appendRun].Seconds()/dur[versionsRun].Seconds(), "x-append-versions")
	b.ReportMetric(float64(peaks[versionsRun])/(1<<20), "versions-peak-heap-MiB")
	b.ReportMetric(float64(iceberg.DefaultMemoryLimit)/(1<<20), "limit-MiB")
}
