package iceberg

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	ice "github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/dv"
	"github.com/icewriter/iceberg/internal/keyindex"
	"github.com/icewriter/iceberg/internal/keyindex/posdelete"
)

// rewriteRows says where each row of a background compaction group's output came from, so that a position
// delete or deletion vector committed on a rewritten file after the pass's snapshot can be moved onto the row
// that now holds it (see compactor: the pass re-bases instead of giving up).
//
// The group's output holds every row of its files that was live at the pass's snapshot, once, in read order:
// iceberg-go's ExecuteCompactionGroup reads the tasks in order (its scanner hands batches on sequenced by task
// and batch index, with deleted rows dropped in file order) and writes them through one clustered rolling
// writer, which fills its files one after another. So the live row at position p of the i-th task is output
// row offset_i + p - (rows of that task deleted before p), and output row r is in the file whose row range
// holds it. The only reordering that writer does is a table's sort order, sorted batch by batch: a sorted
// table gets no map. newRewriteRows checks the live row count against the output's, so a change of that
// behaviour upstream costs the re-base, never a row.
type rewriteRows struct {
	sources map[string]*rowSource
	outputs []ice.DataFile
	ends    []int64 // ends[j]: the output row after the last row of outputs[j]
}

// rowSource is one rewritten file in the group's read order.
type rowSource struct {
	offset int64    // output row of its first live row
	count  int64    // its rows, deleted ones included
	dead   []uint64 // its positions deleted at the pass's snapshot, sorted
}

// newRewriteRows maps a group's output rows to their sources; res finds the rows each task's deletes removed.
func newRewriteRows(ctx context.Context, res *keyindex.Resolver, tasks []table.FileScanTask, outputs []ice.DataFile) (*rewriteRows, error) {
	m := &rewriteRows{sources: make(map[string]*rowSource, len(tasks)), outputs: outputs}
	var live int64
	for _, t := range tasks {
		dead, err := res.PositionDeleted(t)
		if err != nil {
			return nil, err
		}
		eq, err := res.EqualityDeleted(ctx, t, nil)
		if err != nil {
			return nil, err
		}
		switch {
		case dead == nil:
			dead = eq
		case eq != nil:
			dead.Or(eq)
		}
		src := &rowSource{offset: live, count: t.File.Count()}
		if dead != nil {
			for p := range dead.Positions() {
				if int64(p) < src.count {
					src.dead = append(src.dead, p)
				}
			}
			slices.Sort(src.dead)
		}
		m.sources[t.File.FilePath()] = src
		live += src.count - int64(len(src.dead))
	}
	var out int64
	for _, df := range outputs {
		out += df.Count()
		m.ends = append(m.ends, out)
	}
	if out != live {
		return nil, fmt.Errorf("the rewrite wrote %d rows where %d were live: its rows cannot be traced back", out, live)
	}
	return m, nil
}

// output returns the output file (its index in outputs) and position that hold the row at pos of source file
// path; false when that row was not live at the pass's snapshot (the rewrite dropped it) or is not in the map.
func (m *rewriteRows) output(path string, pos uint64) (int, int64, bool) {
	src, ok := m.sources[path]
	if !ok || int64(pos) >= src.count {
		return 0, 0, false
	}
	before, found := slices.BinarySearch(src.dead, pos)
	if found {
		return 0, 0, false
	}
	row := src.offset + int64(pos) - int64(before)
	j := sort.Search(len(m.ends), func(j int) bool { return m.ends[j] > row })
	if j == len(m.ends) {
		return 0, 0, false
	}
	start := int64(0)
	if j > 0 {
		start = m.ends[j-1]
	}
	return j, row - start, true
}

// rewriteDrift is what the snapshots committed after a background pass's snapshot changed in the deletes of
// the files it rewrites: the position deletes and deletion vectors added since that are still live and target
// a rewritten file (the pass moves their rows onto its output), and the delete files removed since (which the
// pass must not remove again).
type rewriteDrift struct {
	deletes []ice.DataFile
	removed map[string]struct{} // deleteFileKey of each delete file removed since
}

// deleteFileKey names a delete file entry: a deletion vector by its Puffin file and offset (one Puffin file
// holds the vectors of many data files), any other delete file by its path.
func deleteFileKey(df ice.DataFile) string {
	if o := df.ContentOffset(); o != nil && table.IsDeletionVector(df) {
		return fmt.Sprintf("%s#%d", df.FilePath(), *o)
	}
	return df.FilePath()
}

