package main

import (
	"context"
	"fmt"
	"math"
	"runtime"
)

// Seed figures (seed-figures.md): GOMAXPROCS 1 at batch 1,000/5,000/10,000; GOMAXPROCS 2 with max_in_flight 4
// at batch 1,000/10,000. Keyed by (GOMAXPROCS, batch).
var seedCPU = map[baseKey]float64{
	{1, 1000}: 757, {1, 5000}: 3105, {1, 10000}: 5442,
	{2, 1000}: 1186, {2, 10000}: 6763,
}

// cpuInFlight is the MaxInFlight of the cpu table: the incumbent's default max_in_flight.
const cpuInFlight = 4

func (e *env) grid() (procs, batchSizes, inFlights []int) {
	if e.cfg.quick {
		return []int{1, 2}, []int{1000, 5000}, []int{1, 4}
	}
	return []int{1, 2}, []int{1000, 5000, 10000}, []int{1, 4, 8, 16, 32}
}

func (e *env) cpuTable(ctx context.Context) (*section, error) {
	procs, batchSizes, _ := e.grid()
	s := &section{name: "cpu", title: "Write throughput: CPU and batch size",
		notes: []string{
			fmt.Sprintf("%s. **Ours**: `Writer.Write` calls of one batch each, "+
				"`WithFlushRows(batch)` (a batch sealed per batch-size rows, as the seed's `batching.count`), "+
				"`WithMaxInFlight(%d)` (the incumbent's default `max_in_flight`), other options at their defaults; "+
				"the clock stops when `Close` returns, so every row is committed. **Baseline**: iceberg-go's "+
				"`Table.Append` per batch (one commit per batch, sequential) on a table with iceberg-go's default "+
				"properties. Both read back with iceberg-go's scanner and the row count checked. GOMAXPROCS set "+
				"in-process with `runtime.GOMAXPROCS`. Seed: Intel i7-10850H, MinIO + REST catalog in Docker; its "+
				"GOMAXPROCS 2 figures are at max_in_flight 4. **Encode**: DESIGN.md's encode baseline on the same batches "+
				"(one pqarrow FileWriter, zstd, one goroutine, to io.Discard): the rate of encoding alone on one core.", e.pointDesc(), cpuInFlight),
		},
		header: []string{"GOMAXPROCS", "batch", "ours rows/s", "ours commits", "baseline rows/s", "baseline commits",
			"encode rows/s", "seed rows/s", "ours ÷ baseline", "ours ÷ encode", "ours ÷ seed", "baseline ÷ seed"},
	}
	pl := &plot{title: "Throughput by GOMAXPROCS and batch size", ylabel: "rows/s (log)", xlabel: "GOMAXPROCS, batch", logY: true}
	var ours, base, seed, encs []float64
	for _, batch := range batchSizes {
		batches := seedBatches(e.cfg.rows, batch)
		for _, p := range procs {
			o, err := e.runOurs(ctx, fmt.Sprintf("cpu ours procs=%d batch=%d", p, batch), p, batches, batch, cpuInFlight)
			if err != nil {
				releaseAll(batches)
				return nil, err
			}
			b, err := e.runBaseline(ctx, fmt.Sprintf("cpu baseline procs=%d batch=%d", p, batch), p, batches, batch)
			if err != nil {
				releaseAll(batches)
				return nil, err
			}
			enc, err := encodeRate(p, batches)
			if err != nil {
				releaseAll(batches)
				return nil, err
			}
			sd, ok := seedCPU[baseKey{p, batch}]
			if !ok {
				sd = math.NaN()
			}
			s.add(fmt.Sprint(p), commas(int64(batch)), fmtRate(o.rate()), commas(o.commits), fmtRate(b.rate()),
				commas(b.commits), fmtRate(enc), fmtRate(sd), fmtRatio(o.rate(), b.rate()), fmtRatio(o.rate(), enc),
				fmtRatio(o.rate(), sd), fmtRatio(b.rate(), sd))
			pl.categories = append(pl.categories, fmt.Sprintf("G%d b%s", p, shortNum(float64(batch))))
			ours, base, seed = append(ours, o.rate()), append(base, b.rate()), append(seed, sd)
			encs = append(encs, enc)
		}
		releaseAll(batches)
		runtime.GC()
	}
	pl.series = []series{{name: "ours (Writer)", values: ours}, {name: "baseline (Table.Append per batch)", values: base},
		{name: "seed (incumbent, MinIO + REST)", values: seed}, {name: "encode only (pqarrow zstd, 1 goroutine)", values: encs}}
	s.plot = pl
	return s, nil
}

