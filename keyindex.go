package iceberg

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	ice "github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/dv"
	"github.com/icewriter/iceberg/internal/arrowx"
	"github.com/icewriter/iceberg/internal/keyindex"
	"github.com/icewriter/iceberg/internal/keyindex/keyenc"
	"github.com/icewriter/iceberg/internal/keyindex/store"
	"golang.org/x/sync/errgroup"

	"github.com/icewriter/iceberg/internal/commit"
)

// DefaultKeyIndexBytes is the memory budget of the key index (see WithKeyIndexBytes).
const DefaultKeyIndexBytes = 64 << 20

// keyIndex maps every key of a merge-on-read table (format version 2 or 3) to the data file and row position
// that hold it, so that an upsert or delete is written as a deletion vector (v3) or a position delete file (v2)
// on that file instead of an equality delete that readers must apply to every older file. It is complete only while it covers the whole table: from the writer's open
// (an empty table, or one whose keys loadKeyIndex read) up to the first commit by someone else that adds or
// removes files. The writer's own compactions move it to the files they write (keyStage.rebase); one whose
// commit returned an error (its reply may be lost) drops it. Without it the writer falls back to equality
// deletes (correct, slower to read). keyIndex is the data structure alone: keyStage owns it, does its I/O and
// serializes its changes.
type keyIndex struct {
	limit int64
	bytes int64
	pool  *memPool     // a Router's key index budget, shared by its tables (nil: limit is this index's own)
	held  atomic.Int64 // bytes, for Stats (read without the key stage's lock)
	// spilled is the size of the keys' runs on disk (store.Store.SpilledBytes), for Stats.
	spilled atomic.Int64
	base    int64          // the snapshot the index covers (the writer's last commit); -1: empty table
	files   []*indexedFile // by id; nil once forgotten
	byPath  map[string]int32
	keys    store.Store // every live row by key: in memory, and spilled to local disk past the budget
	// tableBytes is what keys held when bytes last counted it (account): bytes is that plus what each file's
	// metadata holds (indexedFile.mem).
	tableBytes int64
	over       bool  // the budget was exceeded even after spilling: disable after the current run
	spillErr   error // why the last spill failed, for the log
	// stale: a run's outcome left the index unsure of the table (it fell back to equality deletes, or its
	// snapshot could not be found to tell): the next run catches up first (catchUpLocked), which also takes
	// each file's live vector from the table.
	stale bool
	// superseded are this writer's position delete files (format version 2) that later ones of the same data
	// files replaced and that are still live: removed together, a batch at a time (supersededBy).
	superseded []ice.DataFile
}

type indexedFile struct {
	df keyindex.FileRef
	// dv holds every position deleted: what the file's next deletion vector (v3) or position delete file (v2)
	// must hold.
	dv *dv.RoaringPositionBitmap
	// dvFile is the delete file the next one replaces (nil: none): the file's live deletion vector (v3), or on
	// v2 the position delete file this writer wrote for it last, while that is live.
	dvFile ice.DataFile
	// inherited (format version 2) are the other file-scoped position delete files live on the data file when
	// the index read its deletes (load, catch-up): another writer's, or this writer's before a restart or a
	// commit the index could not record. dv holds their positions, so the next position delete file the index
	// writes for the data file supersedes them as it does dvFile. Position deletes that name other data files
	// too stay live.
	inherited []ice.DataFile
	// applied names the position and equality delete files whose rows the index removed (catchUpLocked reads
	// the file again only for deletes not named here).
	applied map[string]struct{}
	// Row lineage (format version 3), for merge-on-read upserts that keep the replaced row's _row_id: the
	// explicit _row_id of the rows this writer wrote with one (ids, by position), and the first_row_id the
	// table gave the file (its other rows' ids follow from it), known only for files this writer added by a row
	// delta (learnFirstRowIDs); files loaded from the table or written by a compaction may carry explicit ids
	// the index does not know, so their rows' ids count as unknown.
	ids        keyindex.RowIDs
	firstRowID int64
	hasFirst   bool
	// mem is what the index counts for the file besides its keys (memBytes, when last counted: recount).
	mem int64
}

