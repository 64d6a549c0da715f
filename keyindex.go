package iceberg

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	ice "github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/dv"
	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"
)

// DefaultKeyIndexBytes is the memory budget of the key index (see WithKeyIndexBytes).
const DefaultKeyIndexBytes = 64 << 20

// keyIndex maps every key of a merge-on-read v3 table to the data file and row position that hold it, so that
// an upsert or delete is written as a deletion vector on that file instead of an equality delete that readers
// must apply to every older file. It is complete only while it covers the whole table: from the writer's open
// (an empty table, or one whose keys loadKeyIndex read) up to the first commit by someone else that adds or
// removes files. The writer's own compactions move it to the files they write (reindexAfterCompaction); one
// whose commit returned an error (its reply may be lost) drops it. Without it the writer falls back to equality
// deletes (correct, slower to read).
type keyIndex struct {
	limit  int64
	bytes  int64
	base   int64 // the snapshot the index covers (the writer's last commit); -1: empty table
	files  []*indexedFile
	byPath map[string]int32
	keys   map[string][]keyLoc
	over   bool // the budget was exceeded: disable after the current run
}

type keyLoc struct{ file, pos int32 }

type indexedFile struct {
	df     ice.DataFile
	dv     *dv.RoaringPositionBitmap // positions this writer's deletion vectors removed
	dvFile ice.DataFile              // this writer's live deletion vector for the file
}

// fileKeys are the keys of a data file the writer wrote, in row order.
type fileKeys struct {
	df   ice.DataFile
	keys []string
}

const keyEntryOverhead = 64 // map entry, slice header and location, per key

func newKeyIndex(limit int64, base *int64) *keyIndex {
	idx := &keyIndex{limit: limit, base: -1, byPath: map[string]int32{}, keys: map[string][]keyLoc{}}
	if base != nil {
		idx.base = *base
	}
	return idx
}

// remove deletes every row of key and returns their locations.
func (idx *keyIndex) remove(key string) []keyLoc {
	locs := idx.keys[key]
	if len(locs) > 0 {
		delete(idx.keys, key)
		idx.bytes -= int64(len(key)+keyEntryOverhead) * int64(len(locs))
	}
	return locs
}

// add indexes the rows of a new data file.
func (idx *keyIndex) add(fk fileKeys) {
	id := int32(len(idx.files))
	idx.files = append(idx.files, &indexedFile{df: fk.df})
	idx.byPath[fk.df.FilePath()] = id
	for pos, k := range fk.keys {
		idx.keys[k] = append(idx.keys[k], keyLoc{file: id, pos: int32(pos)})
		idx.bytes += int64(len(k) + keyEntryOverhead)
	}
	if idx.bytes > idx.limit {
		idx.over = true
	}
}

// readFileKeys reads back the key columns of a data file, in row order: the positions its rows have there
// (iceberg-go's writer decides how rows roll across files). Columns are found by field id, as Iceberg names
// them (a file keeps the names of its day, and iceberg-go stores a name like "user-id" as "user_x2Did"); by
// name only in a file without field ids.
func readFileKeys(ctx context.Context, tbl *table.Table, df ice.DataFile, ks *keySpec) ([]string, error) {
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	f, err := fs.Open(df.FilePath())
	if err != nil {
		return nil, err
	}
	defer f.Close()
	pr, err := file.NewParquetReader(f)
	if err != nil {
		return nil, fmt.Errorf("iceberg: read keys of %s: %w", df.FilePath(), err)
	}
	defer pr.Close()
	fr, err := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{BatchSize: 64 << 10}, memory.DefaultAllocator)
	if err != nil {
		return nil, err
	}
	var cols []arrow.Array
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	sc := pr.MetaData().Schema
	for i, n := range ks.names {
		idx := -1
		hasIDs := false
		for c := 0; c < sc.NumColumns(); c++ {
			id := sc.Column(c).SchemaNode().FieldID()
			hasIDs = hasIDs || id >= 0
			if id == int32(ks.fieldIDs[i]) {
				idx = c
				break
			}
		}
		if idx < 0 && !hasIDs {
			idx = sc.ColumnIndexByName(n)
		}
		if idx < 0 {
			return nil, fmt.Errorf("iceberg: key column %q (field id %d) not in %s", n, ks.fieldIDs[i], df.FilePath())
		}
		cr, err := fr.GetColumn(ctx, idx)
		if err != nil {
			return nil, err
		}
		rgs := make([]int, pr.NumRowGroups())
		for i := range rgs {
			rgs[i] = i
		}
		chunked, err := fr.ReadColumn(rgs, cr)
		if err != nil {
			return nil, err
		}
		arr, err := concatChunks(chunked)
		chunked.Release()
		if err != nil {
			return nil, err
		}
		cols = append(cols, arr)
	}
	enc, err := newKeyEncoder(cols)
	if err != nil {
		return nil, err
	}
	n := cols[0].Len()
	keys := make([]string, n)
	var buf []byte
	for r := 0; r < n; r++ {
		buf = enc.appendKey(buf[:0], r)
		keys[r] = string(buf)
	}
	return keys, nil
}

