package iceberg_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// The key index learns the keys of the data files a merge-on-read writer just wrote from the batch itself
// (fileRowMap), not by reading the files back: a writer's commits open none of the Parquet files it wrote,
// v2 and v3, partitioned (one chunk and several) or not (one write and parallel parts), with files rolled at a
// small target size, while the table reads back as the sequential model after every commit and upserts and
// deletes stay position deletes (no equality delete file). On v3 the upserts take new keys only: an upsert of
// a key the table holds keeps its row id by writing the new row's file again (carryRowIDs), which reads it.
func TestKeyIndexLearnsNewFilesWithoutReadingThem(t *testing.T) {
	t.Parallel() // see TestMain
	cases := []struct {
		name    string
		version int
		part    string
		chunks  int // WithFanoutForTest's partitions per chunk (0: default)
	}{
		{"v2", 2, "", 0},
		{"v3", 3, "", 0},
		{"v2-partitioned", 2, "bucket(4, id)", 0},
		{"v3-partitioned-chunks", 3, "bucket(4, id)", 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			cat, reads := tabletest.CountedCatalog(t)
			ident := table.Identifier{"keys", "learn"}
			create := []iceberg.CreateOption{iceberg.IdentifierFields("id"), iceberg.FormatVersion(c.version)}
			if c.part != "" {
				create = append(create, iceberg.PartitionBy(c.part))
			}
			opts := []iceberg.Option{iceberg.WithCreate(kvSchema, create...), iceberg.WithMode(iceberg.MergeOnRead),
				iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompactionEvery(0), iceberg.WithFlushRows(1000),
				iceberg.WithMaxInFlight(4), iceberg.WithTargetFileSize(8 << 10), iceberg.WithRowGroupRowsForTest(100)}
			if c.chunks > 0 {
				opts = append(opts, iceberg.WithFanoutForTest(c.chunks, 1000))
			}
			w, err := iceberg.NewWriter(ctx, cat, ident, opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close(ctx)
			model := kvModel{}
			rng := rand.New(rand.NewPCG(uint64(c.version), 18))
			// flush commits and checks that it read no Parquet file, then that the table reads back as the model.
			flush := func(step string) {
				t.Helper()
				before := reads()
				if err := w.Flush(ctx); err != nil {
					t.Fatal(err)
				}
				if n := reads() - before; n != 0 {
					t.Fatalf("%s: the writer read Parquet files %d times; want its key index to learn its new files from the batch", step, n)
				}
				compareKV(t, readKV(t, cat, ident), model)
			}
			// One Write of three times the flush policy: written as parallel parts when unpartitioned.
			ids, vs := make([]int64, 3000), make([]int64, 3000)
			for i := range ids {
				ids[i], vs[i] = int64(i), int64(i)
				model.insert(ids[i], vs[i])
			}
			must(t, w.Write(ctx, kvBatch(ids, vs)))
			flush("the first write")
			next := int64(3000)
			for round := range 4 {
				var up, upV, del []int64
				for range 150 { // keys written before (v2), and new ones
					id := rng.Int64N(next + 50)
					if _, ok := model[id]; (!ok || c.version >= 3) && id < next {
						continue
					}
					up, upV = append(up, id), append(upV, int64(round*10000)+id)
				}
				seen := map[int64]bool{}
				for i := len(up) - 1; i >= 0; i-- { // the last upsert of a key wins
					if !seen[up[i]] {
						seen[up[i]] = true
						model.upsert(up[i], upV[i])
					}
				}
				next += 50
				must(t, w.Upsert(ctx, kvBatch(up, upV)))
				for range 80 {
					id := rng.Int64N(next)
					del = append(del, id)
					model.del(id)
				}
				must(t, w.Delete(ctx, keyBatch(del)))
				ins := []int64{next, next + 1, next + 2}
				for _, id := range ins {
					model.insert(id, id)
				}
				next += 3
				must(t, w.Write(ctx, kvBatch(ins, ins)))
				flush(fmt.Sprintf("round %d", round))
			}
			if eq, _ := deleteFileKinds(t, cat, ident); eq != 0 {
				t.Fatalf("%d equality delete files: want the key index to place every upsert and delete", eq)
			}
		})
	}
}