// rowID returns the _row_id of the row at pos, if the index knows it.
func (f *indexedFile) rowID(pos int32) (int64, bool) {
	if id, ok := f.ids.Get(pos); ok {
		return id, true
	}
	if f.hasFirst {
		return f.firstRowID + int64(pos), true
	}
	return 0, false
}

// keyEntryOverhead is what the index holds per key besides the key's bytes: its slot and a share of the buckets
// (store.Table), with room for the buckets' growth. It estimates whether a table's rows fit the budget before
// they are read; the index counts what it holds (store.Table.Size).
const keyEntryOverhead = store.SlotBytes + 16

func newKeyIndex(limit int64, base *int64) *keyIndex {
	idx := &keyIndex{limit: limit, base: -1, byPath: map[string]int32{}, keys: store.New()}
	if base != nil {
		idx.base = *base
	}
	return idx
}

// close gives the index's bytes back to the router's pool and removes its spilled runs.
func (idx *keyIndex) close() {
	idx.pool.add(-idx.bytes)
	idx.bytes = 0
	idx.held.Store(0)
	idx.keys.Close()
	idx.spilled.Store(0)
}

// remove deletes every row of key and appends their locations to dst.
func (idx *keyIndex) remove(dst []store.Loc, key []byte) []store.Loc {
	return idx.keys.Remove(dst, key)
}

// account counts the bytes the key table holds now (it grows as rows are added and shrinks only when its
// arena is compacted).
func (idx *keyIndex) account() {
	n := idx.keys.Size()
	idx.grow(n - idx.tableBytes)
	idx.tableBytes = n
	idx.spilled.Store(idx.keys.SpilledBytes())
}

// grow counts n bytes more (negative: fewer) held by the index, in the router's pool too.
func (idx *keyIndex) grow(n int64) {
	idx.bytes += n
	idx.held.Store(idx.bytes)
	idx.pool.add(n)
}

// indexBytes returns the bytes the key index holds (0: off).
func (k *keyStage) indexBytes() int64 {
	if idx := k.idx.Load(); idx != nil {
		return idx.held.Load()
	}
	return 0
}

// spilledBytes returns the size of the key index's runs on local disk (0: none, or the index is off).
func (k *keyStage) spilledBytes() int64 {
	if idx := k.idx.Load(); idx != nil {
		return idx.spilled.Load()
	}
	return 0
}

// full reports whether the index is past its budget: its own, or the router's pool.
func (idx *keyIndex) full() bool {
	if idx.pool != nil {
		return idx.pool.over()
	}
	return idx.bytes > idx.limit
}

// budget names the budget an index that went past it exceeded, for the log.
func (idx *keyIndex) budget() string {
	if idx.pool != nil {
		return "the router's key index budget of " + strconv.FormatInt(idx.pool.limit, 10) +
			" bytes shared by its tables (WithKeyIndexBytes)"
	}
	return "memory budget " + strconv.FormatInt(idx.limit, 10) + " bytes (WithKeyIndexBytes)"
}

// add indexes the rows of a new data file.
func (idx *keyIndex) add(fk *keyindex.FileKeys) { idx.addRowIDs(fk, keyindex.RowIDs{}) }

// addRowIDs indexes the rows of a new data file some of whose rows carry the explicit row ids ids.
func (idx *keyIndex) addRowIDs(fk *keyindex.FileKeys, ids keyindex.RowIDs) {
	idx.addRows(&indexedFile{df: keyindex.NewFileRef(fk.DF), ids: ids}, &fk.Keys)
	idx.checkBudget()
}

