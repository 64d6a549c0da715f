package iceberg_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/benchpair"
	"github.com/icewriter/iceberg/internal/seed"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// updateBatches returns seed-event batches in which a fraction of each batch's ids repeat earlier ids (updates).
func updateBatches(b *testing.B, rows, perBatch int, updateFrac float64) []arrow.RecordBatch {
	g := seed.New(0, 11)
	rng := rand.New(rand.NewPCG(5, 6))
	var out []arrow.RecordBatch
	next := int64(0)
	for n := 0; n < rows; n += perBatch {
		rec := g.Batch(perBatch)
		ids := rec.Column(0).(*array.Int64).Int64Values()
		for i := range ids {
			if next > 0 && rng.Float64() < updateFrac {
				ids[i] = rng.Int64N(next)
			} else {
				ids[i] = next
				next++
			}
		}
		out = append(out, rec)
	}
	b.Cleanup(func() {
		for _, r := range out {
			r.Release()
		}
	})
	return out
}

// BenchmarkUpsert10pct upserts seed events of which 10% update existing keys (1,000-row calls) into a
// format-version 2 table and reports x-append: its rate over Write of the same batches into the same kind of
// table (goal: at least 0.5). The upserts write position delete files from the key index; the same upserts with
// the index off (WithKeyIndexBytes(0)) write equality deletes, as every v2 upsert did before, and x-equality is
// their time over the position deletes' (goal: at least 1). The three run as a set in each iteration, in an order
// that rotates, and each ratio is the median of the sets' paired ratios, by wall time and (-cpu) by the process's
// CPU time.
//
// Sub-benchmarks: batch=all seals the 200,000 rows into one batch (the default flush policy): its updates
// resolve inside the batch and neither upsert writes a delete file, so it measures the key index's upkeep alone;
// batch=20000 commits every 20,000 rows (WithFlushRows), so each commit after the first updates rows of earlier
// commits: a position delete file per data file it touches, against one equality delete file. delete-files is
// the live delete files of the position-delete table after Close (0 for batch=all).
func BenchmarkUpsert10pct(b *testing.B) {
	batches := updateBatches(b, benchRows, 1000, 0.10)
	for _, flush := range []int{0, 20_000} {
		name := "batch=all"
		if flush > 0 {
			name = fmt.Sprintf("batch=%d", flush)
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			ops := []string{"append", "upsert", "upsert-equality"}
			wall, cpu := map[string][]float64{}, map[string][]float64{}
			var deleteFiles int64
			for i := 0; i < b.N; i++ {
				for j := range ops {
					op := ops[(i+j)%len(ops)]
					b.StopTimer()
					cat := openCatalog(b)
					opts := []iceberg.Option{iceberg.WithCreate(seed.Schema, iceberg.IdentifierFields("id"))}
					if flush > 0 {
						opts = append(opts, iceberg.WithFlushRows(flush))
					}
					if op == "upsert-equality" {
						opts = append(opts, iceberg.WithKeyIndexBytes(0))
					}
					w, err := iceberg.NewWriter(ctx, cat, table.Identifier{"bench", "t"}, opts...)
					if err != nil {
						b.Fatal(err)
					}
					runtime.GC() // each run starts on a collected heap, not on the garbage of the one before
					b.StartTimer()
					start, cpu0 := time.Now(), benchpair.CPUTime()
					for _, r := range batches {
						if op == "append" {
							err = w.Write(ctx, r)
						} else {
							err = w.Upsert(ctx, r)
						}
						if err != nil {
							b.Fatal(err)
						}
					}
					if err := w.Close(ctx); err != nil {
						b.Fatal(err)
					}
					wall[op] = append(wall[op], time.Since(start).Seconds())
					cpu[op] = append(cpu[op], (benchpair.CPUTime() - cpu0).Seconds())
					if op == "upsert" {
						b.StopTimer()
						deleteFiles += int64(readShape(b, cat, table.Identifier{"bench", "t"}).deleteFiles)
						b.StartTimer()
					}
				}
			}
			b.ReportMetric(float64(benchRows)/benchpair.Median(wall["upsert"]), "rows/s")
			b.ReportMetric(float64(benchRows)/benchpair.Median(wall["upsert-equality"]), "equality-rows/s")
			b.ReportMetric(benchpair.Ratio(wall["append"], wall["upsert"]), "x-append")
			b.ReportMetric(benchpair.Ratio(wall["upsert-equality"], wall["upsert"]), "x-equality")
			b.ReportMetric(benchpair.Ratio(cpu["upsert-equality"], cpu["upsert"]), "x-equality-cpu")
			b.ReportMetric(float64(deleteFiles)/float64(b.N), "delete-files")
		})
	}
}

