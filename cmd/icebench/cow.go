package main

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"runtime/metrics"
	"sync"
	"time"

	"github.com/apache/iceberg-go/table"

	iceberg "github.com/icewriter/iceberg"
)

type cowPoint struct {
	k, m      int
	clustered bool
	seedFrac  float64 // percent, NaN when the seed has no figure
	seedAmp   float64 // per-row amplification, NaN when none
}

func (e *env) cowGrid() []cowPoint {
	nan := math.NaN()
	if e.cfg.quick {
		return []cowPoint{{1, 10, false, 7.2, 718}, {10, 10, false, 100, nan}, {10, 10, true, nan, nan}}
	}
	return []cowPoint{
		{1, 10, false, 7.2, 718}, {10, 10, false, 100, nan}, {10, 200, false, 4.6, nan}, {100, 200, false, 49.9, nan},
		{100, 10, true, nan, 7.3},
	}
}

// cowResult is one copy-on-write upsert of K keys.
type cowResult struct {
	frac     float64 // percent of the table's bytes rewritten
	amp      float64 // rows written per key changed
	removed  int64   // data files removed
	elapsed  time.Duration
	rowsBack int64
}

func cowResultOf(c change, k int, d time.Duration) cowResult {
	r := cowResult{removed: c.removedFiles, elapsed: d, frac: math.NaN(), amp: float64(c.addedRows) / float64(k)}
	if c.totalBefore > 0 {
		r.frac = 100 * float64(c.removedBytes) / float64(c.totalBefore)
	}
	return r
}

func (e *env) cowOurs(ctx context.Context, pt cowPoint, ids []int64, keys []int64) (cowResult, error) {
	ident := e.newIdent("cow_ours")
	defer e.dropTable(ctx, ident)
	w, err := e.keyedTable(ctx, ident, ids, seedInfoLen, nil)
	if err != nil {
		return cowResult{}, err
	}
	if err := w.Close(ctx); err != nil {
		return cowResult{}, err
	}
	w, err = iceberg.NewWriter(ctx, e.cat, ident, iceberg.WithMode(iceberg.CopyOnWrite),
		iceberg.WithFlushRows(max(pt.k, fileRows)), iceberg.WithFlushInterval(0))
	if err != nil {
		return cowResult{}, err
	}
	defer w.Close(ctx)
	base := headID(w.Table())
	g := newGenerator(0, 9, seedInfoLen)
	g.version = 1
	rec := g.batchIDs(keys)
	defer rec.Release()
	start := time.Now()
	if err := w.Upsert(ctx, rec); err != nil {
		return cowResult{}, err
	}
	if err := w.Flush(ctx); err != nil {
		return cowResult{}, err
	}
	d := time.Since(start)
	tbl, err := e.cat.LoadTable(ctx, ident)
	if err != nil {
		return cowResult{}, err
	}
	c, err := measureChange(ctx, tbl, base)
	if err != nil {
		return cowResult{}, err
	}
	r := cowResultOf(c, pt.k, d)
	r.rowsBack, err = e.countRows(ctx, ident)
	return r, err
}

func (e *env) cowBaseline(ctx context.Context, pt cowPoint, ids []int64, keys []int64) (cowResult, error) {
	ident := e.newIdent("cow_base")
	defer e.dropTable(ctx, ident)
	w, err := e.keyedTable(ctx, ident, ids, seedInfoLen, map[string]string{table.WriteDeleteModeKey: table.WriteModeCopyOnWrite})
	if err != nil {
		return cowResult{}, err
	}
	if err := w.Close(ctx); err != nil {
		return cowResult{}, err
	}
	tbl, err := e.loadTable(ctx, ident)
	if err != nil {
		return cowResult{}, err
	}
	base := headID(tbl)
	g := newGenerator(0, 9, seedInfoLen)
	g.version = 1
	rec := g.batchIDs(keys)
	defer rec.Release()
	start := time.Now()
	if tbl, err = e.baselineUpsert(ctx, tbl, keys, rec); err != nil {
		return cowResult{}, err
	}
	d := time.Since(start)
	c, err := measureChange(ctx, tbl, base)
	if err != nil {
		return cowResult{}, err
	}
	r := cowResultOf(c, pt.k, d)
	r.rowsBack, err = e.countRows(ctx, ident)
	return r, err
}

func fmtPct(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf("%.1f%%", v)
}

func fmtAmp(v float64) string {
	switch {
	case math.IsNaN(v) || v <= 0:
		return "–"
	case v >= 100:
		return fmt.Sprintf("%.0fx", v)
	default:
		return fmt.Sprintf("%.1fx", v)
	}
}

const notImplemented = "not implemented yet"