// checkBudget spills the in-memory keys to a run on local disk when the index is past its budget; an index
// still past it (its files' metadata and the runs' fences alone are too much, or the router's other tables hold
// the pool) or whose spill failed is over: it goes off after the current run.
func (idx *keyIndex) checkBudget() {
	if !idx.full() {
		return
	}
	if err := idx.keys.Spill(); err != nil {
		idx.spillErr = err // the keys stay in memory: the index is right, only over
	}
	idx.account()
	if idx.full() {
		idx.over = true
	}
}

// addRowsChunk is how many rows addRows indexes between two looks at the budget: a data file of millions of
// rows would otherwise take the in-memory table far past the budget before its keys could spill.
const addRowsChunk = 1 << 16

// addRows indexes a data file and its rows (keys, in row order) but those its f.dv deletes, spilling between
// chunks of addRowsChunk rows when the index passes its budget.
func (idx *keyIndex) addRows(f *indexedFile, keys *keyenc.List) {
	id := int32(len(idx.files))
	idx.files = append(idx.files, f)
	idx.byPath[f.df.FilePath()] = id
	for from := 0; from < keys.Len(); from += addRowsChunk {
		to := min(from+addRowsChunk, keys.Len())
		if from > 0 {
			idx.account()
			idx.checkBudget()
		}
		idx.keys.Reserve(to-from, keys.Span(from, to))
		for pos := from; pos < to; pos++ {
			if f.dv != nil && f.dv.Contains(uint64(pos)) {
				continue
			}
			idx.keys.Add(keys.Key(pos), store.Loc{File: id, Pos: int32(pos)})
		}
	}
	idx.recount(f)
	idx.account()
}

// forget removes data files from the index (a compaction rewrote them), with the locations of their rows.
func (idx *keyIndex) forget(paths map[string]struct{}) {
	gone := map[int32]bool{}
	for p := range paths {
		if id, ok := idx.byPath[p]; ok {
			gone[id] = true
			delete(idx.byPath, p)
		}
	}
	if len(gone) == 0 {
		return
	}
	idx.keys.Forget(func(file int32) bool { return gone[file] })
	// No location names them any more: what their metadata held goes back to the budget.
	for id := range gone {
		idx.grow(-idx.files[id].mem)
		idx.files[id] = nil
	}
	idx.account()
}

// readFileKeys reads back the key columns of a data file, in row order: the positions its rows have there
// (iceberg-go's writer decides how rows roll across files). Columns are found by field id, as Iceberg names
// them (a file keeps the names of its day, and iceberg-go stores a name like "user-id" as "user_x2Did"); by
// name only in a file without field ids.
func readFileKeys(ctx context.Context, tbl *table.Table, df ice.DataFile, ks *keySpec) (keyenc.List, error) {
	var none keyenc.List
	fs, err := tbl.FS(ctx)
	if err != nil {
		return none, err
	}
	f, err := fs.Open(df.FilePath())
	if err != nil {
		return none, err
	}
	defer f.Close()
	pr, err := file.NewParquetReader(f)
	if err != nil {
		return none, fmt.Errorf("iceberg: read keys of %s: %w", df.FilePath(), err)
	}
	defer pr.Close()
	fr, err := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{BatchSize: 64 << 10}, memory.DefaultAllocator)
	if err != nil {
		return none, err
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
			return none, fmt.Errorf("iceberg: key column %q (field id %d) not in %s", n, ks.fieldIDs[i], df.FilePath())
		}
		cr, err := fr.GetColumn(ctx, idx)
		if err != nil {
			return none, err
		}
		rgs := make([]int, pr.NumRowGroups())
		for i := range rgs {
			rgs[i] = i
		}
		chunked, err := fr.ReadColumn(rgs, cr)
		if err != nil {
			return none, err
		}
		arr, err := arrowx.Concat(chunked)
		chunked.Release()
		if err != nil {
			return none, err
		}
		cols = append(cols, arr)
	}
	enc, err := keyenc.NewEncoder(cols)
	if err != nil {
		return none, err
	}
	n := cols[0].Len()
	var keys keyenc.List
	for r := range n {
		keys.AppendKey(enc, r)
		if r == 0 { // most keys have one width: size the buffer once
			keys.Grow(n * keys.Span(0, 1))
		}
	}
	return keys, nil
}