// BenchmarkUpsertV3RowIDs upserts seed events of which 10% update keys written earlier (1,000-row calls,
// batches of 20,000 rows) into a format-version 3 merge-on-read table, where each updated row keeps the replaced
// row's _row_id: written with the batch by the encoder, against the same upserts with the ids carried by the
// commit-time rewrite alone (WithRowIDsAtCommitForTest: read the uploaded file, write it again, delete the first),
// alternately in the same iterations. x-at-commit is the rewrite's time over the encoder's. flushed: each batch
// committed before the next is written (Flush), as BenchmarkRemoteCost does: the encoder knows every id (goal:
// x-at-commit above 1). streamed: no Flush, so batches are encoded while earlier ones commit; updates of rows
// of a batch still in flight are known only at its commit, and those batches are rewritten at commit either way
// (goal: x-at-commit about 1, no slower).
func BenchmarkUpsertV3RowIDs(b *testing.B) {
	batches := updateBatches(b, benchRows, 1000, 0.10)
	for _, flushed := range []bool{true, false} {
		name := "streamed"
		if flushed {
			name = "flushed"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			dur := map[string]time.Duration{}
			for i := 0; i < b.N; i++ {
				for _, op := range []string{"at-encode", "at-commit"} {
					b.StopTimer()
					cat := openCatalog(b)
					opts := []iceberg.Option{iceberg.WithCreate(seed.Schema, iceberg.IdentifierFields("id"),
						iceberg.FormatVersion(3)), iceberg.WithFlushRows(20_000), iceberg.WithFlushInterval(0)}
					if op == "at-commit" {
						opts = append(opts, iceberg.WithRowIDsAtCommitForTest())
					}
					w, err := iceberg.NewWriter(ctx, cat, table.Identifier{"bench", "t"}, opts...)
					if err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					start := time.Now()
					for n, r := range batches {
						if err := w.Upsert(ctx, r); err != nil {
							b.Fatal(err)
						}
						if flushed && (n+1)%20 == 0 {
							if err := w.Flush(ctx); err != nil {
								b.Fatal(err)
							}
						}
					}
					if err := w.Close(ctx); err != nil {
						b.Fatal(err)
					}
					dur[op] += time.Since(start)
				}
			}
			b.ReportMetric(float64(benchRows)*float64(b.N)/dur["at-encode"].Seconds(), "rows/s")
			b.ReportMetric(dur["at-commit"].Seconds()/dur["at-encode"].Seconds(), "x-at-commit")
		})
	}
}

