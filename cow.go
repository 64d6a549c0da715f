package iceberg

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/compaction"
	"golang.org/x/sync/errgroup"
)

// cowConfig tunes copy-on-write rewrites in the committer.
type cowConfig struct {
	parallel       int
	targetFileSize int64
	rowGroupRows   int
}

// keySet holds the exact keys a copy-on-write segment upserts or deletes.
type keySet struct {
	names []string
	keys  map[string]struct{}
}

func newKeySet(recs []arrow.RecordBatch) (*keySet, error) {
	ks := &keySet{keys: map[string]struct{}{}}
	var buf []byte
	for _, r := range recs {
		if ks.names == nil {
			for _, f := range r.Schema().Fields() {
				ks.names = append(ks.names, f.Name)
			}
		}
		enc, err := newKeyEncoder(r.Columns())
		if err != nil {
			return nil, err
		}
		for row := 0; row < int(r.NumRows()); row++ {
			buf = enc.appendKey(buf[:0], row)
			ks.keys[string(buf)] = struct{}{}
		}
	}
	return ks, nil
}

// mask marks the rows of rec whose key is in the set (true) and counts them.
func (ks *keySet) match(rec arrow.RecordBatch) ([]bool, int, error) {
	enc, err := ks.encoder(rec)
	if err != nil {
		return nil, 0, err
	}
	hits := make([]bool, rec.NumRows())
	n := 0
	var buf []byte
	for row := range hits {
		buf = enc.appendKey(buf[:0], row)
		if _, ok := ks.keys[string(buf)]; ok {
			hits[row] = true
			n++
		}
	}
	return hits, n, nil
}

// encoder encodes the keys of rec's rows.
func (ks *keySet) encoder(rec arrow.RecordBatch) (*keyEncoder, error) {
	cols := make([]arrow.Array, len(ks.names))
	for i, n := range ks.names {
		idx := rec.Schema().FieldIndices(n)
		if len(idx) == 0 {
			return nil, fmt.Errorf("iceberg: copy-on-write: key column %q missing from the scan", n)
		}
		cols[i] = rec.Column(idx[0])
	}
	return newKeyEncoder(cols)
}

// filter builds a scan filter that matches every row holding one of the keys (an over-approximation for
// multi-column keys). Only used to find candidate files: partition and column-statistics pruning.
func (ks *keySet) filter(recs []arrow.RecordBatch) ice.BooleanExpression {
	var preds []ice.BooleanExpression
	for i, name := range ks.names {
		var pred ice.BooleanExpression
		switch recs[0].Column(i).(type) {
		case *array.Int64:
			var vals []int64
			for _, r := range recs {
				vals = append(vals, r.Column(i).(*array.Int64).Int64Values()...)
			}
			pred = ice.IsIn(ice.Reference(name), vals...)
		case *array.Int32:
			var vals []int32
			for _, r := range recs {
				vals = append(vals, r.Column(i).(*array.Int32).Int32Values()...)
			}
			pred = ice.IsIn(ice.Reference(name), vals...)
		case *array.String:
			var vals []string
			for _, r := range recs {
				c := r.Column(i).(*array.String)
				for j := 0; j < c.Len(); j++ {
					vals = append(vals, c.Value(j))
				}
			}
			pred = ice.IsIn(ice.Reference(name), vals...)
		default:
			continue // no pruning on this column; the key column is read to confirm anyway
		}
		preds = append(preds, pred)
	}
	switch len(preds) {
	case 0:
		return ice.AlwaysTrue{}
	case 1:
		return preds[0]
	default:
		return ice.NewAnd(preds[0], preds[1], preds[2:]...)
	}
}