func (e *env) cowTable(ctx context.Context) (*section, error) {
	supported, why, err := e.copyOnWriteSupported(ctx)
	if err != nil {
		return nil, fmt.Errorf("copy-on-write probe: %w", err)
	}
	s := &section{name: "cow", title: "Copy-on-write: write amplification",
		notes: []string{"One upsert of K keys into a table of M files of 1,000 seed events (identifier field `id`), " +
			"keys scattered one per file (or clustered in one file), ids sorted (contiguous per file, min/max " +
			"pruning's best case, as in the seed) or shuffled (every file spans the whole id range). Fraction " +
			"rewritten: bytes of the data files the upsert removed over the table's bytes before it (snapshot " +
			"summaries). Rows written per key: rows the upsert's snapshots added, over K. **Ours**: `Writer.Upsert` " +
			"in `CopyOnWrite` mode, then `Flush`. **Baseline**: iceberg-go alone with `write.delete.mode=copy-on-write`: " +
			"`Table.Delete(id IN keys)` (rewrites the files holding them) then `Table.Append` of the new rows. The " +
			"table is read back with iceberg-go's scanner after each upsert (the row count must not change). Seed: " +
			"Apple M3 Pro, local files, in-process REST semantics, ~128 B payload; its per-row amplification is " +
			"stated for \"1 scattered key\" and \"100 keys clustered in one file\" without M."},
		header: []string{"K", "M", "keys", "ids", "seed rewritten", "ours rewritten", "baseline rewritten",
			"seed amplification", "ours rows written/key", "baseline rows written/key", "ours s", "baseline s", "rows read back (ours / baseline)"},
	}
	if !supported {
		s.notes = append(s.notes, fmt.Sprintf("**Ours: %s.** `Upsert` in `CopyOnWrite` mode returns an error "+
			"wrapping `iceberg.ErrNotSupported` (%q); this table fills in by itself when the mode lands.", notImplemented, why))
	}
	pl := &plot{title: "Copy-on-write: fraction of the table rewritten by one upsert", ylabel: "% of table bytes rewritten",
		xlabel: "K keys, M files, layout"}
	var sdS, ouS, baS []float64
	for _, pt := range e.cowGrid() {
		for _, shuffled := range []bool{false, true} {
			n := pt.m * fileRows
			ids, order := sequentialIDs(n), "sorted"
			if shuffled {
				ids, order = shuffledIDs(n, uint64(pt.m)), "shuffled"
			}
			keys := keysIn(ids, pt.k, pt.clustered, uint64(pt.k))
			layout := "scattered"
			if pt.clustered {
				layout = "clustered"
			}
			label := fmt.Sprintf("cow K=%d M=%d %s %s", pt.k, pt.m, layout, order)
			seedFrac, seedAmp := pt.seedFrac, pt.seedAmp
			if shuffled {
				seedFrac, seedAmp = math.NaN(), math.NaN()
			}
			ours := cowResult{frac: math.NaN(), amp: math.NaN(), rowsBack: -1}
			oursFrac, oursAmp, oursSecs := notImplemented, notImplemented, "–"
			if supported {
				e.prog.begin(label+" ours", 0)
				if ours, err = e.cowOurs(ctx, pt, ids, keys); err != nil {
					return nil, err
				}
				e.prog.end(fmtPct(ours.frac))
				oursFrac, oursAmp, oursSecs = fmtPct(ours.frac), fmtAmp(ours.amp), fmt.Sprintf("%.3f", ours.elapsed.Seconds())
			}
			e.prog.begin(label+" baseline", 0)
			base, err := e.cowBaseline(ctx, pt, ids, keys)
			if err != nil {
				return nil, err
			}
			e.prog.end(fmtPct(base.frac))
			if base.rowsBack != int64(n) || (supported && ours.rowsBack != int64(n)) {
				return nil, fmt.Errorf("%s: read back ours %d, baseline %d rows, want %d", label, ours.rowsBack, base.rowsBack, n)
			}
			back := commas(base.rowsBack)
			if supported {
				back = commas(ours.rowsBack) + " / " + back
			} else {
				back = "– / " + back
			}
			s.add(commas(int64(pt.k)), commas(int64(pt.m)), layout, order, fmtPct(seedFrac), oursFrac, fmtPct(base.frac),
				fmtAmp(seedAmp), oursAmp, fmtAmp(base.amp), oursSecs, fmt.Sprintf("%.3f", base.elapsed.Seconds()), back)
			pl.categories = append(pl.categories, fmt.Sprintf("K%d M%d %s%s", pt.k, pt.m, map[bool]string{true: "cl ", false: ""}[pt.clustered], order[:2]))
			sdS, ouS, baS = append(sdS, seedFrac), append(ouS, ours.frac), append(baS, base.frac)
		}
	}
	oursName := "ours"
	if !supported {
		oursName = "ours (" + notImplemented + ")"
	}
	pl.series = []series{{name: "seed", values: sdS}, {name: oursName, values: ouS}, {name: "baseline (iceberg-go Delete + Append)", values: baS}}
	s.plot = pl
	return s, nil
}

