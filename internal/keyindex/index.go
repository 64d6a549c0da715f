package keyindex

import (
	"fmt"
	"iter"
	"slices"
	"strconv"
	"sync/atomic"

	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table/dv"
	"github.com/icewriter/iceberg/internal/keyindex/keyenc"
	"github.com/icewriter/iceberg/internal/keyindex/store"
)

// Index maps every key of a merge-on-read table (format version 2 or 3) to the data file and row position
// that hold it, so that an upsert or delete is written as a deletion vector (v3) or a position delete file (v2)
// on that file instead of an equality delete that readers must apply to every older file. It is complete only
// while it covers the whole table: from the writer's open (an empty table, or one whose keys Load read) up to
// the first commit by someone else that adds or removes files, which CatchUp reads. The writer's own
// compactions move it to the files they write (Rebase); one whose commit returned an error (its reply may be
// lost) drops it. Without it the writer falls back to equality deletes (correct, slower to read). An Index does
// not lock: the writer's key stage owns it and serializes its changes; only Bytes and Spilled may be read
// concurrently.
type Index struct {
	limit int64
	bytes int64
	pool  Pool         // a Router's key index budget, shared by its tables (nil: limit is this index's own)
	held  atomic.Int64 // bytes, for Stats (read without the key stage's lock)
	// spilled is the size of the keys' runs on disk (store.Store.SpilledBytes), for Stats.
	spilled atomic.Int64
	base    int64   // the snapshot the index covers (the writer's last commit); -1: empty table
	files   []*File // by id; nil once forgotten
	byPath  map[string]int32
	keys    store.Store // every live row by key: in memory, and spilled to local disk past the budget
	// tableBytes is what keys held when bytes last counted it (account): bytes is that plus what each file's
	// metadata holds (File.mem).
	tableBytes int64
	over       bool  // the budget was exceeded even after spilling: disable after the current run
	spillErr   error // why the last spill failed, for the log
	// stale: a run's outcome left the index unsure of the table (it fell back to equality deletes, or its
	// snapshot could not be found to tell): the next run catches up first (CatchUp), which also takes
	// each file's live vector from the table.
	stale bool
	// superseded are this writer's position delete files (format version 2) that later ones of the same data
	// files replaced and that are still live: removed together, a batch at a time (SupersededBy).
	superseded []ice.DataFile
	cols       Columns // the key columns, read from data files
}

// File is what the index holds for one data file besides its keys' locations: its deletes and row ids.
type File struct {
	df FileRef
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
	// applied names the position and equality delete files whose rows the index removed (CatchUp reads
	// the file again only for deletes not named here).
	applied map[string]struct{}
	// Row lineage (format version 3), for merge-on-read upserts that keep the replaced row's _row_id: the
	// explicit _row_id of the rows this writer wrote with one (ids, by position), and the first_row_id the
	// table gave the file (its other rows' ids follow from it), known only for files this writer added by a row
	// delta (SetFirstRowID); files loaded from the table or written by a compaction may carry explicit ids
	// the index does not know, so their rows' ids count as unknown.
	ids        RowIDs
	firstRowID int64
	hasFirst   bool
	// mem is what the index counts for the file besides its keys (memBytes, when last counted: recount).
	mem int64
}

// rowID returns the _row_id of the row at pos, if the index knows it.
func (f *File) rowID(pos int32) (int64, bool) {
	if id, ok := f.ids.Get(pos); ok {
		return id, true
	}
	if f.hasFirst {
		return f.firstRowID + int64(pos), true
	}
	return 0, false
}

// Base returns the snapshot the index covers (-1: an empty table).
func (idx *Index) Base() int64 { return idx.base }

// SetBase makes id the snapshot the index covers.
func (idx *Index) SetBase(id int64) { idx.base = id }

// Bytes returns the bytes the index holds (what Stats reports).
func (idx *Index) Bytes() int64 { return idx.held.Load() }

// Store returns the index's key store (for tests: its keys and locations, its hash).
func (idx *Index) Store() *store.Store { return &idx.keys }

