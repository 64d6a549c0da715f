package main

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/apache/iceberg-go/table"

	iceberg "github.com/icewriter/iceberg"
)

// morStats is the mean of one kind of mutation over its commits.
type morStats struct {
	commits     int
	deleteFiles int64
	deleteBytes int64
	keys        int64
	elapsed     time.Duration
	snapshots   int
	rowsBack    int64
	rowsWant    int64
}

func (m *morStats) add(c change, keys int, d time.Duration) {
	m.commits++
	m.deleteFiles += c.deleteFiles
	m.deleteBytes += c.deleteBytes
	m.keys += int64(keys)
	m.elapsed += d
	m.snapshots += c.snapshots
}

func (m morStats) perCommit(v int64) float64 { return float64(v) / float64(max(1, m.commits)) }
func (m morStats) perKey() float64           { return float64(m.deleteBytes) / float64(max(1, m.keys)) }
func (m morStats) secsPerCommit() float64 {
	return m.elapsed.Seconds() / float64(max(1, m.commits))
}

func (e *env) morGrid() (files int, ks []int, commits int) {
	if e.cfg.quick {
		return 2, []int{1, 10, 100}, 2
	}
	return 100, []int{1, 10, 100, 1000, 10000}, 3
}

// morOurs loads a table of files×fileRows rows, then upserts k random existing keys per commit, commits times,
// then deletes k keys in one commit, each mutation an Upsert or Delete followed by Flush (one commit).
func (e *env) morOurs(ctx context.Context, files, k, commits int) (up, del morStats, err error) {
	ident := e.newIdent("mor_ours")
	defer e.dropTable(ctx, ident)
	ids := sequentialIDs(files * fileRows)
	w, err := e.keyedTable(ctx, ident, ids, seedInfoLen, nil)
	if err != nil {
		return up, del, err
	}
	if err := w.Close(ctx); err != nil {
		return up, del, err
	}
	w, err = iceberg.NewWriter(ctx, e.cat, ident, iceberg.WithMode(iceberg.MergeOnRead),
		iceberg.WithFlushRows(max(k, fileRows)), iceberg.WithFlushInterval(0))
	if err != nil {
		return up, del, err
	}
	defer w.Close(ctx)
	g := newGenerator(0, 5, seedInfoLen)
	for c := 0; c < commits+1; c++ {
		keys := keysIn(ids, k, false, uint64(100+c))
		base := headID(w.Table())
		start := time.Now()
		if c < commits {
			g.version++
			rec := g.batchIDs(keys)
			err = w.Upsert(ctx, rec)
			rec.Release()
		} else {
			rec := g.batchIDs(keys)
			err = w.Delete(ctx, rec)
			rec.Release()
		}
		if err == nil {
			err = w.Flush(ctx)
		}
		if err != nil {
			return up, del, err
		}
		d := time.Since(start)
		tbl, err := e.cat.LoadTable(ctx, ident)
		if err != nil {
			return up, del, err
		}
		ch, err := measureChange(ctx, tbl, base)
		if err != nil {
			return up, del, err
		}
		if c < commits {
			up.add(ch, k, d)
		} else {
			del.add(ch, k, d)
		}
		if c == commits-1 {
			up.rowsWant = int64(len(ids))
			if up.rowsBack, err = e.countRows(ctx, ident); err != nil {
				return up, del, err
			}
		}
	}
	del.rowsWant = int64(len(ids) - k)
	del.rowsBack, err = e.countRows(ctx, ident)
	return up, del, err
}

// morBaseline does the same mutations with iceberg-go alone on a table whose write.delete.mode is
// merge-on-read: Table.Delete (position deletes) then Table.Append for an upsert, Table.Delete for a delete.
func (e *env) morBaseline(ctx context.Context, files, k, commits int) (up, del morStats, err error) {
	ident := e.newIdent("mor_base")
	defer e.dropTable(ctx, ident)
	ids := sequentialIDs(files * fileRows)
	w, err := e.keyedTable(ctx, ident, ids, seedInfoLen, map[string]string{table.WriteDeleteModeKey: table.WriteModeMergeOnRead})
	if err != nil {
		return up, del, err
	}
	if err := w.Close(ctx); err != nil {
		return up, del, err
	}
	tbl, err := e.loadTable(ctx, ident)
	if err != nil {
		return up, del, err
	}
	g := newGenerator(0, 5, seedInfoLen)
	for c := 0; c < commits+1; c++ {
		keys := keysIn(ids, k, false, uint64(100+c))
		base := headID(tbl)
		start := time.Now()
		if c < commits {
			g.version++
			rec := g.batchIDs(keys)
			tbl, err = e.baselineUpsert(ctx, tbl, keys, rec)
			rec.Release()
		} else {
			tbl, err = e.baselineUpsert(ctx, tbl, keys, nil)
		}
		if err != nil {
			return up, del, err
		}
		d := time.Since(start)
		ch, err := measureChange(ctx, tbl, base)
		if err != nil {
			return up, del, err
		}
		if c < commits {
			up.add(ch, k, d)
		} else {
			del.add(ch, k, d)
		}
		if c == commits-1 {
			up.rowsWant = int64(len(ids))
			if up.rowsBack, err = e.countRows(ctx, ident); err != nil {
				return up, del, err
			}
		}
	}
	del.rowsWant = int64(len(ids) - k)
	del.rowsBack, err = e.countRows(ctx, ident)
	return up, del, err
}