// BenchmarkMergeOnReadDeleteBytes deletes K keys in one commit and reports the bytes of the delete files it
// added, per key (the seed's merge-on-read figure: one 2–4 KB equality-delete file whatever K).
func BenchmarkMergeOnReadDeleteBytes(b *testing.B) {
	for _, k := range []int{1, 10, 100, 1000} {
		b.Run(fmt.Sprintf("keys=%d", k), func(b *testing.B) {
			ctx := context.Background()
			var bytes float64
			for i := 0; i < b.N; i++ {
				cat := openCatalog(b)
				ident := table.Identifier{"bench", "del"}
				w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema, iceberg.IdentifierFields("id")))
				if err != nil {
					b.Fatal(err)
				}
				rec := seed.New(0, 1).Batch(10_000)
				if err := w.Write(ctx, rec); err != nil {
					b.Fatal(err)
				}
				rec.Release()
				if err := w.Flush(ctx); err != nil {
					b.Fatal(err)
				}
				ids := make([]int64, k)
				for j := range ids {
					ids[j] = int64(j * (10_000 / k))
				}
				kb := array.NewInt64Builder(memory.NewGoAllocator())
				kb.AppendValues(ids, nil)
				col := kb.NewArray()
				keys := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil),
					[]arrow.Array{col}, int64(k))
				if err := w.Delete(ctx, keys); err != nil {
					b.Fatal(err)
				}
				if err := w.Close(ctx); err != nil {
					b.Fatal(err)
				}
				snap := w.Table().CurrentSnapshot()
				n, _ := strconv.ParseInt(snap.Summary.Properties["added-files-size"], 10, 64)
				bytes += float64(n)
			}
			b.ReportMetric(bytes/float64(b.N), "delete-bytes/commit")
			b.ReportMetric(bytes/float64(b.N)/float64(k), "delete-bytes/key")
		})
	}
}

// readAfterUpserts* shape BenchmarkReadAfterUpserts: 100 upsert commits of 3,000 rows (10% of them updates), so
// that a read takes long enough (150–250 ms on a quiet machine) for fixed costs and scheduling noise not to
// decide the ratio while the six tables build in about a minute per format version (1,000,000 rows took four);
// each table is read readAfterUpsertsRounds times, the tables in a rotating order.
const (
	readAfterUpsertsCommits = 100
	readAfterUpsertsRows    = 300_000
	readAfterUpsertsRounds  = 5
)