// Seed figures at GOMAXPROCS 4, batch 10,000 (seed-figures.md), keyed by max_in_flight.
var seedInFlight = map[int]float64{4: 8483, 8: 13839, 16: 23316, 32: 34835}

func (e *env) inflightTable(ctx context.Context) (*section, error) {
	_, batchSizes, inFlights := e.grid()
	procs := runtime.NumCPU()
	s := &section{name: "inflight", title: "Write throughput: batch size and MaxInFlight",
		notes: []string{
			fmt.Sprintf("%s, at GOMAXPROCS %d (all cores here; the seed ran at 4). **Our "+
				"`MaxInFlight` counts batches encoding and uploading at once; commits always go through ONE ordered "+
				"commit loop that coalesces every staged batch into one commit. The seed's `max_in_flight` is the "+
				"number of concurrent catalog commits.** Compare the rows/s, not the knobs. Ours: `WithFlushRows(batch)`, "+
				"`WithMaxInFlight(n)`, other options at their defaults. Baseline: iceberg-go's `Table.Append` per batch, "+
				"sequential (concurrent appends to one table conflict: iceberg-go does not retry by default), so it "+
				"is measured once per batch size.", e.pointDesc(), procs),
		},
		header: []string{"batch", "MaxInFlight", "ours rows/s", "ours commits", "ours files", "baseline rows/s",
			"seed rows/s (max_in_flight)", "ours ÷ baseline", "ours ÷ seed"},
	}
	pl := &plot{title: "Throughput by MaxInFlight", ylabel: "rows/s (log)", xlabel: "MaxInFlight (ours) / max_in_flight (seed)",
		logY: true, logX: true}
	for _, m := range inFlights {
		pl.xs = append(pl.xs, float64(m))
	}
	var baseSeries []series
	for _, batch := range batchSizes {
		batches := seedBatches(e.cfg.rows, batch)
		b, err := e.runBaseline(ctx, fmt.Sprintf("inflight baseline batch=%d", batch), procs, batches, batch)
		if err != nil {
			releaseAll(batches)
			return nil, err
		}
		var ours, base []float64
		for _, m := range inFlights {
			o, err := e.runOurs(ctx, fmt.Sprintf("inflight ours batch=%d maxinflight=%d", batch, m), procs, batches, batch, m)
			if err != nil {
				releaseAll(batches)
				return nil, err
			}
			sd := math.NaN()
			if batch == 10000 {
				if v, ok := seedInFlight[m]; ok {
					sd = v
				}
			}
			s.add(commas(int64(batch)), fmt.Sprint(m), fmtRate(o.rate()), commas(o.commits), commas(o.files),
				fmtRate(b.rate()), fmtRate(sd), fmtRatio(o.rate(), b.rate()), fmtRatio(o.rate(), sd))
			ours, base = append(ours, o.rate()), append(base, b.rate())
		}
		releaseAll(batches)
		runtime.GC()
		c := palette[[]int{0, 1, 3, 4, 5}[len(baseSeries)%5]]
		pl.series = append(pl.series, series{name: fmt.Sprintf("ours, batch %s", commas(int64(batch))), values: ours, color: c})
		baseSeries = append(baseSeries, series{name: fmt.Sprintf("baseline (Table.Append per batch), batch %s", commas(int64(batch))),
			values: base, dashed: true, color: c})
	}
	pl.series = append(pl.series, baseSeries...)
	var sd []float64
	for _, m := range inFlights {
		if v, ok := seedInFlight[m]; ok {
			sd = append(sd, v)
		} else {
			sd = append(sd, math.NaN())
		}
	}
	pl.series = append(pl.series, series{name: "seed, batch 10,000 (GOMAXPROCS 4)", values: sd, points: true, color: "#000000"})
	s.plot = pl
	return s, nil
}

// pointDesc says what one throughput point is.
func (e *env) pointDesc() string {
	d := commas(int64(e.cfg.rows)) + " seed events per point"
	if e.cfg.repeat > 1 {
		d += fmt.Sprintf(" (each point run %d times, the median reported)", e.cfg.repeat)
	}
	return d
}
