package iceberg_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
)

// BenchmarkCopyOnWriteFiles reproduces the seed's copy-on-write table: K keys over M files of 1,000 rows,
// clustered in one file or scattered, with sorted and shuffled ids. It reports the files rewritten, the files
// that hold a key (the exact answer), the fraction of the table rewritten and the per-row amplification (rows
// rewritten per row changed). Goal: rewritten == holding in every case.
func BenchmarkCopyOnWriteFiles(b *testing.B) {
	for _, shuffled := range []bool{false, true} {
		for _, m := range []int{10, 50, 200} {
			for _, k := range []int{1, 10, 100} {
				for _, layout := range []string{"clustered", "scattered"} {
					name := fmt.Sprintf("shuffled=%v/M=%d/K=%d/%s", shuffled, m, k, layout)
					b.Run(name, func(b *testing.B) {
						ctx := context.Background()
						for i := 0; i < b.N; i++ {
							b.StopTimer()
							w, holder, _, _ := cowTable(b, ctx, m, 1000, shuffled)
							keys := pickKeys(holder, m, k, layout)
							files := map[int]bool{}
							for _, key := range keys {
								files[holder[key]] = true
							}
							vs := make([]int64, len(keys))
							b.StartTimer()
							if err := w.Upsert(ctx, kvBatch(keys, vs)); err != nil {
								b.Fatal(err)
							}
							if err := w.Flush(ctx); err != nil {
								b.Fatal(err)
							}
							b.StopTimer()
							snap := w.Table().CurrentSnapshot()
							rewritten, _ := strconv.Atoi(snap.Summary.Properties["icewriter.cow-rewritten-files"])
							if rewritten != len(files) {
								b.Fatalf("rewrote %d files, %d hold a key", rewritten, len(files))
							}
							b.ReportMetric(float64(rewritten), "files-rewritten")
							b.ReportMetric(float64(len(files)), "files-holding")
							b.ReportMetric(100*float64(rewritten)/float64(m), "%-rewritten")
							b.ReportMetric(float64(rewritten*1000)/float64(len(keys)), "amplification")
							_ = w.Close(ctx)
							b.StartTimer()
						}
					})
				}
			}
		}
	}
}

// pickKeys chooses k distinct keys: all in file 0 (clustered) or spread over as many files as possible.
func pickKeys(holder map[int64]int, m, k int, layout string) []int64 {
	byFile := make([][]int64, m)
	for id := int64(0); id < int64(len(holder)); id++ {
		byFile[holder[id]] = append(byFile[holder[id]], id)
	}
	var keys []int64
	if layout == "clustered" {
		return append(keys, byFile[0][:k]...)
	}
	for i := 0; len(keys) < k; i++ {
		f := i % m
		keys = append(keys, byFile[f][i/m])
	}
	return keys
}

// payloadSchema is a key and a 256-byte payload, the seed's copy-on-write row.
var payloadSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "payload", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// payloadBatch makes rows with a 256-byte payload of random hex digits (it compresses about 2:1, like the seed
// event's info column).
func payloadBatch(from, n int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.NewGoAllocator(), payloadSchema)
	defer b.Release()
	rng := rand.New(rand.NewPCG(uint64(from), 1))
	const hexDigits = "0123456789abcdef"
	buf := make([]byte, 256)
	for i := from; i < from+n; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.Int64Builder).Append(int64(i))
		for j := range buf {
			buf[j] = hexDigits[rng.IntN(16)]
		}
		b.Field(2).(*array.StringBuilder).BinaryBuilder.Append(buf)
	}
	return b.NewRecordBatch()
}

// BenchmarkCopyOnWriteThroughput rewrites 8 files of about 1, 2 and 4 MB (one key upserted in each) and reports
// MB/s counted as bytes of data files read plus written (goal at 4 MB: at least 200 MB/s), and the peak Go heap
// growth during the commit per row rewritten at a 256-byte payload (seed: ~700 B per row). zstd=1 is the level
// of tables the writer creates; zstd=default is iceberg-go's default level, for tables created elsewhere.
func BenchmarkCopyOnWriteThroughput(b *testing.B) {
	for _, mb := range []int{1, 2, 4} {
		for _, level := range []string{"1", "default"} {
			b.Run(fmt.Sprintf("file=%dMB/zstd=%s", mb, level), func(b *testing.B) {
				cowThroughput(b, mb, level)
			})
		}
	}
}

func cowThroughput(b *testing.B, mb int, level string) {
	props := map[string]string{}
	if level == "default" {
		props["write.parquet.compression-level"] = "-1"
	}
	ctx := context.Background()
	const files = 8
	rowsPerFile := mb * 1_000_000 / 140 // about 140 compressed bytes a row (zstd, random hex payload)
	var moved, dur float64
	var heapPerRow float64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		cat := openCatalog(b)
		w, err := iceberg.NewWriter(ctx, cat, table.Identifier{"cow", "tp"},
			iceberg.WithCreate(payloadSchema, iceberg.IdentifierFields("id"), iceberg.TableProperties(props)), iceberg.WithMode(iceberg.CopyOnWrite),
			iceberg.WithFlushRows(rowsPerFile), iceberg.WithFlushInterval(0), iceberg.WithMaxInFlight(2))
		if err != nil {
			b.Fatal(err)
		}
		for f := 0; f < files; f++ {
			if err := w.Write(ctx, payloadBatch(f*rowsPerFile, rowsPerFile)); err != nil {
				b.Fatal(err)
			}
			if err := w.Flush(ctx); err != nil {
				b.Fatal(err)
			}
		}
		keys := make([]int64, files)
		for f := range keys {
			keys[f] = int64(f*rowsPerFile + rowsPerFile/2)
		}
		upd := kvLike(keys)
		peak := heapPeak()
		b.StartTimer()
		start := time.Now()
		if err := w.Upsert(ctx, upd); err != nil {
			b.Fatal(err)
		}
		if err := w.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		elapsed := time.Since(start)
		b.StopTimer()
		grown := peak()
		snap := w.Table().CurrentSnapshot()
		removed, _ := strconv.ParseFloat(snap.Summary.Properties["removed-files-size"], 64)
		added, _ := strconv.ParseFloat(snap.Summary.Properties["added-files-size"], 64)
		moved += removed + added
		dur += elapsed.Seconds()
		heapPerRow += float64(grown) / float64(files*rowsPerFile)
		_ = w.Close(ctx)
		b.StartTimer()
	}
	b.ReportMetric(moved/dur/1e6, "MB/s")
	b.ReportMetric(heapPerRow/float64(b.N), "peak-heap-B/row")
}

func kvLike(keys []int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.NewGoAllocator(), payloadSchema)
	defer b.Release()
	for _, k := range keys {
		b.Field(0).(*array.Int64Builder).Append(k)
		b.Field(1).(*array.Int64Builder).Append(-k)
		b.Field(2).(*array.StringBuilder).Append("updated")
	}
	return b.NewRecordBatch()
}
