package iceberg_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
)

// TestKeyIndexCatchesUp: two merge-on-read writers with key indexes interleave writes, upserts and deletes on one
// v2 or v3 table (partitioned or not), each flushing between the other's commits. Each writer's first commit
// after the other's falls back to equality deletes (its run was placed on the table its last commit left); from
// then on it reloads the table before placing a run and catches its index up with the other's commits (new
// files, deletion vectors replaced on its own files, the other's fallback equality deletes), so the table ends
// with at most one equality delete file per writer. After every round the table reads back as the model. On v2
// the position delete files a fallback run would have superseded stay live (the run wrote none of its own), so
// the batched removal of superseded files never removes the one file still holding a row's delete.
func TestKeyIndexCatchesUp(t *testing.T) {
	t.Parallel() // see TestMain
	for _, tc := range []struct {
		version     int
		partitioned bool
	}{{3, false}, {3, true}, {2, false}, {2, true}} {
		t.Run(fmt.Sprintf("v%d/partitioned=%v", tc.version, tc.partitioned), func(t *testing.T) {
			t.Parallel()
			partitioned := tc.partitioned
			ctx := context.Background()
			cat := openCatalog(t)
			ident := table.Identifier{"mor", "catchup"}
			create := []iceberg.CreateOption{iceberg.IdentifierFields("id"), iceberg.FormatVersion(tc.version)}
			if partitioned {
				create = append(create, iceberg.PartitionBy("bucket(4, id)"))
			}
			open := func(id string) *iceberg.Writer {
				w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(kvSchema, create...),
					iceberg.WithMode(iceberg.MergeOnRead), iceberg.WithWriterID(id), iceberg.WithFlushInterval(0),
					iceberg.WithSmallFileCompactionEvery(0), iceberg.WithDeleteConversionEvery(0), iceberg.WithRowGroupRowsForTest(64),
					iceberg.WithSupersededBatchForTest(4))
				if err != nil {
					t.Fatal(err)
				}
				return w
			}
			model := kvModel{}
			a := open("a")
			writeIDs(t, ctx, a, model, 400) // several row groups of 64 rows per file
			b := open("b")
			ops := &kvOps{rng: rand.New(rand.NewPCG(7, 18)), keySpace: 500, maxRows: 30, writes: 2, next: 1_000_000}
			// Three rounds: each writer's fallback comes in the first, and both catch up with the other's
			// commits (files, vectors or position deletes, fallback equality deletes) in the next two.
			for round := 0; round < 3; round++ {
				for _, w := range []*iceberg.Writer{a, b} {
					for range 3 {
						ops.apply(t, ctx, w, model)
					}
					if err := w.Flush(ctx); err != nil {
						t.Fatal(err)
					}
				}
				compareKV(t, readKV(t, cat, ident), model)
			}
			for _, w := range []*iceberg.Writer{a, b} {
				if err := w.Close(ctx); err != nil {
					t.Fatal(err)
				}
			}
			compareKV(t, readKV(t, cat, ident), model)
			fallbacks := 2 // one per writer, of one equality delete file per partition
			if partitioned {
				fallbacks *= 4
			}
			eq, pos, dvs := liveDeleteFiles(t, cat, ident)
			if eq > fallbacks || (tc.version >= 3 && dvs == 0) || (tc.version == 2 && pos == 0) {
				t.Fatalf("%d equality delete files, %d position delete files and %d deletion vectors: want at most one fallback per writer",
					eq, pos, dvs)
			}
		})
	}
}