// memProbe measures the Go heap around a mutation: what stays live between two points (retained), everything
// allocated (churn) and the peak of live heap objects above the start, sampled every 2 ms.
type memProbe struct {
	start     runtime.MemStats
	stop      chan struct{}
	wg        sync.WaitGroup
	mu        sync.Mutex
	peak      uint64
	baseBytes uint64
}

func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// settle collects twice: objects with finalizers are freed by the second collection only.
func settle() {
	runtime.GC()
	runtime.GC()
}

func startProbe() *memProbe {
	settle()
	p := &memProbe{stop: make(chan struct{})}
	runtime.ReadMemStats(&p.start)
	p.baseBytes = heapObjects()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				if v := heapObjects(); v > p.baseBytes {
					p.mu.Lock()
					p.peak = max(p.peak, v-p.baseBytes)
					p.mu.Unlock()
				}
			}
		}
	}()
	return p
}

// retained is the live heap growth since the start, after a collection.
func (p *memProbe) retained() int64 {
	settle()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc) - int64(p.start.HeapAlloc)
}

// finish returns the bytes allocated since the start and the sampled peak.
func (p *memProbe) finish() (churn, peak int64) {
	close(p.stop)
	p.wg.Wait()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.TotalAlloc - p.start.TotalAlloc), int64(p.peak)
}

// cowMemRow is one line of the memory table, per row of the keyed batch.
type cowMemRow struct {
	retained, buffered, churn, peak float64
}

const memInfoLen = 256

func (e *env) cowMemRows() int {
	if e.cfg.quick {
		return 5000
	}
	return 50000
}

// memOurs upserts n keys (every row of a table of n rows) through our Writer in the given mode and measures the
// batch held between Upsert and Flush (retained), and the allocations and peak through the commit.
func (e *env) memOurs(ctx context.Context, mode iceberg.Mode, n int) (cowMemRow, error) {
	ident := e.newIdent("mem_ours")
	defer e.dropTable(ctx, ident)
	ids := sequentialIDs(n)
	w, err := e.keyedTable(ctx, ident, ids, memInfoLen, nil)
	if err != nil {
		return cowMemRow{}, err
	}
	if err := w.Close(ctx); err != nil {
		return cowMemRow{}, err
	}
	w, err = iceberg.NewWriter(ctx, e.cat, ident, iceberg.WithMode(mode), iceberg.WithFlushRows(n+1),
		iceberg.WithFlushInterval(0), iceberg.WithMemoryLimit(1<<30))
	if err != nil {
		return cowMemRow{}, err
	}
	defer w.Close(ctx)
	g := newGenerator(0, 13, memInfoLen)
	g.version = 1
	rec := g.batchIDs(ids)
	p := startProbe()
	if err := w.Upsert(ctx, rec); err != nil {
		p.finish()
		rec.Release()
		return cowMemRow{}, err
	}
	retained := p.retained()
	buffered := w.Stats().BufferedBytes
	runtime.KeepAlive(rec) // the caller's batch is not the writer's: keep it out of the retained figure
	rec.Release()
	err = w.Flush(ctx)
	churn, peak := p.finish()
	if err != nil {
		return cowMemRow{}, err
	}
	if err := e.verify(ctx, ident, int64(n)); err != nil {
		return cowMemRow{}, err
	}
	f := float64(n)
	return cowMemRow{retained: float64(retained) / f, buffered: float64(buffered) / f, churn: float64(churn) / f,
		peak: float64(peak) / f}, nil
}

// memBaseline does the same upsert with iceberg-go alone (copy-on-write Delete, then Append).
func (e *env) memBaseline(ctx context.Context, n int) (cowMemRow, error) {
	ident := e.newIdent("mem_base")
	defer e.dropTable(ctx, ident)
	ids := sequentialIDs(n)
	w, err := e.keyedTable(ctx, ident, ids, memInfoLen, map[string]string{table.WriteDeleteModeKey: table.WriteModeCopyOnWrite})
	if err != nil {
		return cowMemRow{}, err
	}
	if err := w.Close(ctx); err != nil {
		return cowMemRow{}, err
	}
	tbl, err := e.loadTable(ctx, ident)
	if err != nil {
		return cowMemRow{}, err
	}
	g := newGenerator(0, 13, memInfoLen)
	g.version = 1
	rec := g.batchIDs(ids)
	p := startProbe()
	_, err = e.baselineUpsert(ctx, tbl, ids, rec)
	rec.Release()
	churn, peak := p.finish()
	if err != nil {
		return cowMemRow{}, err
	}
	if err := e.verify(ctx, ident, int64(n)); err != nil {
		return cowMemRow{}, err
	}
	f := float64(n)
	return cowMemRow{retained: math.NaN(), buffered: math.NaN(), churn: float64(churn) / f, peak: float64(peak) / f}, nil
}