// BenchmarkReadAfterUpserts reads back a table built by 100 upsert commits (10% updates) and the same final rows
// appended once, and reports x-appended: the read time ratio (goal on v2 and v3: at most 1.15, without Compact:
// position delete files, resp. deletion vectors, one live per data file), with how many of the upserting
// writer's background compaction passes committed and were given up, and the same for the upserted table after
// Writer.Compact, and for one upserted without equality delete conversion (unconverted-x-appended: with the key
// index covering every commit there is nothing to convert, so it should match x-appended).
//
// Every table is read readAfterUpsertsRounds times per iteration, all of them once per round in an order that
// rotates from round to round, and each ratio is the median over rounds (and iterations) of the two tables'
// times in the same round (benchpair.Ratio), so the load of a shared machine falls on both sides. x-appended-cpu
// is the same ratio of the process's CPU time during each read: what the reader pays, whatever else runs (the
// wall ratios still move by ±0.3 at a load average of 10 and more; the CPU ratios by about ±0.1), and so are
// compacted-x-appended-cpu and x-appended-in-100-files-cpu. The upserting writer is closed once its three
// small-file passes ended, as they would in a stream that goes on. For the upserted, appended and compacted
// tables it also reports the median read CPU and its parts: loading the table and (measured apart) planning.
func BenchmarkReadAfterUpserts(b *testing.B) {
	for _, version := range []int{2, 3} {
		b.Run(fmt.Sprintf("v%d", version), func(b *testing.B) {
			ctx := context.Background()
			batches := updateBatches(b, readAfterUpsertsRows, readAfterUpsertsRows/readAfterUpsertsCommits, 0.10)
			cat := openCatalog(b)
			create := iceberg.WithCreate(seed.Schema, iceberg.IdentifierFields("id"), iceberg.FormatVersion(version))
			// The last small-file pass (due at commit 96, every 32) runs off the commit path: Close right after the
			// last commit would cancel it under load and leave 30-odd more files than a live stream has.
			passes := &compactionPasses{ended: make(chan struct{}, readAfterUpsertsCommits)}
			var written int64 // the data bytes the upserting writer's commits wrote
			upsertTable(b, cat, "upserted", batches, func(w *iceberg.Writer) {
				passes.wait(b, readAfterUpsertsCommits/iceberg.DefaultSmallFileCompactionEvery)
				written = w.Stats().BytesWritten
			}, create, iceberg.WithHooks(passes))
			final, err := readAll(ctx, cat, table.Identifier{"bench", "upserted"})
			if err != nil {
				b.Fatal(err)
			}
			ap, err := iceberg.NewWriter(ctx, cat, table.Identifier{"bench", "appended"}, create)
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range final {
				if err := ap.Write(ctx, r); err != nil {
					b.Fatal(err)
				}
			}
			if err := ap.Close(ctx); err != nil {
				b.Fatal(err)
			}
			// The same upserted table after Compact, in a copy: read back like an appended one.
			upsertTable(b, cat, "compacted", batches, func(w *iceberg.Writer) {
				if _, err := w.Compact(ctx); err != nil {
					b.Fatal(err)
				}
			}, create)
			// The same final rows appended in 100 commits (100 files), to separate the cost of deletes from the cost
			// of files.
			a100, err := iceberg.NewWriter(ctx, cat, table.Identifier{"bench", "appended100"}, create)
			if err != nil {
				b.Fatal(err)
			}
			per := (countRows(final) + readAfterUpsertsCommits - 1) / readAfterUpsertsCommits
			for _, r := range final {
				for off := int64(0); off < r.NumRows(); off += int64(per) {
					part := r.NewSlice(off, min(off+int64(per), r.NumRows()))
					if err := a100.Write(ctx, part); err != nil {
						b.Fatal(err)
					}
					part.Release()
					if err := a100.Flush(ctx); err != nil {
						b.Fatal(err)
					}
				}
			}
			if err := a100.Close(ctx); err != nil {
				b.Fatal(err)
			}
			// And a writer with WithAutoCompactEvery(20): compaction every 20 delta commits, inside its commit loop.
			acStart := time.Now()
			upsertTable(b, cat, "autocompact", batches, nil, create, iceberg.WithAutoCompactEvery(20))
			acDur := time.Since(acStart)
			// And the upserted table as it was before the maintainer converted equality deletes
			// (WithDeleteConversionEvery(0)): the baseline of the conversion's effect on reads.
			upsertTable(b, cat, "unconverted", batches, nil, create, iceberg.WithDeleteConversionEvery(0))

			names := []string{"upserted", "appended", "compacted", "autocompact", "appended100", "unconverted"}
			wall, cpu := map[string][]float64{}, map[string][]float64{}
			loadCPU, planCPU := map[string][]float64{}, map[string][]float64{} // the decomposition, below
			want := countRows(final)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for round := 0; round < readAfterUpsertsRounds; round++ {
					for j := range names {
						name := names[(j+round)%len(names)]
						runtime.GC() // each read starts on a collected heap, not on the garbage of the one before
						stop := startReadProfile(b, fmt.Sprintf("v%d-%s-%d-%d", version, name, i, round))
						start, cpu0 := time.Now(), benchpair.CPUTime()
						rows, loaded, err := readCount(ctx, cat, table.Identifier{"bench", name})
						wall[name] = append(wall[name], time.Since(start).Seconds())
						cpu[name] = append(cpu[name], (benchpair.CPUTime() - cpu0).Seconds())
						stop()
						if err != nil {
							b.Fatal(err)
						}
						if rows != want {
							b.Fatalf("%s: %d rows, want %d", name, rows, want)
						}
						loadCPU[name] = append(loadCPU[name], (loaded - cpu0).Seconds())
						// Planning alone, outside the timed read (PlanFiles keeps every column's statistics,
						// which the read's own planning projects away: an upper bound of what it costs there).
						plan, err := planCPUTime(ctx, cat, table.Identifier{"bench", name})
						if err != nil {
							b.Fatal(err)
						}
						planCPU[name] = append(planCPU[name], plan.Seconds())
					}
				}
			}
			b.StopTimer()
			// What a reader of the upserted table opens, against the appended one (after the loop: ResetTimer
			// deletes metrics reported before it).
			shape := readShape(b, cat, table.Identifier{"bench", "upserted"})
			b.ReportMetric(float64(shape.dataFiles), "data-files")
			b.ReportMetric(float64(shape.deleteFiles), "delete-files")
			b.ReportMetric(float64(shape.manifests), "manifests")
			b.ReportMetric(float64(readShape(b, cat, table.Identifier{"bench", "appended"}).dataFiles), "appended-data-files")
			up := wall["upserted"]
			b.ReportMetric(benchpair.Ratio(up, wall["appended"]), "x-appended")
			b.ReportMetric(benchpair.Ratio(cpu["upserted"], cpu["appended"]), "x-appended-cpu")
			b.ReportMetric(float64(passes.committed.Load()), "passes-committed")
			b.ReportMetric(float64(passes.givenUp.Load()), "passes-given-up")
			// Write amplification of the passes: the bytes their rewrites wrote per data byte the commits wrote.
			b.ReportMetric(float64(passes.bytes.Load())/float64(max(written, 1)), "passes-bytes/written")
			b.ReportMetric(benchpair.Ratio(wall["compacted"], wall["appended"]), "compacted-x-appended")
			b.ReportMetric(benchpair.Ratio(cpu["compacted"], cpu["appended"]), "compacted-x-appended-cpu")
			b.ReportMetric(benchpair.Ratio(wall["autocompact"], wall["appended"]), "autocompact-x-appended")
			b.ReportMetric(float64(acDur.Milliseconds()), "autocompact-write-ms")
			b.ReportMetric(benchpair.Ratio(up, wall["appended100"]), "x-appended-in-100-files")
			b.ReportMetric(benchpair.Ratio(cpu["upserted"], cpu["appended100"]), "x-appended-in-100-files-cpu")
			b.ReportMetric(benchpair.Ratio(wall["unconverted"], wall["appended"]), "unconverted-x-appended")
			b.ReportMetric(benchpair.Median(up)*1000, "upserted-ms")
			b.ReportMetric(benchpair.Median(wall["appended"])*1000, "appended-ms")
			// Where a read's CPU goes (medians, ms): loading the table (the metadata JSON), planning (the
			// manifests; measured apart), and the rest of the read: opening the files, decoding, applying
			// deletes. A CPU profile (ICEWRITER_READ_CPUPROFILE) splits the rest further.
			for _, name := range []string{"upserted", "appended", "compacted"} {
				load, plan := benchpair.Median(loadCPU[name]), benchpair.Median(planCPU[name])
				b.ReportMetric(benchpair.Median(cpu[name])*1000, name+"-cpu-ms")
				b.ReportMetric(load*1000, name+"-load-cpu-ms")
				b.ReportMetric(plan*1000, name+"-plan-cpu-ms")
			}
		})
	}
}