func concatChunks(c *arrow.Chunked) (arrow.Array, error) {
	if len(c.Chunks()) == 1 {
		a := c.Chunk(0)
		a.Retain()
		return a, nil
	}
	return array.Concatenate(c.Chunks(), memory.DefaultAllocator)
}

// indexRun applies the run's keyed operations to the key index, in sequence order: each upserted or deleted key
// found in the index becomes a position in a deletion vector on the file that holds it (merged with the vector
// this writer already wrote for that file); a key not in a complete index is new and needs no delete at all.
// Then the run's new rows are indexed. Runs with batches encoded for the index after it was disabled get their
// equality deletes here instead.
func (w *Writer) indexRun(ctx context.Context, tbl *table.Table, run *Run, batches []*batch) error {
	idx := w.idx
	if idx == nil {
		// Batches encoded while the index was on wrote no equality deletes: write them now.
		for _, b := range batches {
			if len(b.keyRecs) == 0 {
				continue
			}
			files, err := w.writeEqualityDeletes(ctx, tbl, b.keyRecs)
			if err != nil {
				return err
			}
			seg := &run.Segments[b.segIdx]
			seg.DeleteFiles = append(seg.DeleteFiles, files...)
			b.keyRecs = nil
		}
		return nil
	}
	base := idx.base
	run.IndexBase = &base
	run.KeyFieldIDs = w.keys.fieldIDs
	pending := map[int32][]int64{}
	for _, b := range batches {
		seg := &run.Segments[b.segIdx]
		seg.FallbackKeys = append(seg.FallbackKeys, b.keyRecs...)
		for _, rec := range b.keyRecs {
			enc, err := newKeyEncoder(rec.Columns())
			if err != nil {
				return err
			}
			var buf []byte
			for r := 0; r < int(rec.NumRows()); r++ {
				buf = enc.appendKey(buf[:0], r)
				for _, l := range idx.remove(string(buf)) {
					pending[l.file] = append(pending[l.file], int64(l.pos))
				}
			}
		}
		for _, fk := range b.fileKeys {
			idx.add(fk)
		}
	}
	if len(pending) == 0 {
		return nil
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return err
	}
	writeFS, ok := fs.(iceio.WriteFileIO)
	if !ok {
		return fmt.Errorf("iceberg: the table's file system cannot write deletion vectors")
	}
	meta := tbl.Metadata()
	writer := dv.NewDVWriter(writeFS, func(id int32) *ice.PartitionSpec { return meta.PartitionSpecByID(int(id)) })
	var removed []ice.DataFile
	merged := map[string]*dv.RoaringPositionBitmap{}
	for fid, positions := range pending {
		f := idx.files[fid]
		if f.dv != nil {
			writer.Load(f.df.FilePath(), f.dv, f.df.SpecID(), f.df.Partition())
			removed = append(removed, f.dvFile)
		}
		if err := writer.Add(f.df.FilePath(), positions, f.df.SpecID(), f.df.Partition()); err != nil {
			return err
		}
		bm := dv.NewRoaringPositionBitmap()
		if f.dv != nil {
			bm.Or(f.dv)
		}
		for _, p := range positions {
			bm.Set(uint64(p))
		}
		merged[f.df.FilePath()] = bm
	}
	lp, err := tbl.LocationProvider()
	if err != nil {
		return err
	}
	dvs, err := writer.Flush(ctx, lp.NewDataLocation("icewriter-dv-"+uuid.NewString()+".puffin"))
	if err != nil {
		return fmt.Errorf("iceberg: write deletion vectors: %w", err)
	}
	last := &run.Segments[len(run.Segments)-1]
	last.DVFiles = append(last.DVFiles, dvs...)
	last.RemovedDVs = append(last.RemovedDVs, removed...)
	w.pendingDVs = merged
	return nil
}

// commitIndex records a committed run in the index; lost means the committer fell back to equality deletes
// because someone else changed the table since the index's snapshot.
func (w *Writer) commitIndex(run *Run, res *CommitResult) {
	idx := w.idx
	if idx == nil {
		return
	}
	if res.IndexLost || idx.over {
		w.mu.Lock()
		w.idx = nil
		w.mu.Unlock()
		w.log.Info("iceberg: key index off; upserts and deletes use equality deletes from now on", "table", w.ident,
			"reason", map[bool]string{true: "the table changed outside this writer", false: "memory budget " + strconv.FormatInt(idx.limit, 10) + " bytes"}[res.IndexLost])
		return
	}
	idx.base = res.SnapshotID
	for _, seg := range run.Segments {
		for _, d := range seg.DVFiles {
			ref := d.ReferencedDataFile()
			if ref == nil {
				continue
			}
			if fid, ok := idx.byPath[*ref]; ok {
				idx.files[fid].dvFile = d
				idx.files[fid].dv = w.pendingDVs[*ref]
			}
		}
	}
	w.pendingDVs = nil
}

