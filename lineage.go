package iceberg

import (
	"context"
	"fmt"
	"iter"
	"maps"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/icewriter/iceberg/internal/commit"
	"github.com/icewriter/iceberg/internal/encode"
	"github.com/icewriter/iceberg/internal/keyindex"
	"github.com/icewriter/iceberg/internal/keyindex/keyenc"
)

// Row lineage for the copy-on-write stage on format version 3: a rewritten file keeps its rows' _row_id
// (withFirstRowID), and an upserted row's new version takes the _row_id of the row it replaces (rowIDs,
// carryRowIDs, cowStage.carryLineage), as an update does.

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
func (r *cowStage) carryLineage(ctx context.Context, tbl *table.Table, seg *Segment) error {
	segKeys, err := newKeySet(seg.DeleteKeys)
	if err != nil {
		return err
	}
	orig := seg.DataFiles
	var replaced []ice.DataFile
	if seg.DataFiles, replaced, _, err = carryRowIDs(ctx, tbl, orig, segKeys, r.ids, r.cfg, nil); err != nil {
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
type rowIDs struct {
	mu  sync.Mutex
	ids map[string]int64
	// stale are keys whose rows a merge-on-read encoder wrote with an id (encodeRowIDs) that apply did not
	// confirm: the files holding them are written again like those holding a key of ids, with the id of ids
	// or null.
	stale map[string]int64
}

// has reports whether key has a recorded id, or a stale one to replace. The caller holds mu.
func (r *rowIDs) has(key string) bool {
	if _, ok := r.ids[key]; ok {
		return true
	}
	_, ok := r.stale[key]
	return ok
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
// files: keyStage.fileKeys), so that only the files to rewrite are read; nil keys: read the file's key columns.
// The rewrite of such a file, one file of the same row count, holds the same keys in the same order (the
// rewrite streams the rows in file order): they are returned in keysOf by the new file's path, so that the
// caller need not read them back either. Each of those reads is two requests to an object store.
func carryRowIDs(ctx context.Context, tbl *table.Table, files []ice.DataFile, seg *keySet, ids *rowIDs, cfg cowConfig,
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
		wt, err := encode.WithKeyBlooms(tbl, seg.names, min(df.Count(), int64(cfg.rowGroupRows)))
		if err != nil {
			return nil, nil, nil, err
		}
		var written []ice.DataFile
		for f, err := range table.WriteRecords(ctx, wt, schema, iter.Seq2[arrow.RecordBatch, error](carried),
			table.WithClusteredWrite(), table.WithTargetFileSize(cfg.targetFileSize),
			table.WithParquetRowGroupLimit(cfg.rowGroupRows), table.WithRecordBatchBufferSize(2),
			table.WithPreserveRowLineage(projected)) {
			if err != nil {
				return nil, nil, nil, err
			}
			written = append(written, f)
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
func (r *rowIDs) any(ks *keySet) bool {
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
func (r *rowIDs) holdsKnown(keys *keyenc.List, ks *keySet) bool {
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

// carryRowIDs keeps row lineage for a merge-on-read batch (format version 3): each new row of batch b (in
// segment seg) whose key replaced a row of known _row_id (carried, by key; the key index's) takes that id, as
// an update keeps its row id, so a changelog reader sees an update where it would see a delete and an insert.
// The batch's data files that hold such a row are written again with an explicit _row_id column (carryRowIDs:
// the id for those rows, null for the others, which take ids from the table) and replace the originals in the
// segment and the batch; the originals, uploaded and never committed, are deleted. It returns the keys of the
// batch's files in row order after the rewrite, and per file the explicit ids by position.
func (k *keyStage) carryRowIDs(ctx context.Context, tbl *table.Table, seg *Segment, b *batch, carried map[string]int64) ([]keyindex.FileKeys, []map[int32]int64, error) {
	ks, err := newKeySet(b.keys.keyRecs)
	if err != nil {
		return nil, nil, err
	}
	want := maps.Clone(carried) // carryRowIDs consumes the ids it gives
	files := make([]ice.DataFile, len(b.keys.fileKeys))
	known := make(map[string]keyindex.FileKeys, len(b.keys.fileKeys))
	for i, fk := range b.keys.fileKeys {
		files[i] = fk.DF
		known[fk.DF.FilePath()] = fk
	}
	out, replaced, keysOf, err := carryRowIDs(ctx, tbl, files, ks, &rowIDs{ids: carried, stale: b.keys.rowIDs}, k.rewrite, func(df ice.DataFile) *keyenc.List {
		if fk, ok := known[df.FilePath()]; ok {
			return &fk.Keys
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if len(replaced) == 0 {
		return b.keys.fileKeys, nil, nil
	}
	fks := make([]keyindex.FileKeys, len(out))
	ids := make([]map[int32]int64, len(out))
	var added []ice.DataFile
	for i, f := range out {
		if fk, ok := known[f.FilePath()]; ok {
			fks[i] = fk
			continue
		}
		added = append(added, f)
		var keys keyenc.List
		if kl, ok := keysOf[f.FilePath()]; ok {
			keys = *kl
		} else if keys, err = keyindex.ReadFileKeys(ctx, tbl, f, k.spec.columns()); err != nil {
			return nil, nil, err
		}
		fks[i] = keyindex.FileKeys{DF: f, Keys: keys}
		// The ids go to the first row of each key, in file order, as rowIDs.apply gave them.
		for pos, key := range keys.All() {
			if _, mine := ks.keys[string(key)]; !mine {
				continue
			}
			if id, ok := want[string(key)]; ok {
				if ids[i] == nil {
					ids[i] = map[int32]int64{}
				}
				ids[i][int32(pos)] = id
				delete(want, string(key))
			}
		}
	}
	gone := make(map[string]bool, len(replaced))
	paths := make([]string, len(replaced))
	for i, f := range replaced {
		gone[f.FilePath()] = true
		paths[i] = f.FilePath()
	}
	keep := func(fs []ice.DataFile) []ice.DataFile {
		return append(slices.DeleteFunc(slices.Clone(fs), func(f ice.DataFile) bool { return gone[f.FilePath()] }), added...)
	}
	seg.DataFiles, b.enc.files = keep(seg.DataFiles), keep(b.enc.files)
	removePaths(ctx, k.log, tbl, paths)
	return fks, ids, nil
}

// learnFirstRowIDs records the first_row_id the table gave the data files a committed run added (format
// version 3: a row delta assigns them), read from the manifests its snapshots added (those after prev, the
// index's base before the run), so that the rows of those files have known ids for later upserts to keep.
// A manifest that cannot be read leaves its files' ids unknown: those upserts then get new ids.
func learnFirstRowIDs(ctx context.Context, tbl *table.Table, idx *keyindex.Index, branch string, prev int64) {
	fs, err := tbl.FS(ctx)
	if err != nil {
		return
	}
	meta := tbl.Metadata()
	commit.Ancestors(meta, branch, func(s *table.Snapshot) bool {
		if s.SnapshotID == prev {
			return true
		}
		manifests, err := s.Manifests(fs)
		if err != nil {
			return true
		}
		for _, m := range manifests {
			if m.SnapshotID() != s.SnapshotID || m.ManifestContent() != ice.ManifestContentData {
				continue
			}
			entries, err := m.FetchEntries(fs, false)
			if err != nil {
				continue
			}
			for _, e := range entries {
				if first := e.DataFile().FirstRowID(); first != nil && e.Status() == ice.EntryStatusADDED {
					idx.SetFirstRowID(e.DataFile().FilePath(), *first)
				}
			}
		}
		return false
	})
}
