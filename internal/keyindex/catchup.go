package keyindex

import (
	"context"
	"fmt"
	"slices"

	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/dv"
	"github.com/icewriter/iceberg/internal/keyindex/keyenc"
	"github.com/icewriter/iceberg/internal/keyindex/posdelete"
	"github.com/icewriter/iceberg/internal/keyindex/store"
)

// CatchUp brings the index to tbl's branch head after others committed since its base, instead of
// turning it off: the data files no longer live are forgotten, the rows of data files the index does not know
// (another writer's, or the output of someone's compaction) are read and indexed minus the rows their deletes
// remove, and for known files the deletes added since (another writer's deletion vector, position deletes,
// equality deletes, this writer's own fallback equality deletes included) remove their rows from the index. A
// file's deletes are recognised by their paths (File.applied) and its vector by its file and offset, so
// a file whose deletes did not change is not read again. The head becomes the index's base.
//
// The head is planned whole (scan planning decides which deletes apply to which file), not replayed snapshot by
// snapshot: the same answer whatever the others did (appends, row deltas, compactions, expiry of the snapshots
// between), at the cost of reading the table's manifests.
func (idx *Index) CatchUp(ctx context.Context, tbl *table.Table, branch string) error {
	head := tbl.Metadata().SnapshotByName(branch)
	if head == nil {
		return fmt.Errorf("the branch has no snapshot")
	}
	tasks, err := tbl.Scan(table.WithSnapshotID(head.SnapshotID)).PlanFiles(ctx)
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	res, err := NewResolver(ctx, tbl)
	if err != nil {
		return err
	}
	live := make(map[string]struct{}, len(tasks))
	for _, t := range tasks {
		live[t.File.FilePath()] = struct{}{}
	}
	gone := map[string]struct{}{}
	for p := range idx.byPath {
		if _, ok := live[p]; !ok {
			gone[p] = struct{}{}
		}
	}
	idx.forget(gone)
	idx.keepLiveSuperseded(tasks)
	for _, t := range tasks {
		fid, known := idx.byPath[t.File.FilePath()]
		if known && !deletesChanged(idx.files[fid], t) {
			continue
		}
		keys, err := ReadFileKeys(ctx, tbl, t.File, idx.cols)
		if err != nil {
			return err
		}
		dead, err := res.Deleted(ctx, t, &KnownKeys{Columns: idx.cols, Keys: &keys})
		if err != nil {
			return err
		}
		if !known {
			idx.addLive(tbl.Metadata(), t, &keys, dead)
			continue
		}
		f := idx.files[fid]
		if dead != nil {
			for pos := range dead.Positions() {
				if f.dv == nil || !f.dv.Contains(pos) {
					idx.removeLoc(keys.Key(int(pos)), store.Loc{File: fid, Pos: int32(pos)})
				}
			}
			if f.dv != nil {
				dead.Or(f.dv)
			}
		}
		f.dv, f.dvFile, f.applied = dead, ownDeletes(f, t), appliedDeletes(t)
		f.inherited = idx.inheritedDeletes(tbl.Metadata(), t, f.dvFile)
		if dead != nil {
			f.ids.Drop(func(p int32) bool { return dead.Contains(uint64(p)) })
		}
		idx.recount(f)
	}
	idx.CheckBudget()
	if idx.keys.Err() != nil {
		return idx.keys.Err()
	}
	idx.base, idx.stale = head.SnapshotID, false
	return nil
}

// addLive indexes a data file's rows (keys, in row order) minus the positions dead removes, with the deletes
// that removed them.
func (idx *Index) addLive(meta table.Metadata, t table.FileScanTask, keys *keyenc.List, dead *dv.RoaringPositionBitmap) {
	idx.addRows(&File{df: NewFileRef(t.File), dv: dead, dvFile: liveVector(t), applied: appliedDeletes(t),
		inherited: idx.inheritedDeletes(meta, t, nil)}, keys)
}

