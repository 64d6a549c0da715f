package cow

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/compaction"
	"github.com/icewriter/iceberg/internal/commit"
	"github.com/icewriter/iceberg/internal/encode"
	"github.com/icewriter/iceberg/internal/keyindex/keyenc"
	"github.com/icewriter/iceberg/internal/readonce"
	"golang.org/x/sync/errgroup"
)

// Snapshot summary keys of a copy-on-write segment's snapshot: the data files it rewrote, and the candidates
// its planning read.
const (
	SummaryRewritten  = "icewriter.cow-rewritten-files"
	SummaryCandidates = "icewriter.cow-candidate-files"
)

// Config tunes copy-on-write rewrites: how many files are rewritten at once, and the size of the files written.
type Config struct {
	Parallel       int
	TargetFileSize int64
	RowGroupRows   int
	// Shred is the chosen paths of the table's variant columns (nil: none): rewritten files are written in
	// that layout by encode.ShredWrite instead of iceberg-go's writer.
	Shred encode.ShredLayout
}

// Stage is copy-on-write for one attempt of a run's commit. For each segment that upserts or deletes keys
// (commit.Segment.DeleteKeys) it plans which data files hold them (planCopyOnWrite: candidates by pruning, confirmed by
// reading their key columns), rewrites those files without the keys' rows (rewriteWithout), keeps row lineage on
// format version 3 (CarryRowIDs, carryLineage) and stages the segment's snapshots in the attempt's transaction. The committer
// makes one per attempt (commit.CowAttempt), calls Apply for each copy-on-write segment and Note for the others;
// what the stage wrote is then the committer's to keep or delete, by the attempt's outcome.
//
// Each file of the table is rewritten at most once per attempt. The first copy-on-write segment removes the
// keys of every later segment from the files the table held before the attempt; each segment then rewrites,
// for its own keys, only files this attempt added (new rows of earlier segments, and their rewrites). A
// snapshot of an earlier segment may so miss rows that only a later segment of the same catalog commit
// deletes: a replay from its checkpoint deletes them again.
type Stage struct {
	cfg    Config
	branch string

	later   [][]arrow.RecordBatch // per segment: the keys of the copy-on-write segments from it on
	added   map[string]bool       // data files added by this attempt's segments
	started bool
	ids     *RowIDs // format version 3: the row ids of the rows the rewrites removed, by key

	// written are the data files the attempt wrote (rewrites, new-row files carrying row ids); replaced are the
	// run's new-row files it replaced by the latter; rewritten counts the table's files the rewrites replaced.
	written, replaced []ice.DataFile
	rewritten         int
}

// newCowStage starts an attempt over the segments of a run on branch.
func NewStage(cfg Config, branch string, segs []commit.Segment) *Stage {
	r := &Stage{cfg: cfg, branch: branch, later: make([][]arrow.RecordBatch, len(segs)), added: map[string]bool{},
		ids: &RowIDs{ids: map[string]int64{}}}
	var acc []arrow.RecordBatch
	for i := len(segs) - 1; i >= 0; i-- {
		acc = append(slices.Clone(segs[i].DeleteKeys), acc...)
		r.later[i] = acc
	}
	return r
}