// load opens the key index of a merge-on-read writer with a key on a format-v2 or v3 table (a positive
// WithKeyIndexBytes): empty on an empty table; on one that holds rows (typically this writer's, reopened) read
// from the key columns of its live data files (loadKeyIndex), spilling to local disk past the budget, so that
// upserts stay deletion vectors across restarts. An index still past its budget after spilling stays off
// (logged). The error is that of a read cut short by ctx: any other failure costs read speed (equality deletes
// are always right), not the writer.
func (k *keyStage) load(ctx context.Context, tbl *table.Table) error {
	if k.spec == nil || k.cow || k.layoutErr != nil || tbl.Metadata().Version() < 2 || k.limit <= 0 {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.dropLocked("", nil) // an index loaded before (a bulk phase's end reloads it) gives its bytes back
	if tableIsEmpty(tbl) {
		k.idx.Store(k.newIndex(commit.HeadID(tbl.Metadata(), k.branch)))
		return nil
	}
	idx := k.newIndex(nil)
	reason, err := loadKeyIndex(ctx, tbl, k.branch, k.spec, idx, k.parallel)
	if err == nil && reason == "" {
		k.idx.Store(idx)
		return nil
	}
	idx.close()
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		reason = err.Error()
	}
	k.log.Info("iceberg: key index off; upserts and deletes use equality deletes", "table", k.ident, "reason", reason)
	return nil
}

// newIndex returns an empty key index with the stage's budget (its own, or the router's pool) and spill
// directory, covering base (nil: an empty table).
func (k *keyStage) newIndex(base *int64) *keyIndex {
	idx := newKeyIndex(k.limit, base)
	idx.pool = k.pool
	idx.keys.Dir = k.spillDir
	return idx
}

// runDVs are the deletion vectors of a run in flight, by data file, each merged with the vector it replaces:
// what apply hands to committed.
type runDVs map[string]*dv.RoaringPositionBitmap