// has reports whether the snapshots since removed df.
func (d *rewriteDrift) has(df ice.DataFile) bool {
	_, ok := d.removed[deleteFileKey(df)]
	return ok
}

// rewriteDriftOn reads what the snapshots since a pass's snapshot did to its rewritten files (see rewriteDrift).
// It returns an error wrapping errRewriteOverlap when the pass cannot commit onto tbl at all: its snapshot is no
// longer an ancestor of the branch's head, a snapshot since removed a rewritten data file, or one added a
// position delete whose target is not one known file. Equality deletes added since need nothing: the rewrite's
// files keep the pass snapshot's sequence number, so they still apply.
func rewriteDriftOn(tbl *table.Table, branch string, snap *table.Snapshot, rewritten map[string]struct{}) (*rewriteDrift, error) {
	meta := tbl.Metadata()
	head := meta.SnapshotByName(branch)
	var since []*table.Snapshot
	for s := head; ; {
		if s == nil {
			return nil, fmt.Errorf("%w: its snapshot %d is no longer an ancestor of the branch", errRewriteOverlap, snap.SnapshotID)
		}
		if s.SnapshotID == snap.SnapshotID {
			break
		}
		since = append(since, s)
		if s.ParentSnapshotID == nil {
			s = nil
			continue
		}
		s = meta.SnapshotByID(*s.ParentSnapshotID)
	}
	d := &rewriteDrift{removed: map[string]struct{}{}}
	if len(since) == 0 {
		return d, nil
	}
	fs, err := tbl.FS(context.Background())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errRewriteOverlap, err)
	}
	added := map[string]ice.DataFile{}
	for _, s := range since {
		if err := snapshotDrift(fs, s, rewritten, added, d.removed); err != nil {
			return nil, err
		}
	}
	for k, df := range added {
		if _, gone := d.removed[k]; !gone {
			d.deletes = append(d.deletes, df)
		}
	}
	slices.SortFunc(d.deletes, func(a, b ice.DataFile) int { return strings.Compare(deleteFileKey(a), deleteFileKey(b)) })
	return d, nil
}

// snapshotDrift reads the entries snapshot s added or deleted: a rewritten data file removed is an overlap; a
// position delete or deletion vector added on a rewritten file goes to added, one of no single file is an
// overlap; every delete file removed goes to removed.
func snapshotDrift(fs iceio.IO, s *table.Snapshot, rewritten map[string]struct{}, added map[string]ice.DataFile, removed map[string]struct{}) error {
	mans, err := s.Manifests(fs)
	if err != nil {
		return fmt.Errorf("%w: snapshot %d: %w", errRewriteOverlap, s.SnapshotID, err)
	}
	for _, m := range mans {
		if m.SnapshotID() != s.SnapshotID {
			continue // carried over from an earlier snapshot
		}
		for e, err := range m.Entries(fs, false) {
			if err != nil {
				return fmt.Errorf("%w: snapshot %d: %w", errRewriteOverlap, s.SnapshotID, err)
			}
			if e.SnapshotID() != s.SnapshotID {
				continue
			}
			df := e.DataFile()
			switch {
			case df.ContentType() == ice.EntryContentData && e.Status() == ice.EntryStatusDELETED:
				if _, ok := rewritten[df.FilePath()]; ok {
					return fmt.Errorf("%w: snapshot %d removed %s", errRewriteOverlap, s.SnapshotID, df.FilePath())
				}
			case df.ContentType() != ice.EntryContentData && e.Status() == ice.EntryStatusDELETED:
				removed[deleteFileKey(df)] = struct{}{}
			case df.ContentType() == ice.EntryContentPosDeletes && e.Status() == ice.EntryStatusADDED:
				ref, err := positionDeleteTarget(fs, df)
				if err != nil {
					return fmt.Errorf("%w: snapshot %d: %w", errRewriteOverlap, s.SnapshotID, err)
				}
				if ref == "" {
					return fmt.Errorf("%w: snapshot %d added position deletes %s of no one file", errRewriteOverlap,
						s.SnapshotID, df.FilePath())
				}
				if _, ok := rewritten[ref]; ok {
					added[deleteFileKey(df)] = df
				}
			}
		}
	}
	return nil
}

// rebasedDeletes are the deletes a background pass stages on its own output for the drift's deletes.
type rebasedDeletes struct {
	files []ice.DataFile // deletion vectors (v3) or file-scoped position delete files (v2) of output files
	paths []string       // the files written, to remove when the attempt does not commit
	rows  int            // rows they delete
}

