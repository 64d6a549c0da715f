package iceberg

import (
	"context"
	"fmt"

	ice "github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/dv"
	"github.com/icewriter/iceberg/internal/keyindex"
	"github.com/icewriter/iceberg/internal/keyindex/keyenc"
	"github.com/icewriter/iceberg/internal/keyindex/store"

	"github.com/icewriter/iceberg/internal/commit"
)

// DefaultKeyIndexBytes is the memory budget of the key index (see WithKeyIndexBytes).
const DefaultKeyIndexBytes = 64 << 20

// indexBytes returns the bytes the key index holds (0: off).
func (k *keyStage) indexBytes() int64 {
	if idx := k.idx.Load(); idx != nil {
		return idx.Bytes()
	}
	return 0
}

// spilledBytes returns the size of the key index's runs on local disk (0: none, or the index is off).
func (k *keyStage) spilledBytes() int64 {
	if idx := k.idx.Load(); idx != nil {
		return idx.Spilled()
	}
	return 0
}

// load opens the key index of a merge-on-read writer with a key on a format-v2 or v3 table (a positive
// WithKeyIndexBytes): empty on an empty table; on one that holds rows (typically this writer's, reopened) read
// from the key columns of its live data files (keyindex.Index.Load), spilling to local disk past the budget, so that
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
	reason, err := idx.Load(ctx, tbl, k.branch, k.parallel)
	if err == nil && reason == "" {
		k.idx.Store(idx)
		return nil
	}
	idx.Close()
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
func (k *keyStage) newIndex(base *int64) *keyindex.Index {
	return keyindex.New(keyindex.Config{Columns: k.spec.columns(), Limit: k.limit, Pool: k.pool, Dir: k.spillDir}, base)
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
	if idx != nil && (idx.Stale() || commit.ForeignSince(tbl.Metadata(), k.branch, idx.Base(), k.writerID)) {
		if err := idx.CatchUp(ctx, tbl, k.branch); err != nil {
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
			seg := &run.Segments[b.SegIdx]
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
	base := idx.Base()
	run.IndexBase = &base
	run.Deletes = k.deletes
	run.KeyFieldIDs = k.spec.fieldIDs
	pending := map[int32][]int64{}
	lineage := tbl.Metadata().Version() >= 3
	var buf []byte       // a key
	var locs []store.Loc // its rows
	for _, b := range batches {
		seg := &run.Segments[b.SegIdx]
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
				locs = idx.Remove(locs[:0], buf)
				for _, l := range locs {
					pending[l.File] = append(pending[l.File], int64(l.Pos))
					if id, ok := idx.RowID(l); ok && lineage {
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
				idx.AddRowIDs(&fks[i], keyindex.NewRowIDs(ids[i]))
				continue
			}
			idx.Add(&fks[i])
		}
	}
	// The rows removed carry no id any more (the upserts' new rows carry them now).
	idx.DropRowIDs(pending)
	if idx.Err() != nil {
		// A spilled run could not be read: keys it holds may have gone unplaced, so the run cannot commit.
		return nil, idx.Err()
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
	var added []ice.DataFile
	merged, removed := idx.Merge(pending)
	lp, err := tbl.LocationProvider()
	if err != nil {
		return nil, err
	}
	if meta.Version() >= 3 {
		writer := dv.NewDVWriter(writeFS, func(id int32) *ice.PartitionSpec { return meta.PartitionSpecByID(int(id)) })
		for fid := range pending {
			df := idx.DataFile(fid)
			writer.Load(df.FilePath(), merged[df.FilePath()], df.SpecID(), df.Partition())
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
		removed = idx.SupersededBy(removed, k.supersedeBatch)
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
	if idx.Over() {
		k.dropLocked(idx.Budget(), idx.SpillErr())
		return
	}
	if res.IndexLost {
		// Someone committed between the table apply placed the run on and the commit: the committer wrote
		// equality deletes on the run's keys instead of its vectors. The index still says where every row it
		// knows is (the run's keys were removed, its new files indexed); its base stays, so the next run catches
		// up with the others' commits (keyindex.Index.CatchUp), this run's equality deletes included, and reloads the
		// table first (fresh) to place itself on the head.
		k.fresh.Store(true)
		idx.MarkStale()
		return
	}
	prev := idx.Base()
	idx.SetBase(res.SnapshotID)
	if res.Table != nil && res.Table.Metadata().Version() >= 3 {
		learnFirstRowIDs(ctx, res.Table, idx, run.Branch, prev)
	}
	var vectors, removed []ice.DataFile
	for _, seg := range run.Segments {
		vectors = append(vectors, seg.DVFiles...)
		removed = append(removed, seg.RemovedDVs...)
	}
	idx.Committed(vectors, removed, merged)
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
	if reason, err := idx.Rebase(ctx, post, head.SnapshotID, rewritten); reason != "" {
		k.dropLocked(reason, err)
	}
}

// indexBefore returns the key index when no one but this writer changed the table between the index's base and
// pre, the table one of the writer's maintenance commits (what) planned on; else it turns the index off and
// returns nil. The caller holds mu.
func (k *keyStage) indexBefore(pre *table.Table, what string) *keyindex.Index {
	idx := k.idx.Load()
	if idx != nil && commit.ForeignSince(pre.Metadata(), k.branch, idx.Base(), k.writerID) {
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
	old.Close()
	if reason == "" {
		return // not a fallback: the index is reloaded, or its writer closed
	}
	args := []any{"table", k.ident, "reason", reason}
	if err != nil {
		args = append(args, "err", err)
	}
	k.log.Info("iceberg: key index off; upserts and deletes use equality deletes from now on", args...)
}