// apply applies a run's keyed operations to the key index, in sequence order: each upserted or deleted key
// found in the index becomes a position in a deletion vector on the file that holds it (merged with the vector
// this writer already wrote for that file); a key not in a complete index is new and needs no delete at all.
// Then the run's new rows are indexed. It sets the run's IndexBase and KeyFieldIDs, and each segment's
// FallbackKeys (the committer's equality deletes should the table change outside the writer before the commit);
// the vectors go to the last segment. With the index off, batches encoded while it was on get their equality
// deletes here instead. The vectors returned go to committed once the run commits.
func (k *keyStage) apply(ctx context.Context, tbl *table.Table, run *Run, batches []*batch) (runDVs, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	idx := k.idx.Load()
	if idx != nil && (idx.stale || commit.ForeignSince(tbl.Metadata(), k.branch, idx.base, k.writerID)) {
		if err := k.catchUpLocked(ctx, tbl, idx); err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			k.dropLocked("catching up with others' commits", err)
			idx = nil
		}
	}
	if idx == nil {
		// Batches encoded while the index was on wrote no equality deletes: write them now.
		for _, b := range batches {
			if len(b.keys.keyRecs) == 0 {
				continue
			}
			seg := &run.Segments[b.segIdx]
			if len(b.keys.rowIDs) > 0 {
				// The ids the encoder wrote cannot be checked (a batch ahead may have deleted a key and this one
				// inserted it anew): write the files again without them, as if the index had been off then.
				if _, _, err := k.carryRowIDs(ctx, tbl, seg, b, nil); err != nil {
					return nil, err
				}
			}
			files, err := k.uncovered(ctx, tbl, b.keys.keyRecs, &seg.DeleteKeys)
			if err != nil {
				return nil, err
			}
			seg.DeleteFiles = append(seg.DeleteFiles, files...)
			b.keys.keyRecs = nil
		}
		return nil, nil
	}
	base := idx.base
	run.IndexBase = &base
	run.Deletes = k.deletes
	run.KeyFieldIDs = k.spec.fieldIDs
	pending := map[int32][]int64{}
	lineage := tbl.Metadata().Version() >= 3
	var buf []byte       // a key
	var locs []store.Loc // its rows
	for _, b := range batches {
		seg := &run.Segments[b.segIdx]
		seg.FallbackKeys = append(seg.FallbackKeys, b.keys.keyRecs...)
		// carried: the _row_id of each key's replaced row, where the index knows it (format version 3).
		var carried map[string]int64
		for _, rec := range b.keys.keyRecs {
			enc, err := keyenc.NewEncoder(rec.Columns())
			if err != nil {
				return nil, err
			}
			for r := 0; r < int(rec.NumRows()); r++ {
				buf = enc.AppendKey(buf[:0], r)
				locs = idx.remove(locs[:0], buf)
				for _, l := range locs {
					pending[l.File] = append(pending[l.File], int64(l.Pos))
					if id, ok := idx.files[l.File].rowID(l.Pos); ok && lineage {
						if carried == nil {
							carried = map[string]int64{}
						}
						carried[string(buf)] = id
					}
				}
			}
		}
		fks := b.keys.fileKeys
		var ids []map[int32]int64
		switch {
		case len(b.keys.rowIDs) > 0 && sameRowIDs(carried, b.keys.rowIDs):
			ids = rowIDsByFile(fks, b.keys.rowIDs) // the encoder wrote them (encodeRowIDs)
		case len(carried) > 0 || len(b.keys.rowIDs) > 0:
			// The encoder could not tell, or an earlier batch changed a key since: write the column again.
			var err error
			if fks, ids, err = k.carryRowIDs(ctx, tbl, seg, b, carried); err != nil {
				return nil, err
			}
		}
		for i := range fks {
			if i < len(ids) && len(ids[i]) > 0 {
				idx.addRowIDs(&fks[i], keyindex.NewRowIDs(ids[i]))
				continue
			}
			idx.add(&fks[i])
		}
	}
	// The rows removed carry no id any more (the upserts' new rows carry them now).
	for fid, positions := range pending {
		if f := idx.files[fid]; f.ids.Len() > 0 {
			dead := make(map[int32]struct{}, len(positions))
			for _, p := range positions {
				dead[int32(p)] = struct{}{}
			}
			f.ids.Drop(func(p int32) bool { _, ok := dead[p]; return ok })
			idx.recount(f)
		}
	}
	if idx.keys.Err() != nil {
		// A spilled run could not be read: keys it holds may have gone unplaced, so the run cannot commit.
		return nil, idx.keys.Err()
	}
	if len(pending) == 0 {
		return nil, nil
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	writeFS, ok := fs.(iceio.WriteFileIO)
	if !ok {
		return nil, fmt.Errorf("iceberg: the table's file system cannot write deletion vectors")
	}
	meta := tbl.Metadata()
	var added, removed []ice.DataFile
	merged := runDVs{}
	for fid, positions := range pending {
		f := idx.files[fid]
		bm := dv.NewRoaringPositionBitmap()
		if f.dv != nil {
			bm.Or(f.dv)
		}
		if f.dvFile != nil { // a file whose deletes were equality deletes or others' position deletes has none to replace
			removed = append(removed, f.dvFile)
		}
		removed = append(removed, f.inherited...)
		for _, p := range positions {
			bm.Set(uint64(p))
		}
		merged[f.df.FilePath()] = bm
	}
	lp, err := tbl.LocationProvider()
	if err != nil {
		return nil, err
	}
	if meta.Version() >= 3 {
		writer := dv.NewDVWriter(writeFS, func(id int32) *ice.PartitionSpec { return meta.PartitionSpecByID(int(id)) })
		for fid := range pending {
			f := idx.files[fid]
			writer.Load(f.df.FilePath(), merged[f.df.FilePath()], f.df.SpecID(), f.df.Partition())
		}
		if added, err = writer.Flush(ctx, lp.NewDataLocation("icewriter-dv-"+k.files.next().String()+".puffin")); err != nil {
			return nil, fmt.Errorf("iceberg: write deletion vectors: %w", err)
		}
	} else if added, err = k.writePositionDeletes(ctx, writeFS, tbl, lp, idx, pending, merged); err != nil {
		return nil, err
	}
	last := &run.Segments[len(run.Segments)-1]
	last.DVFiles = append(last.DVFiles, added...)
	if meta.Version() < 3 {
		removed = idx.supersededBy(removed, k.supersedeBatch)
	}
	last.RemovedDVs = append(last.RemovedDVs, removed...)
	return merged, nil
}