func (e *env) morTable(ctx context.Context) (*section, error) {
	files, ks, commits := e.morGrid()
	s := &section{name: "mor", title: "Merge-on-read: delete-file bytes per key and per commit",
		notes: []string{fmt.Sprintf("A table of %s seed events in %d files of %s rows (sequential ids, identifier "+
			"field `id`). For each K: %d upsert commits of K random existing keys, then one delete commit of K keys. "+
			"**Ours**: `Writer.Upsert`/`Writer.Delete` in `MergeOnRead` mode, then `Flush` (one commit each; "+
			"`WithFlushRows(max(K, 1000))`); the delete files are equality deletes on `id`. **Baseline**: iceberg-go "+
			"alone on a table with `write.delete.mode=merge-on-read`: `Table.Delete(id IN keys)` (it scans the "+
			"matching files and writes position deletes) then `Table.Append` of the new rows, two commits per "+
			"upsert. Delete-file bytes are the sizes of the delete files each mutation's snapshots added, read "+
			"from the manifests; seconds are wall time per mutation. The table is read "+
			"back with iceberg-go's scanner after the upserts (N rows) and after the delete (N − K rows). Seed: \"one 2–4 KB equality-delete file "+
			"whatever K\" (K ≤ 100, M ≤ 200 files of 1,000 rows).",
			commas(int64(files*fileRows)), files, commas(fileRows), commits)},
		header: []string{"K", "mutation", "ours delete files", "ours bytes/commit", "ours bytes/key", "ours s/commit",
			"baseline delete files", "baseline bytes/commit", "baseline bytes/key", "baseline s/commit", "seed bytes/commit",
			"rows read back (ours / baseline of expected)"},
	}
	pl := &plot{title: "Merge-on-read delete-file bytes per commit", ylabel: "bytes per commit (log)", xlabel: "keys per commit (K)",
		logX: true, logY: true}
	var ou, od, bu, bd, sd []float64
	for _, k := range ks {
		e.prog.begin(fmt.Sprintf("mor ours K=%d", k), 0)
		oUp, oDel, err := e.morOurs(ctx, files, k, commits)
		if err != nil {
			return nil, err
		}
		e.prog.end(fmt.Sprintf("%s/commit upsert", fmtBytes(oUp.perCommit(oUp.deleteBytes))))
		e.prog.begin(fmt.Sprintf("mor baseline K=%d", k), 0)
		bUp, bDel, err := e.morBaseline(ctx, files, k, commits)
		if err != nil {
			return nil, err
		}
		e.prog.end(fmt.Sprintf("%s/commit upsert", fmtBytes(bUp.perCommit(bUp.deleteBytes))))
		seed := "–"
		seedV := math.NaN()
		if k <= 100 {
			seed, seedV = "2–4 KB", 3<<10
		}
		for i, pair := range [][2]morStats{{oUp, bUp}, {oDel, bDel}} {
			o, b := pair[0], pair[1]
			kind := "upsert"
			if i == 1 {
				kind = "delete"
			}
			ck := fmt.Sprintf("%s / %s of %s", commas(o.rowsBack), commas(b.rowsBack), commas(o.rowsWant))
			s.add(commas(int64(k)), kind, fmt.Sprintf("%.1f", o.perCommit(o.deleteFiles)), fmtBytes(o.perCommit(o.deleteBytes)),
				fmt.Sprintf("%.1f", o.perKey()), fmt.Sprintf("%.3f", o.secsPerCommit()),
				fmt.Sprintf("%.1f", b.perCommit(b.deleteFiles)), fmtBytes(b.perCommit(b.deleteBytes)),
				fmt.Sprintf("%.1f", b.perKey()), fmt.Sprintf("%.3f", b.secsPerCommit()), seed, ck)
		}
		for _, m := range []morStats{oUp, oDel, bUp, bDel} {
			if m.rowsBack != m.rowsWant {
				return nil, fmt.Errorf("K=%d: read back %d rows, want %d", k, m.rowsBack, m.rowsWant)
			}
		}
		pl.xs = append(pl.xs, float64(k))
		ou, od = append(ou, oUp.perCommit(oUp.deleteBytes)), append(od, oDel.perCommit(oDel.deleteBytes))
		bu, bd = append(bu, bUp.perCommit(bUp.deleteBytes)), append(bd, bDel.perCommit(bDel.deleteBytes))
		sd = append(sd, seedV)
	}
	pl.series = []series{{name: "ours, upsert", values: ou}, {name: "ours, delete", values: od, dashed: true},
		{name: "baseline, upsert", values: bu}, {name: "baseline, delete", values: bd, dashed: true},
		{name: "seed ≈2–4 KB (K ≤ 100)", values: sd, points: true}}
	s.plot = pl
	return s, nil
}