// foreignSince reports whether a snapshot after base, made by someone other than writerID, added or removed
// files (maintenance that only rewrites manifests does not count).
func foreignSince(meta table.Metadata, branch string, base int64, writerID string) bool {
	foreign := false
	found := false
	ancestors(meta, branch, func(s *table.Snapshot) bool {
		if s.SnapshotID == base {
			found = true
			return true
		}
		// The writer's own commits keep the index current, except compactions, which move rows to new files:
		// the index is re-based past a compaction it saw succeed, so one met here is someone else's (a zombie
		// with the same ID) or one whose reply was lost.
		if w, _ := summaryProp(s, summaryWriterID); w == writerID {
			if op, _ := summaryProp(s, "icewriter.operation"); op != "compact" {
				return false
			}
		}
		for _, k := range []string{"added-data-files", "added-delete-files", "deleted-data-files", "removed-delete-files"} {
			if v, _ := summaryProp(s, k); v != "" && v != "0" {
				foreign = true
				return true
			}
		}
		return false
	})
	return foreign || (!found && base >= 0)
}

// loadKeyIndex builds the key index of a table that already holds rows (a writer reopening its table): the key
// columns of every live data file, minus the rows its deletion vector removes. It returns nil with the reason
// when the index cannot be complete or would not fit the budget: equality or position delete files (their rows
// have no place in the index), or more rows than the budget holds.
func loadKeyIndex(ctx context.Context, tbl *table.Table, branch string, ks *keySpec, limit int64, parallel int) (*keyIndex, string, error) {
	meta := tbl.Metadata()
	snap := meta.SnapshotByName(branch)
	if snap == nil {
		return newKeyIndex(limit, nil), "", nil
	}
	// The summary answers the common refusals without reading a manifest.
	if v, ok := summaryProp(snap, "total-equality-deletes"); ok && v != "0" {
		return nil, "the table has equality delete files", nil
	}
	if v, ok := summaryProp(snap, "total-records"); ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n*keyEntryOverhead > limit {
			return nil, fmt.Sprintf("%d rows exceed the key index budget of %d bytes (WithKeyIndexBytes)", n, limit), nil
		}
	}
	tasks, err := tbl.Scan(table.WithSnapshotID(snap.SnapshotID)).PlanFiles(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("iceberg: key index: plan: %w", err)
	}
	var rows int64
	for _, t := range tasks {
		if len(t.EqualityDeleteFiles) > 0 || len(t.DeleteFiles) > 0 {
			return nil, "the table has equality or position delete files", nil
		}
		rows += t.File.Count()
	}
	if rows*keyEntryOverhead > limit {
		return nil, fmt.Sprintf("%d rows exceed the key index budget of %d bytes (WithKeyIndexBytes)", rows, limit), nil
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, "", err
	}
	type loaded struct {
		keys []string
		dv   *dv.RoaringPositionBitmap
	}
	out := make([]loaded, len(tasks))
	var used atomic.Int64 // bytes of the keys read so far: stop reading past the budget
	errOver := errors.New("over budget")
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, parallel))
	for i, t := range tasks {
		g.Go(func() error {
			keys, err := readFileKeys(gctx, tbl, t.File, ks)
			if err != nil {
				return err
			}
			var n int64
			for _, k := range keys {
				n += int64(len(k) + keyEntryOverhead)
			}
			if used.Add(n) > limit {
				return errOver
			}
			out[i].keys = keys
			if len(t.DeletionVectorFiles) > 0 {
				bm, err := dv.ReadDV(fs, t.DeletionVectorFiles[0])
				if err != nil {
					return fmt.Errorf("iceberg: key index: deletion vector of %s: %w", t.File.FilePath(), err)
				}
				out[i].dv = bm
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		if errors.Is(err, errOver) {
			return nil, fmt.Sprintf("the table's keys exceed the key index budget of %d bytes (WithKeyIndexBytes)", limit), nil
		}
		return nil, "", err
	}
	idx := newKeyIndex(limit, &snap.SnapshotID)
	for i, t := range tasks {
		id := int32(len(idx.files))
		f := &indexedFile{df: t.File}
		if out[i].dv != nil {
			f.dv, f.dvFile = out[i].dv, t.DeletionVectorFiles[0]
		}
		idx.files = append(idx.files, f)
		idx.byPath[t.File.FilePath()] = id
		for pos, k := range out[i].keys {
			if f.dv != nil && f.dv.Contains(uint64(pos)) {
				continue
			}
			idx.keys[k] = append(idx.keys[k], keyLoc{file: id, pos: int32(pos)})
			idx.bytes += int64(len(k) + keyEntryOverhead)
		}
		if idx.bytes > idx.limit {
			return nil, fmt.Sprintf("the table's keys exceed the key index budget of %d bytes (WithKeyIndexBytes)", limit), nil
		}
	}
	return idx, "", nil
}
