package iceberg

import (
	"context"
	"maps"
	"slices"

	"github.com/icewriter/iceberg/internal/commit/cow"

	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/icewriter/iceberg/internal/commit"
	"github.com/icewriter/iceberg/internal/keyindex"
	"github.com/icewriter/iceberg/internal/keyindex/keyenc"
)

// carryRowIDs keeps row lineage for a merge-on-read batch (format version 3): each new row of batch b (in
// segment seg) whose key replaced a row of known _row_id (carried, by key; the key index's) takes that id, as
// an update keeps its row id, so a changelog reader sees an update where it would see a delete and an insert.
// The batch's data files that hold such a row are written again with an explicit _row_id column (carryRowIDs:
// the id for those rows, null for the others, which take ids from the table) and replace the originals in the
// segment (the batch's key part records the swap: replaced, rewritten); the originals, uploaded and never
// committed, are deleted. It returns the keys of the
// batch's files in row order after the rewrite, and per file the explicit ids by position.
func (k *keyStage) carryRowIDs(ctx context.Context, tbl *table.Table, seg *Segment, b *batch, carried map[string]int64) ([]keyindex.FileKeys, []map[int32]int64, error) {
	ks, err := cow.NewKeySet(b.keys.keyRecs)
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
	out, replaced, keysOf, err := cow.CarryRowIDs(ctx, tbl, files, ks, cow.NewRowIDs(carried, b.keys.rowIDs), k.rewrite, func(df ice.DataFile) *keyenc.List {
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
			if !ks.Holds(string(key)) {
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
	seg.DataFiles = keep(seg.DataFiles)
	b.keys.replaced = append(b.keys.replaced, paths...)
	b.keys.rewritten = append(b.keys.rewritten, added...)
	commit.RemovePaths(ctx, k.log, tbl, paths)
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
