package main

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	iceberg "github.com/icewriter/iceberg"
)

// result is one measured throughput point, verified by reading the table back.
type result struct {
	rows    int64
	elapsed time.Duration
	commits int64
	files   int64
	bytes   int64 // Parquet bytes written (ours: Stats; baseline: the table's total-files-size)
}

func (r result) rate() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.rows) / r.elapsed.Seconds()
}

// ourOptions are the Writer settings of a throughput point: the seed's batching.count becomes WithFlushRows
// (one batch sealed per batch-size rows, each Write call carrying one batch), the seed's max_in_flight becomes
// WithMaxInFlight. The commit loop is free to coalesce batches that are ready into one commit: that is the
// library's design, and what the table measures.
func ourOptions(batch, inFlight int) []iceberg.Option {
	return []iceberg.Option{
		iceberg.WithCreate(seedSchema),
		iceberg.WithFlushRows(batch),
		iceberg.WithMaxInFlight(inFlight),
	}
}

// runOurs writes the batches through a Writer into a new table with GOMAXPROCS procs. The clock starts at the
// first Write (the table exists already) and stops when Close returns (everything committed).
func (e *env) runOurs(ctx context.Context, label string, procs int, batches []arrow.RecordBatch, batch, inFlight int) (result, error) {
	return e.median(label, func(label string) (result, error) {
		return e.runOursOnce(ctx, label, procs, batches, batch, inFlight)
	})
}

// median runs a point -repeat times and keeps the run with the median rate.
func (e *env) median(label string, once func(label string) (result, error)) (result, error) {
	n := max(1, e.cfg.repeat)
	var rs []result
	for i := 0; i < n; i++ {
		l := label
		if n > 1 {
			l = fmt.Sprintf("%s (%d/%d)", label, i+1, n)
		}
		r, err := once(l)
		if err != nil {
			return r, err
		}
		rs = append(rs, r)
	}
	slices.SortFunc(rs, func(a, b result) int { return cmp.Compare(a.rate(), b.rate()) })
	return rs[len(rs)/2], nil
}

func (e *env) runOursOnce(ctx context.Context, label string, procs int, batches []arrow.RecordBatch, batch, inFlight int) (result, error) {
	defer setProcs(procs)()
	ident := e.newIdent("ours")
	defer e.dropTable(ctx, ident)
	w, err := iceberg.NewWriter(ctx, e.cat, ident, ourOptions(batch, inFlight)...)
	if err != nil {
		return result{}, err
	}
	total := totalRows(batches)
	e.prog.begin(label, total)
	runtime.GC()
	start := time.Now()
	var done int64
	for _, rec := range batches {
		if err := w.Write(ctx, rec); err != nil {
			_ = w.Abort(ctx)
			return result{}, err
		}
		done += rec.NumRows()
		e.prog.set(done)
	}
	if err := w.Close(ctx); err != nil {
		return result{}, err
	}
	elapsed := time.Since(start)
	st := w.Stats()
	res := result{rows: st.RowsCommitted, elapsed: elapsed, commits: st.Commits, files: st.FilesWritten, bytes: st.BytesWritten}
	if err := e.verify(ctx, ident, total); err != nil {
		return res, err
	}
	e.prog.end(fmt.Sprintf("%.0f rows/s, %d commits, %d files", res.rate(), res.commits, res.files))
	return res, nil
}

// runBaseline is the naive sink: iceberg-go's Table.Append per batch, one commit per batch, on a table created
// with iceberg-go's defaults (no manifest merging, no metadata cleanup, as a hand-written sink leaves them).
func (e *env) runBaseline(ctx context.Context, label string, procs int, batches []arrow.RecordBatch, batch int) (result, error) {
	key := baseKey{procs, batch}
	if r, ok := e.baselines[key]; ok {
		return r, nil
	}
	r, err := e.median(label, func(label string) (result, error) {
		return e.runBaselineOnce(ctx, label, procs, batches)
	})
	if err == nil {
		e.baselines[key] = r
	}
	return r, err
}

func (e *env) runBaselineOnce(ctx context.Context, label string, procs int, batches []arrow.RecordBatch) (result, error) {
	defer setProcs(procs)()
	ident := e.newIdent("baseline")
	defer e.dropTable(ctx, ident)
	sc, err := table.ArrowSchemaToIcebergWithFreshIDs(seedSchema, false)
	if err != nil {
		return result{}, err
	}
	if _, err := e.cat.CreateTable(ctx, ident, sc, icecatalog.WithProperties(nil)); err != nil {
		return result{}, err
	}
	tbl, err := e.loadTable(ctx, ident)
	if err != nil {
		return result{}, err
	}
	total := totalRows(batches)
	e.prog.begin(label, total)
	runtime.GC()
	start := time.Now()
	var done, commits int64
	for _, rec := range batches {
		// iceberg-go's writer releases the batches it consumes; the extra reference keeps ours alive for the
		// next point.
		rec.Retain()
		rdr, err := array.NewRecordReader(rec.Schema(), []arrow.RecordBatch{rec})
		if err != nil {
			return result{}, err
		}
		tbl, err = tbl.Append(ctx, rdr, nil)
		rdr.Release()
		if err != nil {
			return result{}, fmt.Errorf("baseline append: %w", err)
		}
		commits++
		done += rec.NumRows()
		e.prog.set(done)
	}
	elapsed := time.Since(start)
	res := result{rows: done, elapsed: elapsed, commits: commits}
	if snap := tbl.CurrentSnapshot(); snap != nil && snap.Summary != nil {
		res.files = atoi(snap.Summary.Properties["total-data-files"])
		res.bytes = atoi(snap.Summary.Properties["total-files-size"])
	}
	if err := e.verify(ctx, ident, total); err != nil {
		return res, err
	}
	e.prog.end(fmt.Sprintf("%.0f rows/s, %d commits", res.rate(), res.commits))
	return res, nil
}

// verify reads the table back with iceberg-go's scanner and checks its row count.
func (e *env) verify(ctx context.Context, ident table.Identifier, want int64) error {
	got, err := e.countRows(ctx, ident)
	if err != nil {
		return fmt.Errorf("read back %s: %w", ident, err)
	}
	if got != want {
		return fmt.Errorf("read back %s: %d rows, want %d", ident, got, want)
	}
	return nil
}

func (e *env) countRows(ctx context.Context, ident table.Identifier) (int64, error) {
	tbl, err := e.cat.LoadTable(ctx, ident)
	if err != nil {
		return 0, err
	}
	_, recs, err := tbl.Scan(table.WithSelectedFields("id")).ToArrowRecords(ctx)
	if err != nil {
		return 0, err
	}
	var n int64
	for rec, err := range recs {
		if err != nil {
			return 0, err
		}
		n += rec.NumRows()
		rec.Release()
	}
	return n, nil
}

// setProcs sets GOMAXPROCS (0: leave it) and returns the restore function.
func setProcs(n int) func() {
	if n <= 0 {
		return func() {}
	}
	old := runtime.GOMAXPROCS(n)
	return func() { runtime.GOMAXPROCS(old) }
}

func totalRows(recs []arrow.RecordBatch) int64 {
	var n int64
	for _, r := range recs {
		n += r.NumRows()
	}
	return n
}

func atoi(s string) int64 {
	var n int64
	fmt.Sscanf(s, "%d", &n)
	return n
}