// rebaseDeletes moves the rows the drift's deletes remove from the rewritten files onto the output rows that
// hold them (traced: each group's rewriteRows, by rewritten file), and writes them as deletes of the output files:
// one deletion vector per output file on a v3 table, one file-scoped position delete file per output file on
// v2. A delete on a rewritten file without a map (a sorted table) wraps errRewriteOverlap: the pass gives up.
func rebaseDeletes(ctx context.Context, tbl *table.Table, drift *rewriteDrift, traced map[string]*rewriteRows, names *fileNamer) (*rebasedDeletes, error) {
	out := &rebasedDeletes{}
	if len(drift.deletes) == 0 {
		return out, nil
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	type target struct {
		df        ice.DataFile
		positions map[int64]struct{}
	}
	targets := map[string]*target{}
	var order []string
	for _, d := range drift.deletes {
		ref, err := positionDeleteTarget(fs, d)
		if err != nil {
			return nil, err
		}
		m := traced[ref]
		if m == nil {
			return nil, fmt.Errorf("%w: deletes on %s since its snapshot, and the rows of its rewrite cannot be traced",
				errRewriteOverlap, ref)
		}
		var positions []uint64
		if table.IsDeletionVector(d) {
			bm, err := dv.ReadDV(fs, d)
			if err != nil {
				return nil, fmt.Errorf("iceberg: compact: deletion vector of %s: %w", ref, err)
			}
			positions = slices.Collect(bm.Positions())
		} else {
			byFile, err := posdelete.Read(fs, d)
			if err != nil {
				return nil, fmt.Errorf("iceberg: compact: position deletes %s: %w", d.FilePath(), err)
			}
			positions = byFile[ref]
		}
		for _, p := range positions {
			j, pos, ok := m.output(ref, p)
			if !ok {
				continue // deleted before the pass's snapshot: the rewrite dropped it already
			}
			df := m.outputs[j]
			t := targets[df.FilePath()]
			if t == nil {
				t = &target{df: df, positions: map[int64]struct{}{}}
				targets[df.FilePath()] = t
				order = append(order, df.FilePath())
			}
			t.positions[pos] = struct{}{}
		}
	}
	if len(order) == 0 {
		return out, nil
	}
	lp, err := tbl.LocationProvider()
	if err != nil {
		return nil, err
	}
	wfs, err := writableFS(fs, "deletes")
	if err != nil {
		return nil, err
	}
	if tbl.Metadata().Version() >= 3 {
		meta := tbl.Metadata()
		writer := dv.NewDVWriter(wfs, func(id int32) *ice.PartitionSpec { return meta.PartitionSpecByID(int(id)) })
		for _, p := range order {
			t := targets[p]
			positions := slices.Sorted(maps.Keys(t.positions))
			if err := writer.Add(p, positions, t.df.SpecID(), t.df.Partition()); err != nil {
				return nil, err
			}
			out.rows += len(positions)
		}
		path := lp.NewDataLocation("icewriter-dv-" + names.next().String() + ".puffin")
		out.paths = append(out.paths, path)
		if out.files, err = writer.Flush(ctx, path); err != nil {
			return out, fmt.Errorf("iceberg: compact: write deletion vectors: %w", err)
		}
		return out, nil
	}
	for _, p := range order {
		t := targets[p]
		bm := dv.NewRoaringPositionBitmap()
		for pos := range t.positions {
			bm.Set(uint64(pos))
		}
		path := lp.NewDataLocation("icewriter-pos-" + names.next().String() + ".parquet")
		out.paths = append(out.paths, path)
		f, err := posdelete.Write(ctx, wfs, tbl.Metadata(), t.df, bm, path)
		if err != nil {
			return out, err
		}
		out.files = append(out.files, f)
		out.rows += len(t.positions)
	}
	return out, nil
}

// positionDeleteTarget returns the one data file a position delete file or deletion vector applies to ("":
// several). Format v2 manifests do not keep referenced_data_file (it is a v3 field), so a v2 file-scoped delete
// is recognised as Java's ContentFileUtil.referencedDataFile does, by equal file_path bounds, and when its
// bounds are truncated by reading its file_path column.
func positionDeleteTarget(fs iceio.IO, df ice.DataFile) (string, error) {
	if ref := posdelete.Target(df); ref != "" {
		return ref, nil
	}
	byFile, err := posdelete.Read(fs, df)
	if err != nil {
		return "", fmt.Errorf("position deletes %s: %w", df.FilePath(), err)
	}
	if len(byFile) != 1 {
		return "", nil
	}
	for p := range byFile {
		return p, nil
	}
	return "", nil
}