// removeLoc removes one location of key (a row another writer's delete removed), if the index holds it.
func (idx *Index) removeLoc(key []byte, loc store.Loc) { idx.keys.RemoveLoc(key, loc) }

// deletesChanged reports whether a data file's deletes in a scan task differ from those the index applied: its
// vector (by file and offset), or a position or equality delete file it has not seen.
func deletesChanged(f *File, t table.FileScanTask) bool {
	if !sameVector(f.dvFile, ownDeletes(f, t)) {
		return true
	}
	for _, files := range [][]ice.DataFile{t.DeleteFiles, t.EqualityDeleteFiles} {
		for _, d := range files {
			if _, ok := f.applied[d.FilePath()]; !ok {
				return true
			}
		}
	}
	return false
}

// ownDeletes returns the delete file a scan task's data file's next deletes replace: its deletion vector (v3),
// or on v2 the position delete file the index wrote for it last (f.dvFile), while the task still lists it.
func ownDeletes(f *File, t table.FileScanTask) ice.DataFile {
	if v := liveVector(t); v != nil || f == nil || f.dvFile == nil || f.dvFile.FileFormat() == ice.PuffinFile {
		return v
	}
	for _, d := range t.DeleteFiles {
		if d.FilePath() == f.dvFile.FilePath() {
			return d
		}
	}
	return nil
}

// keepLiveSuperseded forgets the superseded position delete files (v2) that no scan task of the head lists
// any more (someone compacted their data files or removed them): a run must not remove a file twice.
func (idx *Index) keepLiveSuperseded(tasks []table.FileScanTask) {
	if len(idx.superseded) == 0 {
		return
	}
	live := map[string]struct{}{}
	for _, t := range tasks {
		for _, d := range t.DeleteFiles {
			live[d.FilePath()] = struct{}{}
		}
	}
	idx.superseded = slices.DeleteFunc(idx.superseded, func(f ice.DataFile) bool {
		_, ok := live[f.FilePath()]
		return !ok
	})
}

// inheritedDeletes returns the file-scoped position delete files a scan task lists for its data file on a
// format-version 2 table (nil on 3: there the next deletion vector replaces them for readers, and a row delta
// removes vectors only), but for own, the one the index wrote last, and those already superseded (a run
// removes each once).
func (idx *Index) inheritedDeletes(meta table.Metadata, t table.FileScanTask, own ice.DataFile) []ice.DataFile {
	if meta.Version() >= 3 {
		return nil
	}
	var out []ice.DataFile
	for _, d := range t.DeleteFiles {
		if d.ContentType() != ice.EntryContentPosDeletes || posdelete.Target(d) != t.File.FilePath() ||
			(own != nil && d.FilePath() == own.FilePath()) ||
			slices.ContainsFunc(idx.superseded, func(s ice.DataFile) bool { return s.FilePath() == d.FilePath() }) {
			continue
		}
		out = append(out, d)
	}
	return out
}

// liveVector returns the deletion vector of a scan task's data file (nil: none).
func liveVector(t table.FileScanTask) ice.DataFile {
	if len(t.DeletionVectorFiles) > 0 {
		return t.DeletionVectorFiles[0]
	}
	return nil
}

func sameVector(a, b ice.DataFile) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	off := func(d ice.DataFile) int64 {
		if o := d.ContentOffset(); o != nil {
			return *o
		}
		return -1
	}
	return a.FilePath() == b.FilePath() && off(a) == off(b)
}

// appliedDeletes names the position and equality delete files of a scan task (nil: none).
func appliedDeletes(t table.FileScanTask) map[string]struct{} {
	if len(t.DeleteFiles)+len(t.EqualityDeleteFiles) == 0 {
		return nil
	}
	m := make(map[string]struct{}, len(t.DeleteFiles)+len(t.EqualityDeleteFiles))
	for _, files := range [][]ice.DataFile{t.DeleteFiles, t.EqualityDeleteFiles} {
		for _, d := range files {
			m[d.FilePath()] = struct{}{}
		}
	}
	return m
}