// committed records a committed run in the index: its snapshot becomes the index's base, its vectors (from
// apply) the live ones of their files, and on format version 3 the first row ids of its data files are learnt
// (learnFirstRowIDs). The index goes off when the committer fell back to equality deletes
// (res.IndexLost: someone else changed the table since the index's base) or when the run took it past its
// memory budget.
func (k *keyStage) committed(ctx context.Context, run *Run, res *CommitResult, merged runDVs) {
	k.mu.Lock()
	defer k.mu.Unlock()
	idx := k.idx.Load()
	if idx == nil {
		return
	}
	if idx.over {
		k.dropLocked(idx.budget(), idx.spillErr)
		return
	}
	if res.IndexLost {
		// Someone committed between the table apply placed the run on and the commit: the committer wrote
		// equality deletes on the run's keys instead of its vectors. The index still says where every row it
		// knows is (the run's keys were removed, its new files indexed); its base stays, so the next run catches
		// up with the others' commits (catchUpLocked), this run's equality deletes included, and reloads the
		// table first (fresh) to place itself on the head.
		k.fresh.Store(true)
		idx.stale = true
		return
	}
	prev := idx.base
	idx.base = res.SnapshotID
	if res.Table != nil && res.Table.Metadata().Version() >= 3 {
		learnFirstRowIDs(ctx, res.Table, idx, run.Branch, prev)
	}
	var removed []ice.DataFile
	for _, seg := range run.Segments {
		removed = append(removed, seg.RemovedDVs...)
		for _, d := range seg.DVFiles {
			ref := d.ReferencedDataFile()
			if ref == nil {
				continue
			}
			if fid, ok := idx.byPath[*ref]; ok {
				f := idx.files[fid]
				if d.FileFormat() != ice.PuffinFile { // v2: live until a run removes them
					if f.dvFile != nil {
						idx.superseded = append(idx.superseded, f.dvFile)
					}
					idx.superseded = append(idx.superseded, f.inherited...)
					f.inherited = nil
				}
				f.dvFile, f.dv = d, merged[*ref]
				if d.FileFormat() != ice.PuffinFile { // v2: catchUpLocked must not take its own file for news
					if f.applied == nil {
						f.applied = map[string]struct{}{}
					}
					f.applied[d.FilePath()] = struct{}{}
				}
				idx.recount(f)
			}
		}
	}
	idx.removedSuperseded(removed)
	// The vectors grew: an index now past its budget spills, or goes off after the next run.
	idx.checkBudget()
}