// cowPlan is what a copy-on-write segment rewrites.
type cowPlan struct {
	oldFiles []ice.DataFile
	// newFiles replace oldFiles. On format-version 3 tables each carries an explicit first_row_id (its rows
	// keep their _row_id as a column); freshFiles are rewrites of files that had no row ids yet, added by a
	// row delta that assigns them.
	newFiles     []ice.DataFile
	freshFiles   []ice.DataFile
	deadDeletes  []ice.DataFile
	candidates   int
	rowsRemoved  int64
	bytesRead    int64
	bytesWritten int64
}

// planCopyOnWrite finds the data files that hold a key of the segment and rewrites them without those rows,
// with their existing delete files applied: candidates come from partition and min/max pruning, each is
// confirmed by reading its key columns, and only confirmed files are read whole and rewritten, streaming,
// up to cfg.parallel at once.
//
// eligible, when not nil, limits the plan to the data files it accepts.
func planCopyOnWrite(ctx context.Context, tbl *table.Table, branch string, keyRecs []arrow.RecordBatch, cfg cowConfig,
	eligible func(path string) bool, ids *rowIDs) (*cowPlan, error) {
	plan := &cowPlan{}
	snap := tbl.Metadata().SnapshotByName(branch)
	if snap == nil || len(keyRecs) == 0 {
		return plan, nil
	}
	ks, err := newKeySet(keyRecs)
	if err != nil {
		return nil, err
	}
	// A filtered plan may drop equality-delete files whose bounds miss the filter: use it only to choose the
	// files, then take those files' tasks from an unfiltered plan, which carries all their deletes.
	filt := ks.filter(keyRecs)
	filtered, err := tbl.Scan(table.WithSnapshotID(snap.SnapshotID), table.WithRowFilter(filt)).PlanFiles(ctx)
	if err != nil {
		return nil, fmt.Errorf("iceberg: copy-on-write: plan: %w", err)
	}
	if len(filtered) == 0 {
		return plan, nil
	}
	want := map[string]bool{}
	for _, t := range filtered {
		if eligible == nil || eligible(t.File.FilePath()) {
			want[t.File.FilePath()] = true
		}
	}
	if len(want) == 0 {
		return plan, nil
	}
	all, err := tbl.Scan(table.WithSnapshotID(snap.SnapshotID)).PlanFiles(ctx)
	if err != nil {
		return nil, fmt.Errorf("iceberg: copy-on-write: plan: %w", err)
	}
	var candidates []table.FileScanTask
	for _, t := range all {
		if want[t.File.FilePath()] {
			candidates = append(candidates, t)
		}
	}
	plan.candidates = len(candidates)

	lineage := tbl.Metadata().Version() >= 3
	var mu sync.Mutex
	var rewritten []table.FileScanTask
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, cfg.parallel))
	for _, task := range candidates {
		g.Go(func() error {
			hit, err := fileHoldsKey(gctx, tbl, snap.SnapshotID, task, ks, filt)
			if err != nil || !hit {
				return err
			}
			files, removed, err := rewriteWithout(gctx, tbl, snap.SnapshotID, task, ks, cfg, lineage, ids)
			if err != nil {
				return err
			}
			fresh := false
			if lineage {
				if first := task.File.FirstRowID(); first != nil {
					next := *first
					for i, f := range files {
						if files[i], err = withFirstRowID(tbl.Metadata(), f, next); err != nil {
							return err
						}
						next += f.Count()
					}
				} else {
					fresh = true
				}
			}
			mu.Lock()
			defer mu.Unlock()
			rewritten = append(rewritten, task)
			plan.oldFiles = append(plan.oldFiles, task.File)
			if fresh {
				plan.freshFiles = append(plan.freshFiles, files...)
			} else {
				plan.newFiles = append(plan.newFiles, files...)
			}
			plan.rowsRemoved += removed
			plan.bytesRead += task.File.FileSizeBytes()
			for _, f := range files {
				plan.bytesWritten += f.FileSizeBytes()
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if len(rewritten) == 0 {
		return plan, nil
	}
	// Delete files that applied only to the rewritten files are dead: remove them in the same snapshot (a
	// position delete or vector left behind would point at a file that is gone; ReplaceFiles does not check).
	plan.deadDeletes = append(plan.deadDeletes, table.CollectSafePositionDeletes(rewritten)...)
	plan.deadDeletes = append(plan.deadDeletes, table.CollectSafeDeletionVectors(rewritten)...)
	paths := map[string]struct{}{}
	for _, f := range plan.oldFiles {
		paths[f.FilePath()] = struct{}{}
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	deadEq, err := compaction.CollectDeadEqualityDeletesWithSpecs(ctx, fs, tbl.Metadata(), snap, paths)
	if err != nil {
		return nil, fmt.Errorf("iceberg: copy-on-write: dead equality deletes: %w", err)
	}
	plan.deadDeletes = dedupeFiles(append(plan.deadDeletes, deadEq...))
	return plan, nil
}

// merge adds another plan over different files to p.
func (p *cowPlan) merge(o *cowPlan) {
	p.oldFiles = append(p.oldFiles, o.oldFiles...)
	p.newFiles = append(p.newFiles, o.newFiles...)
	p.freshFiles = append(p.freshFiles, o.freshFiles...)
	p.deadDeletes = dedupeFiles(append(p.deadDeletes, o.deadDeletes...))
	p.candidates += o.candidates
	p.rowsRemoved += o.rowsRemoved
	p.bytesRead += o.bytesRead
	p.bytesWritten += o.bytesWritten
}

// cowRun plans the copy-on-write segments of one commit attempt so that each file of the table is rewritten at
// most once. The first copy-on-write segment removes the keys of every later segment from the files the table
// held before the attempt; each segment then rewrites, for its own keys, only files this attempt added (new
// rows of earlier segments, and their rewrites). A snapshot of an earlier segment may so miss rows that only a
// later segment of the same catalog commit deletes: a replay from its checkpoint deletes them again.
type cowRun struct {
	later   [][]arrow.RecordBatch // per segment: the keys of the copy-on-write segments from it on
	added   map[string]bool       // data files added by this attempt's segments
	started bool
	ids     *rowIDs // format version 3: the row ids of the rows the rewrites removed, by key
}

func newCowRun(segs []Segment) *cowRun {
	r := &cowRun{later: make([][]arrow.RecordBatch, len(segs)), added: map[string]bool{}, ids: &rowIDs{ids: map[string]int64{}}}
	var acc []arrow.RecordBatch
	for i := len(segs) - 1; i >= 0; i-- {
		acc = append(slices.Clone(segs[i].DeleteKeys), acc...)
		r.later[i] = acc
	}
	return r
}

// plan plans segment i.
func (r *cowRun) plan(ctx context.Context, tbl *table.Table, branch string, i int, seg *Segment, cfg cowConfig) (*cowPlan, error) {
	plan := &cowPlan{}
	if !r.started {
		r.started = true
		base, err := planCopyOnWrite(ctx, tbl, branch, r.later[i], cfg, func(p string) bool { return !r.added[p] }, r.ids)
		if err != nil {
			return nil, err
		}
		plan.merge(base)
	}
	if len(r.added) > 0 {
		own, err := planCopyOnWrite(ctx, tbl, branch, seg.DeleteKeys, cfg, func(p string) bool { return r.added[p] }, r.ids)
		if err != nil {
			return nil, err
		}
		for _, f := range append(slices.Clone(own.newFiles), own.freshFiles...) {
			r.added[f.FilePath()] = true
		}
		plan.merge(own)
	}
	return plan, nil
}

// note records the files a segment added.
func (r *cowRun) note(files []ice.DataFile) {
	for _, f := range files {
		r.added[f.FilePath()] = true
	}
}

func dedupeFiles(files []ice.DataFile) []ice.DataFile {
	seen := map[string]bool{}
	out := files[:0]
	for _, f := range files {
		if !seen[f.FilePath()] {
			seen[f.FilePath()] = true
			out = append(out, f)
		}
	}
	return out
}

// fileHoldsKey confirms that a candidate (deletes applied) holds a key. The scan carries the keys as a row
// filter, so iceberg-go skips the row groups whose statistics, dictionary or bloom filter rule every key out
// (the writer puts a bloom filter on the key columns of every file it writes), and reads only the key columns
// of the rest: statistics and bloom filters only say a row group may hold a key, the exact match decides.
func fileHoldsKey(ctx context.Context, tbl *table.Table, snapID int64, task table.FileScanTask, ks *keySet, filt ice.BooleanExpression) (bool, error) {
	opts := []table.ScanOption{table.WithSnapshotID(snapID), table.WithSelectedFields(ks.names...)}
	if len(ks.keys) <= inPruneLimit {
		opts = append(opts, table.WithRowFilter(filt))
	}
	_, recs, err := tbl.Scan(opts...).ReadTasks(ctx, []table.FileScanTask{task})
	if err != nil {
		return false, err
	}
	for rec, err := range recs {
		if err != nil {
			return false, err
		}
		_, n, merr := ks.match(rec)
		rec.Release()
		if merr != nil {
			return false, merr
		}
		if n > 0 {
			return true, nil // stop reading: one key is enough
		}
	}
	return false, nil
}

// inPruneLimit is the largest IN list iceberg-go prunes row groups with (statistics, dictionaries, bloom
// filters); beyond it the row filter only costs its evaluation, so the key columns are read unfiltered.
const inPruneLimit = 200

// rewriteWithout streams one data file (deletes applied) into new files without the rows holding a key.
func rewriteWithout(ctx context.Context, tbl *table.Table, snapID int64, task table.FileScanTask, ks *keySet, cfg cowConfig, lineage bool, ids *rowIDs) ([]ice.DataFile, int64, error) {
	scanOpts := []table.ScanOption{table.WithSnapshotID(snapID)}
	writeOpts := []table.WriteRecordOption{table.WithClusteredWrite(), table.WithTargetFileSize(cfg.targetFileSize),
		table.WithParquetRowGroupLimit(cfg.rowGroupRows), table.WithRecordBatchBufferSize(2)}
	schema, recs, err := tbl.Scan(append(scanOpts, lineageScan(lineage)...)...).ReadTasks(ctx, []table.FileScanTask{task})
	if err != nil {
		return nil, 0, err
	}
	if tbl, err = withKeyBlooms(tbl, ks.names, min(task.File.Count(), int64(cfg.rowGroupRows))); err != nil {
		return nil, 0, err
	}
	if lineage {
		projected := ice.SchemaWithRowLineage(tbl.Schema())
		if schema, err = table.SchemaToArrowSchemaWithOptions(projected, table.ArrowSchemaOptions{IncludeFieldIDs: true,
			TableProperties: tbl.Metadata().Properties()}); err != nil {
			return nil, 0, err
		}
		writeOpts = append(writeOpts, table.WithPreserveRowLineage(projected))
	}
	var removed int64
	var filterErr error
	kept := func(yield func(arrow.RecordBatch, error) bool) {
		for rec, err := range recs {
			if err != nil {
				yield(nil, err)
				return
			}
			hits, n, merr := ks.match(rec)
			if merr != nil {
				rec.Release()
				filterErr = merr
				yield(nil, merr)
				return
			}
			removed += int64(n)
			if n > 0 && lineage && ids != nil {
				if err := ids.record(ks, rec, hits); err != nil {
					rec.Release()
					filterErr = err
					yield(nil, err)
					return
				}
			}
			if n == 0 {
				if !yield(rec, nil) {
					return
				}
				continue
			}
			// Zero-copy: yield the runs of rows between the matches as slices of the batch read.
			start := 0
			for row := 0; row <= len(hits); row++ {
				if row < len(hits) && !hits[row] {
					continue
				}
				if row > start {
					if !yield(rec.NewSlice(int64(start), int64(row)), nil) {
						rec.Release()
						return
					}
				}
				start = row + 1
			}
			rec.Release()
		}
	}
	var files []ice.DataFile
	for df, err := range table.WriteRecords(ctx, tbl, schema, iter.Seq2[arrow.RecordBatch, error](kept), writeOpts...) {
		if err != nil {
			return nil, 0, err
		}
		files = append(files, df)
	}
	if filterErr != nil {
		return nil, 0, filterErr
	}
	return files, removed, nil
}

func lineageScan(on bool) []table.ScanOption {
	if on {
		return []table.ScanOption{table.WithRowLineage()}
	}
	return nil
}

// rowIDs maps the keys of the rows copy-on-write rewrites removed to their _row_id (format version 3), so that
// the new version of an upserted row keeps the row id of the row it replaces, as an update does.
type rowIDs struct {
	mu  sync.Mutex
	ids map[string]int64
}

// record notes the _row_id of each row of rec marked in hits.
func (r *rowIDs) record(ks *keySet, rec arrow.RecordBatch, hits []bool) error {
	idx := rec.Schema().FieldIndices(ice.RowIDColumnName)
	if len(idx) == 0 {
		return nil
	}
	rowID, ok := rec.Column(idx[0]).(*array.Int64)
	if !ok {
		return fmt.Errorf("iceberg: copy-on-write: %s is %s, want int64", ice.RowIDColumnName, rec.Column(idx[0]).DataType())
	}
	enc, err := ks.encoder(rec)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var buf []byte
	for row, hit := range hits {
		if hit && rowID.IsValid(row) {
			buf = enc.appendKey(buf[:0], row)
			r.ids[string(buf)] = rowID.Value(row)
		}
	}
	return nil
}

// carryRowIDs gives the rows of new data files whose key a rewrite removed the removed row's _row_id, as an
// update keeps its row id: each file holding such a row is written again, streaming, with the _row_id column set
// for those rows and null for the others (new rows, which take ids from the table), and
// _last_updated_sequence_number null (the commit's). Only the keys of the segment (seg: the keys it upserts or
// deletes) carry an id, each id to one row at most; they are then forgotten: a later segment that upserts one of
// them again finds its id in the row this one wrote. It returns the files to add in place of files, and the
// files it replaced (no snapshot references them once the commit applies).
func carryRowIDs(ctx context.Context, tbl *table.Table, files []ice.DataFile, seg *keySet, ids *rowIDs, cfg cowConfig) (out, replaced []ice.DataFile, err error) {
	defer ids.forget(seg)
	if len(files) == 0 || !ids.any(seg) {
		return files, nil, nil
	}
	projected := ice.SchemaWithRowLineage(tbl.Schema())
	schema, err := table.SchemaToArrowSchemaWithOptions(projected, table.ArrowSchemaOptions{IncludeFieldIDs: true,
		TableProperties: tbl.Metadata().Properties()})
	if err != nil {
		return nil, nil, err
	}
	out = make([]ice.DataFile, 0, len(files))
	for _, df := range files {
		task := table.FileScanTask{File: df, Start: 0, Length: df.FileSizeBytes()}
		hit, err := ids.holds(ctx, tbl, task, seg)
		if err != nil {
			return nil, nil, err
		}
		if !hit {
			out = append(out, df)
			continue
		}
		_, recs, err := tbl.Scan(table.WithRowLineage()).ReadTasks(ctx, []table.FileScanTask{task})
		if err != nil {
			return nil, nil, err
		}
		var applyErr error
		carried := func(yield func(arrow.RecordBatch, error) bool) {
			for rec, err := range recs {
				if err != nil {
					yield(nil, err)
					return
				}
				next, err := ids.apply(seg, rec)
				rec.Release()
				if err != nil {
					applyErr = err
					yield(nil, err)
					return
				}
				if !yield(next, nil) {
					return
				}
			}
		}
		wt, err := withKeyBlooms(tbl, seg.names, min(df.Count(), int64(cfg.rowGroupRows)))
		if err != nil {
			return nil, nil, err
		}
		for f, err := range table.WriteRecords(ctx, wt, schema, iter.Seq2[arrow.RecordBatch, error](carried),
			table.WithClusteredWrite(), table.WithTargetFileSize(cfg.targetFileSize),
			table.WithParquetRowGroupLimit(cfg.rowGroupRows), table.WithRecordBatchBufferSize(2),
			table.WithPreserveRowLineage(projected)) {
			if err != nil {
				return nil, nil, err
			}
			out = append(out, f)
		}
		if applyErr != nil {
			return nil, nil, applyErr
		}
		replaced = append(replaced, df)
	}
	return out, replaced, nil
}

// any reports whether a key of ks has a recorded row id.
func (r *rowIDs) any(ks *keySet) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	small, large := map[string]struct{}(ks.keys), r.ids
	if len(small) > len(large) {
		for k := range large {
			if _, ok := small[k]; ok {
				return true
			}
		}
		return false
	}
	for k := range small {
		if _, ok := large[k]; ok {
			return true
		}
	}
	return false
}

// holds reads only the key columns of a new data file and reports whether a row of it has a key of ks with a
// recorded row id.
func (r *rowIDs) holds(ctx context.Context, tbl *table.Table, task table.FileScanTask, ks *keySet) (bool, error) {
	_, recs, err := tbl.Scan(table.WithSelectedFields(ks.names...)).ReadTasks(ctx, []table.FileScanTask{task})
	if err != nil {
		return false, err
	}
	var buf []byte
	for rec, err := range recs {
		if err != nil {
			return false, err
		}
		enc, err := ks.encoder(rec)
		if err != nil {
			rec.Release()
			return false, err
		}
		r.mu.Lock()
		found := false
		for row := 0; row < int(rec.NumRows()) && !found; row++ {
			buf = enc.appendKey(buf[:0], row)
			if _, mine := ks.keys[string(buf)]; mine {
				_, found = r.ids[string(buf)]
			}
		}
		r.mu.Unlock()
		rec.Release()
		if found {
			return true, nil
		}
	}
	return false, nil
}

// forget drops the ids of the keys in ks.
func (r *rowIDs) forget(ks *keySet) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range ks.keys {
		delete(r.ids, k)
	}
}

// apply returns rec with _row_id set to the recorded id of each row whose key is in ks and has one (null
// otherwise; an id goes to the first such row only) and _last_updated_sequence_number null.
func (r *rowIDs) apply(ks *keySet, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	enc, err := ks.encoder(rec)
	if err != nil {
		return nil, err
	}
	sc := rec.Schema()
	idIdx, seqIdx := sc.FieldIndices(ice.RowIDColumnName), sc.FieldIndices(ice.LastUpdatedSequenceNumberColumnName)
	if len(idIdx) == 0 || len(seqIdx) == 0 {
		return nil, fmt.Errorf("iceberg: copy-on-write: row lineage columns missing from the scan")
	}
	rows := int(rec.NumRows())
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	b.Reserve(rows)
	var buf []byte
	r.mu.Lock()
	for row := 0; row < rows; row++ {
		buf = enc.appendKey(buf[:0], row)
		if _, mine := ks.keys[string(buf)]; !mine {
			b.AppendNull()
			continue
		}
		if id, ok := r.ids[string(buf)]; ok {
			b.Append(id)
			delete(r.ids, string(buf))
		} else {
			b.AppendNull()
		}
	}
	r.mu.Unlock()
	ids := b.NewArray()
	defer ids.Release()
	nulls := array.MakeArrayOfNull(memory.DefaultAllocator, arrow.PrimitiveTypes.Int64, rows)
	defer nulls.Release()
	cols := slices.Clone(rec.Columns())
	cols[idIdx[0]], cols[seqIdx[0]] = ids, nulls
	return array.NewRecordBatch(sc, cols, int64(rows)), nil
}