// upsertTable creates table bench.name through a writer with opts, upserts batches into it, one commit per
// batch, calls beforeClose (when not nil) and closes the writer.
func upsertTable(b *testing.B, cat icecatalog.Catalog, name string, batches []arrow.RecordBatch, beforeClose func(*iceberg.Writer), opts ...iceberg.Option) {
	b.Helper()
	ctx := context.Background()
	w, err := iceberg.NewWriter(ctx, cat, table.Identifier{"bench", name}, opts...)
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range batches {
		if err := w.Upsert(ctx, r); err != nil {
			b.Fatal(err)
		}
		if err := w.Flush(ctx); err != nil { // one commit per call
			b.Fatal(err)
		}
	}
	if beforeClose != nil {
		beforeClose(w)
	}
	if err := w.Close(ctx); err != nil {
		b.Fatal(err)
	}
}

// compactionPasses counts a writer's background compaction passes that committed and those given up (no
// error, no snapshot, an attempt made: the table changed under the pass's files).
type compactionPasses struct {
	committed, givenUp atomic.Int64
	bytes              atomic.Int64  // the data bytes written by the passes that committed
	ended              chan struct{} // when not nil: a value per automatic pass ended (wait)
}

// wait returns once n automatic passes ended, or after two minutes (a benchmark's figures then show fewer
// passes; a test fails on what it checks next).
func (p *compactionPasses) wait(b testing.TB, n int) {
	timeout := time.After(2 * time.Minute)
	for range n {
		select {
		case <-p.ended:
		case <-timeout:
			b.Logf("only some of %d compaction passes ended", n)
			return
		}
	}
}