// Apply stages copy-on-write segment i (seg, with props as its snapshot summary) in tx: the files holding its
// keys are rewritten without them and replaced, and its new rows are added. Planned on the transaction's
// staged table, so that a retry re-plans against the new head and a later segment sees the files of earlier
// ones. On format version 3, the segment's new files may be written again to carry row ids (seg.DataFiles is
// updated).
func (r *Stage) Apply(ctx context.Context, tx *table.Transaction, i int, seg *commit.Segment, props ice.Properties) error {
	staged, err := tx.StagedTable()
	if err != nil {
		return err
	}
	tbl := staged.Table
	plan, err := r.plan(ctx, tbl, i, seg)
	if err != nil {
		return err
	}
	r.written = append(append(r.written, plan.newFiles...), plan.freshFiles...)
	v3 := tbl.Metadata().Version() >= 3
	if v3 {
		if err := r.carryLineage(ctx, tbl, seg); err != nil {
			return err
		}
	}
	r.Note(seg.DataFiles)
	if len(plan.oldFiles) == 0 {
		return commit.AppendSegment(ctx, tx, tbl.Metadata().Version(), seg, props)
	}
	r.rewritten += len(plan.oldFiles)
	props[SummaryRewritten] = strconv.Itoa(len(plan.oldFiles))
	props[SummaryCandidates] = strconv.Itoa(plan.candidates)
	if !v3 {
		return tx.ReplaceFiles(ctx, plan.oldFiles, append(plan.newFiles, seg.DataFiles...), plan.deadDeletes, props,
			table.WithoutDuplicateCheck())
	}
	// Format version 3. The rewritten files keep every row's _row_id and _last_updated_sequence_number and carry
	// an explicit first_row_id, so one overwrite snapshot replaces the old files with them. The new rows need row
	// ids from the table, which iceberg-go's ReplaceFiles does not assign: a row delta adds them in a second
	// snapshot of the same catalog commit. The first snapshot then holds every row but the upserted keys' new
	// versions; it carries no sequence number or checkpoint token, so a rollback to it leaves LastCheckpoint
	// before this batch and a replay restores them.
	fresh := append(slices.Clone(seg.DataFiles), plan.freshFiles...)
	if len(fresh) == 0 {
		return tx.ReplaceFiles(ctx, plan.oldFiles, plan.newFiles, plan.deadDeletes, props, table.WithoutDuplicateCheck())
	}
	first := ice.Properties{commit.SummaryWriterID: props[commit.SummaryWriterID], commit.SummaryEpoch: props[commit.SummaryEpoch],
		SummaryRewritten: props[SummaryRewritten], SummaryCandidates: props[SummaryCandidates]}
	if err := tx.ReplaceFiles(ctx, plan.oldFiles, plan.newFiles, plan.deadDeletes, first, table.WithoutDuplicateCheck()); err != nil {
		return err
	}
	delete(props, SummaryRewritten)
	delete(props, SummaryCandidates)
	return tx.NewRowDelta(props).AddRows(fresh...).Commit(ctx)
}

