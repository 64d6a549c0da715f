package iceberg

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"

	ice "github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/icewriter/iceberg/internal/keyindex/posdelete"
	"golang.org/x/sync/errgroup"
)

// The key stage's position deletes on format-version 2 tables: a run's position delete files (written by
// posdelete.Write), staged with the removal of those they supersede.

// writePositionDeletes writes one position delete file per data file of pending (format version 2), each with
// every position merged holds for it (this writer's earlier deletes of the file and the run's), a few at once.
func (k *keyStage) writePositionDeletes(ctx context.Context, fs iceio.WriteFileIO, tbl *table.Table, lp table.LocationProvider,
	idx *keyIndex, pending map[int32][]int64, merged runDVs) ([]ice.DataFile, error) {
	meta := tbl.Metadata()
	fids := slices.Sorted(maps.Keys(pending))
	out := make([]ice.DataFile, len(fids))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, k.parallel))
	for i, fid := range fids {
		df := idx.files[fid].df
		path := lp.NewDataLocation("icewriter-pos-" + k.files.next().String() + ".parquet")
		g.Go(func() error {
			f, err := posdelete.Write(gctx, fs, meta, df, merged[df.FilePath()], path)
			out[i] = f
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// supersededBatch is how many superseded position delete files a v2 writer lets accumulate before a commit
// removes them. The removal is a rewrite snapshot, which iceberg-go stages by reading every manifest of the
// table (and rewriting those that list the files): per commit it doubled the CPU of a router test of small
// commits. A superseded file changes no row (its replacement repeats its positions); until removed, a reader of
// its data file reads it too.
const supersededBatch = 16

// supersededBy returns the position delete files a run removes, given those its new files supersede: every
// superseded file still live with them once they are batch or more, else none. The index's list changes
// only when the run commits (keyStage.committed): a run that falls back to equality deletes writes none of its
// files, so what it would have superseded stays live, and the only file holding its positions.
func (idx *keyIndex) supersededBy(files []ice.DataFile, batch int) []ice.DataFile {
	if len(idx.superseded)+len(files) < max(1, batch) {
		return nil
	}
	return append(slices.Clone(idx.superseded), files...)
}

// removedSuperseded forgets superseded position delete files that a committed run or conversion removed.
func (idx *keyIndex) removedSuperseded(files []ice.DataFile) {
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

// posDeleteTarget returns the data file a file-scoped position delete file applies to: its referenced data file
// or, as format version 2 manifests do not keep that field, its file_path bounds when they name one path.
func posDeleteTarget(f ice.DataFile) string {
	if ref := f.ReferencedDataFile(); ref != nil {
		return *ref
	}
	lo, hi := f.LowerBoundValues()[posdelete.PathID], f.UpperBoundValues()[posdelete.PathID]
	if len(lo) > 0 && bytes.Equal(lo, hi) {
		return string(lo)
	}
	return ""
}

// writableFS returns the table's file system as one that writes files (what: the files it is for, in the error).
func writableFS(fs iceio.IO, what string) (iceio.WriteFileIO, error) {
	wfs, ok := fs.(iceio.WriteFileIO)
	if !ok {
		return nil, fmt.Errorf("iceberg: the table's file system cannot write %s", what)
	}
	return wfs, nil
}