// File returns the indexed data file fid (nil once forgotten).
func (idx *Index) File(fid int32) *File { return idx.files[fid] }

// Files returns the data files the index holds, by id.
func (idx *Index) Files() iter.Seq2[int32, *File] {
	return func(yield func(int32, *File) bool) {
		for id, f := range idx.files {
			if f != nil && !yield(int32(id), f) {
				return
			}
		}
	}
}

// DataFile returns what the index keeps of data file fid.
func (idx *Index) DataFile(fid int32) FileRef { return idx.files[fid].df }

// SetVector records file, holding bm, as the live deletion vector of the data file at path, if the index holds
// it. What the file counts for the budget is not recounted: the next change of the file counts it.
func (idx *Index) SetVector(path string, bm *dv.RoaringPositionBitmap, file ice.DataFile) {
	if fid, ok := idx.byPath[path]; ok {
		idx.files[fid].dv, idx.files[fid].dvFile = bm, file
	}
}

// SetFirstRowID records the first_row_id the table gave the data file at path (format version 3), if the index
// holds it: its rows' ids follow from it.
func (idx *Index) SetFirstRowID(path string, first int64) {
	if fid, ok := idx.byPath[path]; ok {
		idx.files[fid].firstRowID, idx.files[fid].hasFirst = first, true
	}
}

// KnownRowID returns the _row_id of key's row when the index holds exactly one live row of key and knows its
// id (File.rowID). locs is scratch space, returned for reuse.
func (idx *Index) KnownRowID(key []byte, locs []store.Loc) (int64, bool, []store.Loc) {
	locs, err := idx.keys.Lookup(locs[:0], key)
	if err != nil {
		return 0, false, locs // apply reports the run's failure; the id is left to it
	}
	if len(locs) != 1 {
		return 0, false, locs
	}
	id, ok := idx.files[locs[0].File].rowID(locs[0].Pos)
	return id, ok, locs
}

// SupersededBy returns the position delete files a run removes, given those its new files supersede: every
// superseded file still live with them once they are batch or more, else none. The index's list changes
// only when the run commits (Committed): a run that falls back to equality deletes writes none of its
// files, so what it would have superseded stays live, and the only file holding its positions.
func (idx *Index) SupersededBy(files []ice.DataFile, batch int) []ice.DataFile {
	if len(idx.superseded)+len(files) < max(1, batch) {
		return nil
	}
	return append(slices.Clone(idx.superseded), files...)
}

// RemovedSuperseded forgets superseded position delete files that a committed run or conversion removed.
func (idx *Index) RemovedSuperseded(files []ice.DataFile) {
	if len(files) == 0 || len(idx.superseded) == 0 {
		return
	}
	gone := make(map[string]struct{}, len(files))
	for _, f := range files {
		gone[f.FilePath()] = struct{}{}
	}
	idx.superseded = slices.DeleteFunc(idx.superseded, func(f ice.DataFile) bool {
		_, ok := gone[f.FilePath()]
		return ok
	})
}

// Audit reports an error unless the index counts what it holds: the key store's memory plus each live file's
// metadata as memBytes estimates it now, and nothing for the files it forgot. It returns the live files' share
// (for tests).
func (idx *Index) Audit() (int64, error) {
	var files int64
	for id, f := range idx.Files() {
		if want := f.memBytes(); f.mem != want {
			return 0, fmt.Errorf("file %d counted at %d bytes, holds %d", id, f.mem, want)
		}
		files += f.mem
	}
	if idx.bytes != idx.keys.Size()+files || idx.held.Load() != idx.bytes {
		return 0, fmt.Errorf("index counts %d bytes (Stats %d), holds %d: keys %d, files %d", idx.bytes, idx.held.Load(),
			idx.keys.Size()+files, idx.keys.Size(), files)
	}
	return files, nil
}

// Path returns the data file's path.
func (f *File) Path() string { return f.df.FilePath() }

// Vector returns the positions deleted from the file (nil: none).
func (f *File) Vector() *dv.RoaringPositionBitmap { return f.dv }

