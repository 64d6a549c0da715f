package keyindex

import (
	"context"
	"slices"

	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/dv"
	"github.com/icewriter/iceberg/internal/keyindex/posdelete"
	"github.com/icewriter/iceberg/internal/keyindex/store"
)

// An index's part in a run (apply, committed) and after a compaction (Rebase), as the key stage calls them.

// Stale reports whether a run's outcome left the index unsure of the table: the next run catches up first
// (CatchUp).
func (idx *Index) Stale() bool { return idx.stale }

// MarkStale makes the next run catch up first (a run fell back to equality deletes).
func (idx *Index) MarkStale() { idx.stale = true }

// Over reports whether the index stayed past its budget even after spilling: it goes off after the current run.
func (idx *Index) Over() bool { return idx.over }

// SpillErr returns why the last spill failed (nil: none), for the log.
func (idx *Index) SpillErr() error { return idx.spillErr }

// Err returns the error of a spilled run that could not be read: keys it holds may have gone unplaced.
func (idx *Index) Err() error { return idx.keys.Err() }

// Spilled returns the size of the index's runs on local disk (what Stats reports).
func (idx *Index) Spilled() int64 { return idx.spilled.Load() }

// RowID returns the _row_id of the row at loc, if the index knows it.
func (idx *Index) RowID(loc store.Loc) (int64, bool) { return idx.files[loc.File].rowID(loc.Pos) }

// DropRowIDs forgets the row ids of the rows removed (positions, by file id): the upserts' new rows carry them
// now.
func (idx *Index) DropRowIDs(removed map[int32][]int64) {
	for fid, positions := range removed {
		if f := idx.files[fid]; f.ids.Len() > 0 {
			dead := make(map[int32]struct{}, len(positions))
			for _, p := range positions {
				dead[int32(p)] = struct{}{}
			}
			f.ids.Drop(func(p int32) bool { _, ok := dead[p]; return ok })
			idx.recount(f)
		}
	}
}

// Merge returns what the next deletes of the data files of pending (positions, by file id) hold, by data file
// path: each file's vector merged with the new positions; and the delete files they replace (the file's last
// vector or position delete file, and on format version 2 those it inherited).
func (idx *Index) Merge(pending map[int32][]int64) (map[string]*dv.RoaringPositionBitmap, []ice.DataFile) {
	var removed []ice.DataFile
	merged := make(map[string]*dv.RoaringPositionBitmap, len(pending))
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
	return merged, removed
}

// Committed records the delete files a committed run wrote (vectors: deletion vectors or position delete files,
// holding merged's positions, by data file) as the live ones of their data files, and forgets the superseded
// position delete files it removed. On format version 2 the files the new ones replace become superseded: live
// until a run removes them (SupersededBy).
func (idx *Index) Committed(vectors, removed []ice.DataFile, merged map[string]*dv.RoaringPositionBitmap) {
	for _, d := range vectors {
		ref := d.ReferencedDataFile()
		if ref == nil {
			continue
		}
		fid, ok := idx.byPath[*ref]
		if !ok {
			continue
		}
		f := idx.files[fid]
		if d.FileFormat() != ice.PuffinFile { // v2: live until a run removes them
			if f.dvFile != nil {
				idx.superseded = append(idx.superseded, f.dvFile)
			}
			idx.superseded = append(idx.superseded, f.inherited...)
			f.inherited = nil
		}
		f.dvFile, f.dv = d, merged[*ref]
		if d.FileFormat() != ice.PuffinFile { // v2: CatchUp must not take its own file for news
			if f.applied == nil {
				f.applied = map[string]struct{}{}
			}
			f.applied[d.FilePath()] = struct{}{}
		}
		idx.recount(f)
	}
	idx.RemovedSuperseded(removed)
	// The vectors grew: an index now past its budget spills, or goes off after the next run.
	idx.CheckBudget()
}

// Rebase moves the index across a compaction this writer committed, post being the table its commit made and
// head post's branch head: the rewritten files are forgotten, and the files the index does not know (the
// compaction's) are read back and indexed minus the rows their deletes remove (a background pass moves the
// deletes committed while it ran onto its new files). head becomes the base. When it fails, it returns why (and
// the error), and the index must go off.
func (idx *Index) Rebase(ctx context.Context, post *table.Table, head int64, rewritten map[string]struct{}) (string, error) {
	tasks, err := post.Scan(table.WithSnapshotID(head)).PlanFiles(ctx)
	if err != nil {
		return "plan after a compaction", err
	}
	res, err := NewResolver(ctx, post)
	if err != nil {
		return "read deletes after a compaction", err
	}
	idx.forget(rewritten)
	idx.superseded = slices.DeleteFunc(idx.superseded, func(f ice.DataFile) bool {
		_, gone := rewritten[posdelete.Target(f)]
		return gone // the compaction removed it with its data file
	})
	for _, t := range tasks {
		if _, known := idx.byPath[t.File.FilePath()]; known {
			continue
		}
		keys, err := ReadFileKeys(ctx, post, t.File, idx.cols)
		if err != nil {
			return "read keys after a compaction", err
		}
		// A background pass moves the deletes committed while it ran onto its new files: their rows are not
		// live, and the file's next vector must hold them.
		dead, err := res.Deleted(ctx, t, &KnownKeys{Columns: idx.cols, Keys: &keys})
		if err != nil {
			return "read deletes after a compaction", err
		}
		idx.addLive(post.Metadata(), t, &keys, dead)
	}
	idx.CheckBudget()
	if idx.keys.Err() != nil {
		return "the key index's spilled runs", idx.keys.Err()
	}
	idx.base = head
	return "", nil
}