// plan plans segment i.
func (r *Stage) plan(ctx context.Context, tbl *table.Table, i int, seg *commit.Segment) (*cowPlan, error) {
	plan := &cowPlan{}
	if !r.started {
		r.started = true
		base, err := planCopyOnWrite(ctx, tbl, r.branch, r.later[i], r.cfg, func(p string) bool { return !r.added[p] }, r.ids)
		if err != nil {
			return nil, err
		}
		plan.merge(base)
	}
	if len(r.added) > 0 {
		own, err := planCopyOnWrite(ctx, tbl, r.branch, seg.DeleteKeys, r.cfg, func(p string) bool { return r.added[p] }, r.ids)
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

// Note records the files a segment added: a later copy-on-write segment of the attempt rewrites them too,
// should they hold its keys.
func (r *Stage) Note(files []ice.DataFile) {
	for _, f := range files {
		r.added[f.FilePath()] = true
	}
}

// Written are the data files the attempt wrote.
func (r *Stage) Written() []ice.DataFile { return r.written }

// Replaced are the run's new-row files the attempt replaced by files carrying row ids.
func (r *Stage) Replaced() []ice.DataFile { return r.replaced }

// Rewritten counts the table's files the attempt's rewrites replaced.
func (r *Stage) Rewritten() int { return r.rewritten }

// KeySet holds the exact keys a copy-on-write segment upserts or deletes.
type KeySet struct {
	names []string
	keys  map[string]struct{}
}

// Holds reports whether the set holds key (its encoded bytes).
func (ks *KeySet) Holds(key string) bool {
	_, ok := ks.keys[key]
	return ok
}

func NewKeySet(recs []arrow.RecordBatch) (*KeySet, error) {
	ks := &KeySet{keys: map[string]struct{}{}}
	var buf []byte
	for _, r := range recs {
		if ks.names == nil {
			for _, f := range r.Schema().Fields() {
				ks.names = append(ks.names, f.Name)
			}
		}
		enc, err := keyenc.NewEncoder(r.Columns())
		if err != nil {
			return nil, err
		}
		for row := 0; row < int(r.NumRows()); row++ {
			buf = enc.AppendKey(buf[:0], row)
			ks.keys[string(buf)] = struct{}{}
		}
	}
	return ks, nil
}

// match marks the rows of rec whose key is in the set (true) and counts them.
func (ks *KeySet) match(rec arrow.RecordBatch) ([]bool, int, error) {
	enc, err := ks.encoder(rec)
	if err != nil {
		return nil, 0, err
	}
	hits := make([]bool, rec.NumRows())
	n := 0
	var buf []byte
	for row := range hits {
		buf = enc.AppendKey(buf[:0], row)
		if _, ok := ks.keys[string(buf)]; ok {
			hits[row] = true
			n++
		}
	}
	return hits, n, nil
}

// encoder encodes the keys of rec's rows.
func (ks *KeySet) encoder(rec arrow.RecordBatch) (*keyenc.Encoder, error) {
	cols := make([]arrow.Array, len(ks.names))
	for i, n := range ks.names {
		idx := rec.Schema().FieldIndices(n)
		if len(idx) == 0 {
			return nil, fmt.Errorf("iceberg: copy-on-write: key column %q missing from the scan", n)
		}
		cols[i] = rec.Column(idx[0])
	}
	return keyenc.NewEncoder(cols)
}

// inRange matches the rows whose column name holds one of vals: the set itself, and the range from its least
// to its greatest value. iceberg-go's metrics evaluator gives up on a set of more than 200 values (every file
// might match, as Java Iceberg's does), so an upsert of more keys than that would make every data file of the
// table a candidate, each read to confirm; the range still prunes the files whose bounds lie outside it.
func inRange[T int32 | int64 | string](name string, vals []T) ice.BooleanExpression {
	in := ice.IsIn(ice.Reference(name), vals...)
	if len(vals) == 0 {
		return in
	}
	return ice.NewAnd(in, ice.GreaterThanEqual(ice.Reference(name), slices.Min(vals)),
		ice.LessThanEqual(ice.Reference(name), slices.Max(vals)))
}

// filter builds a scan filter that matches every row holding one of the keys (an over-approximation for
// multi-column keys). Only used to find candidate files: partition and column-statistics pruning.
func (ks *KeySet) filter(recs []arrow.RecordBatch) ice.BooleanExpression {
	var preds []ice.BooleanExpression
	for i, name := range ks.names {
		var pred ice.BooleanExpression
		switch recs[0].Column(i).(type) {
		case *array.Int64:
			var vals []int64
			for _, r := range recs {
				vals = append(vals, r.Column(i).(*array.Int64).Int64Values()...)
			}
			pred = inRange(name, vals)
		case *array.Int32:
			var vals []int32
			for _, r := range recs {
				vals = append(vals, r.Column(i).(*array.Int32).Int32Values()...)
			}
			pred = inRange(name, vals)
		case *array.String:
			var vals []string
			for _, r := range recs {
				c := r.Column(i).(*array.String)
				for j := 0; j < c.Len(); j++ {
					vals = append(vals, c.Value(j))
				}
			}
			pred = inRange(name, vals)
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
// up to cfg.Parallel at once.
//
// eligible, when not nil, limits the plan to the data files it accepts.
func planCopyOnWrite(ctx context.Context, tbl *table.Table, branch string, keyRecs []arrow.RecordBatch, cfg Config,

	eligible func(path string) bool, ids *RowIDs) (*cowPlan, error) {
	plan := &cowPlan{}
	snap := tbl.Metadata().SnapshotByName(branch)
	if snap == nil || len(keyRecs) == 0 {
		return plan, nil
	}
	ks, err := NewKeySet(keyRecs)
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
	wholeMax := readonce.WholeReadBytes(tbl)
	var mu sync.Mutex
	var rewritten []table.FileScanTask
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, cfg.Parallel))
	for _, task := range candidates {
		g.Go(func() (err error) {
			// The candidate's files are read twice, to confirm a key and to rewrite: opened once, read whole
			// (when small) only for the rewrite.
			once := taskReadOnce(task, wholeMax)
			defer func() {
				if cerr := once.Close(); err == nil {
					err = cerr
				}
			}()
			src := once.Table(tbl)
			hit, err := fileHoldsKey(gctx, src, snap.SnapshotID, task, ks, filt)
			if err != nil || !hit {
				return err
			}
			files, removed, err := rewriteWithout(gctx, tbl, src, task, ks, cfg, lineage, ids)
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
func fileHoldsKey(ctx context.Context, tbl *table.Table, snapID int64, task table.FileScanTask, ks *KeySet, filt ice.BooleanExpression) (bool, error) {
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

// taskReadOnce names the files a scan of task reads (the data file and its delete files) for reading once.
func taskReadOnce(task table.FileScanTask, wholeMax int64) *readonce.Files {
	once := readonce.New(wholeMax)
	once.Add(task.File.FilePath())
	for _, files := range [][]ice.DataFile{task.DeleteFiles, task.EqualityDeleteFiles, task.DeletionVectorFiles} {
		for _, f := range files {
			once.Add(f.FilePath())
		}
	}
	return once
}

// rewriteWithout streams one data file (deletes applied), read through src, into new files of tbl without the
// rows holding a key. src is tbl or a view of it that reads differently (readonce.Files.Table).
//
// The file is read in the table's current schema, not its snapshot's: a column added since (schema evolution
// commits before the run) is read as its initial-default, or null, and written as a column of the new file.
func rewriteWithout(ctx context.Context, tbl, src *table.Table, task table.FileScanTask, ks *KeySet, cfg Config, lineage bool, ids *RowIDs) ([]ice.DataFile, int64, error) {
	writeOpts := []table.WriteRecordOption{table.WithClusteredWrite(), table.WithTargetFileSize(cfg.TargetFileSize),
		table.WithParquetRowGroupLimit(cfg.RowGroupRows), table.WithRecordBatchBufferSize(2)}
	schema, recs, err := src.Scan(lineageScan(lineage)...).ReadTasks(ctx, []table.FileScanTask{task})
	if err != nil {
		return nil, 0, err
	}
	if tbl, err = encode.WithKeyBlooms(tbl, ks.names, min(task.File.Count(), int64(cfg.RowGroupRows))); err != nil {
		return nil, 0, err
	}
	if tbl, err = encode.WithShredInference(tbl, task.File.Count()); err != nil {
		return nil, 0, err
	}
	var projected *ice.Schema
	if lineage {
		projected = ice.SchemaWithRowLineage(tbl.Schema())
		if schema, err = table.SchemaToArrowSchemaWithOptions(projected, table.ArrowSchemaOptions{IncludeFieldIDs: true,
			TableProperties: tbl.Metadata().Properties()}); err != nil {
			return nil, 0, err
		}
		writeOpts = append(writeOpts, table.WithPreserveRowLineage(projected))
	}
	// The write batch is picked on the first batch the scanner reads (writeBatchRows), as the writer picks it on
	// a batch's records: the rewrite writes what it keeps of the scanner's batches of up to 131,072 rows, and a
	// column of distinct strings written that way keeps a dictionary the file it replaces did not have (slower
	// to encode and to read).
	next, stop := iter.Pull2(recs)
	defer stop()
	first, firstErr, found := next()
	taken := !found // first was passed on (or there is none); else released here
	defer func() {
		if !taken && first != nil {
			first.Release()
		}
	}()
	if found && firstErr == nil {
		if n := encode.WriteBatchRows(tbl.Properties(), []arrow.RecordBatch{first}); n > 0 {
			if tbl, err = encode.WithWriteProperties(tbl, ice.Properties{table.ParquetPageRowLimitKey: strconv.Itoa(n)}); err != nil {
				return nil, 0, err
			}
		}
	}
	read := func(yield func(arrow.RecordBatch, error) bool) {
		if taken {
			return
		}
		taken = true
		if !yield(first, firstErr) {
			return
		}
		for {
			rec, err, ok := next()
			if !ok || !yield(rec, err) {
				return
			}
		}
	}
	var removed int64
	var filterErr error
	kept := func(yield func(arrow.RecordBatch, error) bool) {
		for rec, err := range read {
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
	files, err := writeFiles(ctx, tbl, schema, kept, cfg, ks.names, min(task.File.Count(), int64(cfg.RowGroupRows)),
		projected, task.File, writeOpts)
	if err != nil {
		return nil, 0, err
	}
	if filterErr != nil {
		return nil, 0, filterErr
	}
	return files, removed, nil
}

// writeFiles writes a rewrite's records (taken and released as table.WriteRecords does) through iceberg-go's
// writer with opts, or, when the table's variant paths are chosen (cfg.Shred), in that layout with bloom filters
// on keys sized for rows and the lineage schema (nil: none) the opts name.
//
// replaced is the file whose rows are rewritten: the new files get its partition values.
func writeFiles(ctx context.Context, tbl *table.Table, schema *arrow.Schema, recs func(func(arrow.RecordBatch, error) bool),
	cfg Config, keys []string, rows int64, lineage *ice.Schema, replaced ice.DataFile, opts []table.WriteRecordOption) ([]ice.DataFile, error) {
	if cfg.Shred != nil {
		part, err := encode.PartitionOf(tbl, replaced)
		if err != nil {
			return nil, err
		}
		return encode.ShredWrite{Layout: cfg.Shred, TargetFileSize: cfg.TargetFileSize, RowGroupRows: cfg.RowGroupRows,
			BloomKeys: keys, BloomRows: rows, Lineage: lineage, Partition: part}.Write(ctx, tbl, schema, recs)
	}
	var files []ice.DataFile
	for df, err := range table.WriteRecords(ctx, tbl, schema, iter.Seq2[arrow.RecordBatch, error](recs), opts...) {
		if err != nil {
			return nil, err
		}
		files = append(files, df)
	}
	return files, nil
}

// Row lineage for the copy-on-write stage on format version 3: a rewritten file keeps its rows' _row_id
// (withFirstRowID), and an upserted row's new version takes the _row_id of the row it replaces (rowIDs,
// carryRowIDs, Stage.carryLineage), as an update does.

// withFirstRowID returns a copy of a data file written by iceberg-go's WriteRecords with its first_row_id set.
//
// On format-version 3 tables iceberg-go's ReplaceFiles takes only data files with an explicit first_row_id. A
// copy-on-write rewrite writes every row's _row_id as a column (read with lineage, written preserving it), so
// the files it writes need no id from the table: each gets a disjoint slice of the id range of the file it
// replaces, which no other live file holds, and the explicit column wins on read.
func withFirstRowID(meta table.Metadata, df ice.DataFile, firstRowID int64) (ice.DataFile, error) {
	spec := meta.PartitionSpecByID(int(df.SpecID()))
	if spec == nil {
		return nil, fmt.Errorf("iceberg: data file %s: unknown partition spec %d", df.FilePath(), df.SpecID())
	}
	b, err := ice.NewDataFileBuilder(*spec, df.ContentType(), df.FilePath(), df.FileFormat(), df.Partition(),
		encode.PartitionLogicalTypes(meta, spec), nil,
		df.Count(), df.FileSizeBytes())
	if err != nil {
		return nil, fmt.Errorf("iceberg: data file %s: %w", df.FilePath(), err)
	}
	b.ColumnSizes(df.ColumnSizes()).ValueCounts(df.ValueCounts()).NullValueCounts(df.NullValueCounts()).
		NaNValueCounts(df.NaNValueCounts()).LowerBoundValues(df.LowerBoundValues()).
		UpperBoundValues(df.UpperBoundValues()).SplitOffsets(df.SplitOffsets())
	if d := df.DistinctValueCounts(); len(d) > 0 {
		b.DistinctValueCounts(d)
	}
	if k := df.KeyMetadata(); len(k) > 0 {
		b.KeyMetadata(k)
	}
	if s := df.SortOrderID(); s != nil {
		b.SortOrderID(*s)
	}
	return b.FirstRowID(firstRowID).Build(), nil
}

// carryLineage gives the new rows of copy-on-write segment seg the row ids of the rows they replace
// (carryRowIDs), found by this segment's rewrites or, for a later segment of the attempt, by the first one's:
// an upserted row's new version keeps the _row_id of the row it replaces. seg.DataFiles becomes the files to add;
// the files written for it are the attempt's, the files they replace are no longer needed once it commits.
func (r *Stage) carryLineage(ctx context.Context, tbl *table.Table, seg *commit.Segment) error {
	segKeys, err := NewKeySet(seg.DeleteKeys)
	if err != nil {
		return err
	}
	orig := seg.DataFiles
	var replaced []ice.DataFile
	if seg.DataFiles, replaced, _, err = CarryRowIDs(ctx, tbl, orig, segKeys, r.ids, r.cfg, nil); err != nil {
		return err
	}
	if len(replaced) > 0 {
		kept := map[string]bool{}
		for _, f := range orig {
			kept[f.FilePath()] = true
		}
		for _, f := range seg.DataFiles {
			if !kept[f.FilePath()] {
				r.written = append(r.written, f)
			}
		}
		r.replaced = append(r.replaced, replaced...)
	}
	return nil
}

func lineageScan(on bool) []table.ScanOption {
	if on {
		return []table.ScanOption{table.WithRowLineage()}
	}
	return nil
}

// rowIDs maps the keys of the rows copy-on-write rewrites removed to their _row_id (format version 3), so that
// the new version of an upserted row keeps the row id of the row it replaces, as an update does.
type RowIDs struct {
	mu  sync.Mutex
	ids map[string]int64
	// stale are keys whose rows a merge-on-read encoder wrote with an id (the writer's row id column) that the key index did not
	// confirm: the files holding them are written again like those holding a key of ids, with the id of ids
	// or null.
	stale map[string]int64
}

// NewRowIDs returns the row ids to carry: ids by key, and the stale ids a merge-on-read encoder wrote to replace.
func NewRowIDs(ids, stale map[string]int64) *RowIDs { return &RowIDs{ids: ids, stale: stale} }

// has reports whether key has a recorded id, or a stale one to replace. The caller holds mu.
func (r *RowIDs) has(key string) bool {
	if _, ok := r.ids[key]; ok {
		return true
	}
	_, ok := r.stale[key]
	return ok
}

// record notes the _row_id of each row of rec marked in hits.
func (r *RowIDs) record(ks *KeySet, rec arrow.RecordBatch, hits []bool) error {
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
			buf = enc.AppendKey(buf[:0], row)
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
//
// known, when not nil, gives the keys of a file in row order where the caller has them (the key index's new
// files, as the key index knows them), so that only the files to rewrite are read; nil keys: read the file's key columns.
// The rewrite of such a file, one file of the same row count, holds the same keys in the same order (the
// rewrite streams the rows in file order): they are returned in keysOf by the new file's path, so that the
// caller need not read them back either. Each of those reads is two requests to an object store.
func CarryRowIDs(ctx context.Context, tbl *table.Table, files []ice.DataFile, seg *KeySet, ids *RowIDs, cfg Config,

	known func(ice.DataFile) *keyenc.List) (out, replaced []ice.DataFile, keysOf map[string]*keyenc.List, err error) {
	defer ids.forget(seg)
	if len(files) == 0 || !ids.any(seg) {
		return files, nil, nil, nil
	}
	projected := ice.SchemaWithRowLineage(tbl.Schema())
	schema, err := table.SchemaToArrowSchemaWithOptions(projected, table.ArrowSchemaOptions{IncludeFieldIDs: true,
		TableProperties: tbl.Metadata().Properties()})
	if err != nil {
		return nil, nil, nil, err
	}
	out = make([]ice.DataFile, 0, len(files))
	for _, df := range files {
		task := table.FileScanTask{File: df, Start: 0, Length: df.FileSizeBytes()}
		var hit bool
		keys := keysKnown(known, df)
		if keys != nil {
			hit = ids.holdsKnown(keys, seg)
		} else {
			hit, err = ids.holds(ctx, tbl, task, seg)
		}
		if err != nil {
			return nil, nil, nil, err
		}
		if !hit {
			out = append(out, df)
			continue
		}
		_, recs, err := tbl.Scan(table.WithRowLineage()).ReadTasks(ctx, []table.FileScanTask{task})
		if err != nil {
			return nil, nil, nil, err
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
		wt, err := encode.WithKeyBlooms(tbl, seg.names, min(df.Count(), int64(cfg.RowGroupRows)))
		if err == nil {
			wt, err = encode.WithShredInference(wt, df.Count())
		}
		if err != nil {
			return nil, nil, nil, err
		}
		written, err := writeFiles(ctx, wt, schema, carried, cfg, seg.names, min(df.Count(), int64(cfg.RowGroupRows)),
			projected, df, []table.WriteRecordOption{table.WithClusteredWrite(), table.WithTargetFileSize(cfg.TargetFileSize),
				table.WithParquetRowGroupLimit(cfg.RowGroupRows), table.WithRecordBatchBufferSize(2),
				table.WithPreserveRowLineage(projected)})
		if err != nil {
			return nil, nil, nil, err
		}
		if applyErr != nil {
			return nil, nil, nil, applyErr
		}
		// Rolled into several files, the rows' split between them is iceberg-go's: the caller reads those back.
		if keys != nil && len(written) == 1 && written[0].Count() == int64(keys.Len()) {
			if keysOf == nil {
				keysOf = map[string]*keyenc.List{}
			}
			keysOf[written[0].FilePath()] = keys
		}
		out = append(out, written...)
		replaced = append(replaced, df)
	}
	return out, replaced, keysOf, nil
}

// any reports whether a key of ks has a recorded row id (or a stale one).
func (r *RowIDs) any(ks *KeySet) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	small := map[string]struct{}(ks.keys)
	if len(small) > len(r.ids)+len(r.stale) {
		for _, large := range []map[string]int64{r.ids, r.stale} {
			for k := range large {
				if _, ok := small[k]; ok {
					return true
				}
			}
		}
		return false
	}
	for k := range small {
		if r.has(k) {
			return true
		}
	}
	return false
}

// holds reads only the key columns of a new data file and reports whether a row of it has a key of ks with a
// recorded row id.
func (r *RowIDs) holds(ctx context.Context, tbl *table.Table, task table.FileScanTask, ks *KeySet) (bool, error) {
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
			buf = enc.AppendKey(buf[:0], row)
			if _, mine := ks.keys[string(buf)]; mine {
				found = r.has(string(buf))
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

// keysKnown returns known's keys of df (nil: none known).
func keysKnown(known func(ice.DataFile) *keyenc.List, df ice.DataFile) *keyenc.List {
	if known == nil {
		return nil
	}
	return known(df)
}

// holdsKnown is holds on a file whose keys are known, in memory.
func (r *RowIDs) holdsKnown(keys *keyenc.List, ks *KeySet) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, key := range keys.All() {
		if _, mine := ks.keys[string(key)]; mine && r.has(string(key)) {
			return true
		}
	}
	return false
}

// forget drops the ids of the keys in ks.
func (r *RowIDs) forget(ks *KeySet) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range ks.keys {
		delete(r.ids, k)
	}
}

// apply returns rec with _row_id set to the recorded id of each row whose key is in ks and has one (null
// otherwise; an id goes to the first such row only) and _last_updated_sequence_number null.
func (r *RowIDs) apply(ks *KeySet, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
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
		buf = enc.AppendKey(buf[:0], row)
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

// FileHoldsKey reports whether task's data file holds one of the keys of keyRecs, read as the planner confirms
// a candidate (bloom filters first, then the key columns).
func FileHoldsKey(ctx context.Context, tbl *table.Table, snapID int64, task table.FileScanTask, keyRecs []arrow.RecordBatch) (bool, error) {
	ks, err := NewKeySet(keyRecs)
	if err != nil {
		return false, err
	}
	return fileHoldsKey(ctx, tbl, snapID, task, ks, ks.filter(keyRecs))
}