func fmtPerRow(v float64) string {
	if math.IsNaN(v) || v <= 0 {
		return "–"
	}
	return fmtBytes(v)
}

func (e *env) cowMemTable(ctx context.Context) (*section, error) {
	supported, why, err := e.copyOnWriteSupported(ctx)
	if err != nil {
		return nil, fmt.Errorf("copy-on-write probe: %w", err)
	}
	n := e.cowMemRows()
	s := &section{name: "cow-mem", title: "Copy-on-write: memory per row",
		notes: []string{fmt.Sprintf("One upsert of every key of a table of %s events (seed events with a %d-character "+
			"info column, ~%d B per row in Arrow, as the seed's 256 B payload), from one Arrow batch. Retained: live "+
			"heap growth (after a GC) between the return of `Upsert` and the commit, per row: what the writer keeps "+
			"of the batch. Churn: bytes allocated from `Upsert` through the commit, per row. Peak: highest live heap "+
			"objects above the start, sampled every 2 ms, per row. Stats.BufferedBytes: the writer's own count of the "+
			"bytes it holds, for comparison with the measured retained figure (small tables make that one noisy). Ours: `WithFlushRows(n+1)` (one batch), "+
			"`WithMemoryLimit(1 GiB)`. Baseline: iceberg-go alone, copy-on-write `Table.Delete(id IN keys)` then "+
			"`Table.Append` (it holds nothing between calls, so it has no retained figure). Seed: Apple M3 Pro, "+
			"\"a keyed batch materialised as one Arrow record\" during a copy-on-write commit.", commas(int64(n)),
			memInfoLen, memInfoLen+8+8+8+8+6+4*2+4)},
		header: []string{"writer", "mode", "retained B/row", "Stats.BufferedBytes/row", "churn B/row", "peak B/row"},
	}
	s.add("seed (incumbent)", "copy-on-write", "~700 B", "–", "~4.25 KiB", "–")
	var rows []cowMemRow
	if supported {
		e.prog.begin("cow-mem ours copy-on-write", 0)
		r, err := e.memOurs(ctx, iceberg.CopyOnWrite, n)
		if err != nil {
			return nil, err
		}
		e.prog.end(fmtPerRow(r.churn) + " churn/row")
		s.add("ours", "copy-on-write", fmtPerRow(r.retained), fmtPerRow(r.buffered), fmtPerRow(r.churn), fmtPerRow(r.peak))
		rows = append(rows, r)
	} else {
		s.add("ours", "copy-on-write", notImplemented, notImplemented, notImplemented, notImplemented)
		s.notes = append(s.notes, fmt.Sprintf("**Ours in copy-on-write mode: %s** (%q); the merge-on-read line is "+
			"measured for reference, and the copy-on-write line fills in by itself when the mode lands.", notImplemented, why))
		rows = append(rows, cowMemRow{math.NaN(), math.NaN(), math.NaN(), math.NaN()})
	}
	e.prog.begin("cow-mem ours merge-on-read", 0)
	r, err := e.memOurs(ctx, iceberg.MergeOnRead, n)
	if err != nil {
		return nil, err
	}
	e.prog.end(fmtPerRow(r.churn) + " churn/row")
	s.add("ours (reference)", "merge-on-read", fmtPerRow(r.retained), fmtPerRow(r.buffered), fmtPerRow(r.churn), fmtPerRow(r.peak))
	rows = append(rows, r)
	e.prog.begin("cow-mem baseline copy-on-write", 0)
	b, err := e.memBaseline(ctx, n)
	if err != nil {
		return nil, err
	}
	e.prog.end(fmtPerRow(b.churn) + " churn/row")
	s.add("baseline (iceberg-go Delete + Append)", "copy-on-write", "–", "–", fmtPerRow(b.churn), fmtPerRow(b.peak))
	rows = append(rows, b)

	pl := &plot{title: "Memory per row of a keyed batch", ylabel: "bytes per row (log)", logY: true,
		categories: []string{"retained", "churn", "peak"}}
	pl.series = append(pl.series, series{name: "seed (copy-on-write)", values: []float64{700, 4.25 * 1024, math.NaN()}})
	names := []string{"ours copy-on-write", "ours merge-on-read", "baseline (iceberg-go)"}
	if !supported {
		names[0] += " (" + notImplemented + ")"
	}
	for i, r := range rows {
		pl.series = append(pl.series, series{name: names[i], values: []float64{r.retained, r.churn, r.peak}})
	}
	s.plot = pl
	return s, nil
}
