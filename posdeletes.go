package iceberg

import (
	"context"
	"maps"
	"slices"

	ice "github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/icewriter/iceberg/internal/keyindex"
	"github.com/icewriter/iceberg/internal/keyindex/posdelete"
	"golang.org/x/sync/errgroup"
)

// The key stage's position deletes on format-version 2 tables: a run's position delete files (written by
// posdelete.Write), staged with the removal of those they supersede.

// writePositionDeletes writes one position delete file per data file of pending (format version 2), each with
// every position merged holds for it (this writer's earlier deletes of the file and the run's), a few at once.
func (k *keyStage) writePositionDeletes(ctx context.Context, fs iceio.WriteFileIO, tbl *table.Table, lp table.LocationProvider,
	idx *keyindex.Index, pending map[int32][]int64, merged runDVs) ([]ice.DataFile, error) {
	meta := tbl.Metadata()
	fids := slices.Sorted(maps.Keys(pending))
	out := make([]ice.DataFile, len(fids))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, k.parallel))
	for i, fid := range fids {
		df := idx.DataFile(fid)
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