// rebase keeps the key index valid across a compaction this writer committed (pre is the table the compaction
// planned on, post the one its commit made): the rows of the rewritten files now sit in the compaction's new
// files, which are read back and indexed minus the rows their deletes remove (a background pass moves the
// deletes committed while it ran onto its new files, see compactor), and post's head becomes the index's base.
// When someone else changed the table since the index's base, or the new files cannot be read, the index goes
// off instead. A compaction whose commit returned an error (its reply may be lost, the
// rewrite applied) calls drop instead.
func (k *keyStage) rebase(ctx context.Context, pre, post *table.Table, rewritten map[string]struct{}) {
	k.mu.Lock()
	defer k.mu.Unlock()
	idx := k.indexBefore(pre, "a compaction")
	if idx == nil {
		return
	}
	head := post.Metadata().SnapshotByName(k.branch)
	if head == nil {
		k.dropLocked("the compaction left no snapshot on the branch", nil)
		return
	}
	tasks, err := post.Scan(table.WithSnapshotID(head.SnapshotID)).PlanFiles(ctx)
	if err != nil {
		k.dropLocked("plan after a compaction", err)
		return
	}
	res, err := newDeleteResolver(ctx, post)
	if err != nil {
		k.dropLocked("read deletes after a compaction", err)
		return
	}
	idx.forget(rewritten)
	idx.superseded = slices.DeleteFunc(idx.superseded, func(f ice.DataFile) bool {
		_, gone := rewritten[posDeleteTarget(f)]
		return gone // the compaction removed it with its data file
	})
	for _, t := range tasks {
		if _, known := idx.byPath[t.File.FilePath()]; known {
			continue
		}
		keys, err := readFileKeys(ctx, post, t.File, k.spec)
		if err != nil {
			k.dropLocked("read keys after a compaction", err)
			return
		}
		// A background pass moves the deletes committed while it ran onto its new files: their rows are not
		// live, and the file's next vector must hold them.
		dead, err := res.positionDeleted(t)
		if err != nil {
			k.dropLocked("read deletes after a compaction", err)
			return
		}
		eq, err := res.equalityDeleted(ctx, t, &knownKeys{spec: k.spec, keys: &keys})
		if err != nil {
			k.dropLocked("read deletes after a compaction", err)
			return
		}
		switch {
		case dead == nil:
			dead = eq
		case eq != nil:
			dead.Or(eq)
		}
		idx.addLive(post.Metadata(), t, &keys, dead)
	}
	idx.checkBudget()
	if idx.keys.Err() != nil {
		k.dropLocked("the key index's spilled runs", idx.keys.Err())
		return
	}
	idx.base = head.SnapshotID
}

// indexBefore returns the key index when no one but this writer changed the table between the index's base and
// pre, the table one of the writer's maintenance commits (what) planned on; else it turns the index off and
// returns nil. The caller holds mu.
func (k *keyStage) indexBefore(pre *table.Table, what string) *keyIndex {
	idx := k.idx.Load()
	if idx != nil && commit.ForeignSince(pre.Metadata(), k.branch, idx.base, k.writerID) {
		k.dropLocked("the table changed outside this writer before "+what, nil)
		return nil
	}
	return idx
}

// drop turns the key index off for good: from now on upserts and deletes use equality deletes (batches already
// encoded for the index get theirs from apply).
func (k *keyStage) drop(reason string, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.dropLocked(reason, err)
}

func (k *keyStage) dropLocked(reason string, err error) {
	old := k.idx.Swap(nil)
	if old == nil {
		return
	}
	old.close()
	if reason == "" {
		return // not a fallback: the index is reloaded, or its writer closed
	}
	args := []any{"table", k.ident, "reason", reason}
	if err != nil {
		args = append(args, "err", err)
	}
	k.log.Info("iceberg: key index off; upserts and deletes use equality deletes from now on", args...)
}