func (p *compactionPasses) OnCompaction(ev iceberg.Compaction) {
	if ev.Automatic && p.ended != nil {
		defer func() { p.ended <- struct{}{} }()
	}
	switch {
	case !ev.Automatic || ev.Err != nil:
	case ev.Result.SnapshotID != 0:
		p.committed.Add(1)
		p.bytes.Add(ev.Result.BytesAfter)
	case ev.Result.Attempts > 0:
		p.givenUp.Add(1)
	}
}

// tableShape is what a scan of a table's current snapshot opens.
type tableShape struct{ dataFiles, deleteFiles, manifests int }

// readShape counts the live data files, the delete files planned on them (equality, position, deletion vectors;
// each once) and the manifests of the table's current snapshot.
func readShape(b *testing.B, cat icecatalog.Catalog, ident table.Identifier) tableShape {
	b.Helper()
	ctx := context.Background()
	tbl := tabletest.Load(b, cat, ident)
	tasks := tabletest.LiveDataFiles(b, tbl)
	deletes := map[string]bool{}
	for _, t := range tasks {
		for _, files := range [][]ice.DataFile{t.DeleteFiles, t.EqualityDeleteFiles, t.DeletionVectorFiles} {
			for _, f := range files {
				deletes[f.FilePath()] = true
			}
		}
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		b.Fatal(err)
	}
	mans, err := tbl.CurrentSnapshot().Manifests(fs)
	if err != nil {
		b.Fatal(err)
	}
	return tableShape{dataFiles: len(tasks), deleteFiles: len(deletes), manifests: len(mans)}
}

// startReadProfile writes a CPU profile of one read into $ICEWRITER_READ_CPUPROFILE/name.pprof when that is set
// (go tool pprof merges several); it returns the func that stops it.
func startReadProfile(b *testing.B, name string) (stop func()) {
	dir := os.Getenv("ICEWRITER_READ_CPUPROFILE")
	if dir == "" {
		return func() {}
	}
	stop, err := benchpair.StartCPUProfile(filepath.Join(dir, name+".pprof"))
	if err != nil {
		b.Fatal(err)
	}
	return stop
}

func readAll(ctx context.Context, cat icecatalog.Catalog, ident table.Identifier) ([]arrow.RecordBatch, error) {
	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		return nil, err
	}
	_, it, err := tbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		return nil, err
	}
	var out []arrow.RecordBatch
	for r, err := range it {
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// readCount reads the table with iceberg-go's scanner and returns its rows, releasing each batch as it comes,
// and the process's CPU time once the table was loaded.
func readCount(ctx context.Context, cat icecatalog.Catalog, ident table.Identifier) (int, time.Duration, error) {
	tbl, err := cat.LoadTable(ctx, ident)
	loaded := benchpair.CPUTime()
	if err != nil {
		return 0, loaded, err
	}
	_, it, err := tbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		return 0, loaded, err
	}
	n := 0
	for r, err := range it {
		if err != nil {
			return 0, loaded, err
		}
		n += int(r.NumRows())
		r.Release()
	}
	return n, loaded, nil
}

// planCPUTime loads the table and returns the process's CPU time spent planning a scan of it.
func planCPUTime(ctx context.Context, cat icecatalog.Catalog, ident table.Identifier) (time.Duration, error) {
	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		return 0, err
	}
	start := benchpair.CPUTime()
	_, err = tbl.Scan().PlanFiles(ctx)
	return benchpair.CPUTime() - start, err
}

func countRows(recs []arrow.RecordBatch) int {
	n := 0
	for _, r := range recs {
		n += int(r.NumRows())
	}
	return n
}