// CarriedRowIDs returns how many of the file's rows carry an explicit _row_id the index knows.
func (f *File) CarriedRowIDs() int { return f.ids.Len() }

// Config is what a new Index is given.
type Config struct {
	Columns Columns // the key columns
	Limit   int64   // the memory budget, when Pool is nil
	Pool    Pool    // a budget shared with other indexes (a Router's), in place of Limit (nil: Limit)
	Dir     string  // where the keys spill past the budget ("": os.TempDir())
}

// Pool is a memory budget several indexes draw from (a Router's key index budget, shared by its tables).
type Pool interface {
	Add(n int64)  // counts n bytes taken (negative: freed)
	Over() bool   // reports whether the pool holds more than its limit
	Limit() int64 // the pool's limit, for the log
}

// New returns an empty index covering base (nil: an empty table).
func New(cfg Config, base *int64) *Index {
	idx := &Index{limit: cfg.Limit, pool: cfg.Pool, cols: cfg.Columns, base: -1, byPath: map[string]int32{}, keys: store.New()}
	idx.keys.Dir = cfg.Dir
	if base != nil {
		idx.base = *base
	}
	return idx
}

// Close gives the index's bytes back to the router's pool and removes its spilled runs.
func (idx *Index) Close() {
	idx.grow(-idx.bytes)
	idx.keys.Close()
	idx.spilled.Store(0)
}

// Remove deletes every row of key and appends their locations to dst.
func (idx *Index) Remove(dst []store.Loc, key []byte) []store.Loc {
	return idx.keys.Remove(dst, key)
}

// account counts the bytes the key table holds now (it grows as rows are added and shrinks only when its
// arena is compacted).
func (idx *Index) account() {
	n := idx.keys.Size()
	idx.grow(n - idx.tableBytes)
	idx.tableBytes = n
	idx.spilled.Store(idx.keys.SpilledBytes())
}

// grow counts n bytes more (negative: fewer) held by the index, in the router's pool too.
func (idx *Index) grow(n int64) {
	idx.bytes += n
	idx.held.Store(idx.bytes)
	if idx.pool != nil {
		idx.pool.Add(n)
	}
}

// full reports whether the index is past its budget: its own, or the router's pool.
func (idx *Index) full() bool {
	if idx.pool != nil {
		return idx.pool.Over()
	}
	return idx.bytes > idx.limit
}

// Budget names the budget an index that went past it exceeded, for the log.
func (idx *Index) Budget() string {
	if idx.pool != nil {
		return "the router's key index budget of " + strconv.FormatInt(idx.pool.Limit(), 10) +
			" bytes shared by its tables (WithKeyIndexBytes)"
	}
	return "memory budget " + strconv.FormatInt(idx.limit, 10) + " bytes (WithKeyIndexBytes)"
}

// Add indexes the rows of a new data file.
func (idx *Index) Add(fk *FileKeys) { idx.AddRowIDs(fk, RowIDs{}) }

// AddRowIDs indexes the rows of a new data file some of whose rows carry the explicit row ids ids.
func (idx *Index) AddRowIDs(fk *FileKeys, ids RowIDs) {
	idx.addRows(&File{df: NewFileRef(fk.DF), ids: ids}, &fk.Keys)
	idx.CheckBudget()
}

// CheckBudget spills the in-memory keys to a run on local disk when the index is past its budget; an index
// still past it (its files' metadata and the runs' fences alone are too much, or the router's other tables hold
// the pool) or whose spill failed is over: it goes off after the current run.
func (idx *Index) CheckBudget() {
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
func (idx *Index) addRows(f *File, keys *keyenc.List) {
	id := int32(len(idx.files))
	idx.files = append(idx.files, f)
	idx.byPath[f.df.FilePath()] = id
	for from := 0; from < keys.Len(); from += addRowsChunk {
		to := min(from+addRowsChunk, keys.Len())
		if from > 0 {
			idx.account()
			idx.CheckBudget()
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
func (idx *Index) forget(paths map[string]struct{}) {
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