// loadKeyIndex builds the key index of a table that already holds rows (a writer reopening its table, or one
// another writer or tool wrote) into idx, a new empty index with its budget, pool and spill directory set: the
// key columns of every live data file, minus the rows its deletes remove, whatever their kind: its deletion
// vector, its position delete files, and the equality deletes scan planning applies to it (deleteResolver
// matches them against the file's columns). A file's recorded vector (indexedFile.dv) holds every position
// deleted, so the first vector this writer writes for it carries the position deletes and equality-deleted rows
// too (readers ignore position delete files for a file with a vector).
//
// Files are read parallel at a time and indexed as they arrive, and the index spills its keys to local disk
// whenever it passes its budget (checkBudget), as a running writer's does: a table whose keys exceed the budget
// loads all the same, holding in memory only the index's share (the store.Table's newest keys, the runs' fences,
// bloom filters and deleted bits) plus the files being read. It returns the reason the index cannot be used
// (still past its budget after spilling, or a spill that failed); the caller then closes idx.
func loadKeyIndex(ctx context.Context, tbl *table.Table, branch string, ks *keySpec, idx *keyIndex, parallel int) (string, error) {
	snap := tbl.Metadata().SnapshotByName(branch)
	if snap == nil {
		return "", nil
	}
	tasks, err := tbl.Scan(table.WithSnapshotID(snap.SnapshotID)).PlanFiles(ctx)
	if err != nil {
		return "", fmt.Errorf("iceberg: key index: plan: %w", err)
	}
	res, err := newDeleteResolver(ctx, tbl)
	if err != nil {
		return "", err
	}
	type loaded struct {
		task table.FileScanTask
		keys keyenc.List
		dv   *dv.RoaringPositionBitmap
	}
	// Workers read files and hand them over one by one, so at most 2*parallel files' keys wait outside the
	// index; cancel stops them once the index has given up.
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, gctx := errgroup.WithContext(lctx)
	next := make(chan table.FileScanTask, len(tasks))
	for _, t := range tasks {
		next <- t
	}
	close(next)
	out := make(chan loaded, max(1, parallel))
	for range max(1, parallel) {
		g.Go(func() error {
			for t := range next {
				keys, err := readFileKeys(gctx, tbl, t.File, ks)
				if err != nil {
					return err
				}
				dead, err := res.positionDeleted(t)
				if err != nil {
					return fmt.Errorf("iceberg: key index: %w", err)
				}
				eq, err := res.equalityDeleted(gctx, t, &knownKeys{spec: ks, keys: &keys})
				if err != nil {
					return fmt.Errorf("iceberg: key index: %w", err)
				}
				switch {
				case dead == nil:
					dead = eq
				case eq != nil:
					dead.Or(eq)
				}
				select {
				case out <- loaded{task: t, keys: keys, dv: dead}:
				case <-gctx.Done():
					return gctx.Err()
				}
			}
			return nil
		})
	}
	var readErr error
	go func() {
		readErr = g.Wait()
		close(out)
	}()
	reason := ""
	meta := tbl.Metadata()
	for l := range out {
		if reason != "" {
			continue // drain: the workers stop at their next hand-over
		}
		idx.addRows(&indexedFile{df: keyindex.NewFileRef(l.task.File), dv: l.dv, dvFile: liveVector(l.task), applied: appliedDeletes(l.task),
			inherited: idx.inheritedDeletes(meta, l.task, nil)}, &l.keys)
		idx.checkBudget()
		switch {
		case idx.keys.Err() != nil:
			reason = "the key index's spilled runs: " + idx.keys.Err().Error()
		case idx.over && idx.spillErr != nil:
			reason = fmt.Sprintf("the table's keys exceed the %s and spilling them failed: %v", idx.budget(), idx.spillErr)
		case idx.over:
			reason = fmt.Sprintf("the table's keys exceed the %s even spilled to local disk", idx.budget())
		}
		if reason != "" {
			cancel()
		}
	}
	// readErr is set before out is closed.
	if reason != "" {
		return reason, nil
	}
	if readErr != nil {
		return "", readErr
	}
	idx.base = snap.SnapshotID
	return "", nil
}
