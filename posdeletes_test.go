package iceberg_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
)

// TestPositionDeletesV2Model: a merge-on-read writer on a format-version 2 table writes its upserts and deletes
// as file-scoped position delete files from the key index, one live file per data file but for superseded ones
// waiting to be removed (a later delete on a data file writes a file holding the earlier positions too, and the
// files it supersedes are removed a batch at a time), and never an equality delete. Random
// writes, upserts and deletes over a small key space (so keys are updated across files and deleted, re-inserted
// and deleted again across commits), partitioned or not, read back with iceberg-go's scanner as the sequential
// model after every few commits.
func TestPositionDeletesV2Model(t *testing.T) {
	for _, partitioned := range []bool{false, true} {
		t.Run(fmt.Sprintf("partitioned=%v", partitioned), func(t *testing.T) {
			ctx := context.Background()
			cat := openCatalog(t)
			ident := table.Identifier{"mor", "pos2"}
			create := []iceberg.CreateOption{iceberg.IdentifierFields("id"), iceberg.FormatVersion(2)}
			if partitioned {
				create = append(create, iceberg.PartitionBy("bucket(4, id)"))
			}
			w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(kvSchema, create...),
				iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompaction(0), iceberg.WithFlushRows(50))
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(7, 18))
			model := kvModel{}
			ops := &kvOps{rng: rng, keySpace: 200, maxRows: 30, writes: 2, next: 1_000_000}
			for round := 0; round < 6; round++ {
				for op := 0; op < 15; op++ {
					ops.apply(t, ctx, w, model)
					if rng.IntN(3) == 0 {
						if err := w.Flush(ctx); err != nil {
							t.Fatal(err)
						}
					}
				}
				if err := w.Flush(ctx); err != nil {
					t.Fatal(err)
				}
				compareKV(t, readKV(t, cat, ident), model)
				live := liveDeletes(t, cat, ident)
				if live.eq != 0 {
					t.Fatalf("round %d: %d equality delete files; want position deletes only", round, live.eq)
				}
				if live.pos == 0 && round > 0 {
					t.Fatalf("round %d: no position delete file", round)
				}
				// One live file per data file, but for superseded ones waiting to be removed in a batch.
				if extra := live.pos - len(live.perData); extra >= iceberg.SupersededBatch {
					t.Fatalf("round %d: %d live position delete files on %d data files; want at most %d more",
						round, live.pos, len(live.perData), iceberg.SupersededBatch-1)
				}
				if live.unscoped != 0 {
					t.Fatalf("round %d: %d position delete files without a referenced data file", round, live.unscoped)
				}
			}
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
			compareKV(t, readKV(t, cat, ident), model)
			// Superseded files were removed along the way (a replace snapshot), not only accumulated.
			removals := replaceSnapshots(t, cat, ident)
			if removals == 0 {
				t.Fatal("no snapshot removed superseded position delete files")
			}
		})
	}
}

// TestPositionDeletesV2DeletedTwice: a key updated in a later file, deleted, inserted again and deleted again
// across commits, and a data file whose rows are deleted over several commits: the table reads back as the
// model after each commit, and the data file's newest position delete file holds every position deleted so far.
func TestPositionDeletesV2DeletedTwice(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"mor", "pos2twice"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(kvSchema, iceberg.IdentifierFields("id"),
		iceberg.FormatVersion(2)), iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompaction(0))
	if err != nil {
		t.Fatal(err)
	}
	model := kvModel{}
	step := func(what string, f func() error) {
		t.Helper()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if err := w.Flush(ctx); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		compareKV(t, readKV(t, cat, ident), model)
	}
	var ids []int64
	for id := int64(0); id < 10; id++ {
		ids = append(ids, id)
		model.insert(id, id)
	}
	step("write", func() error { return w.Write(ctx, kvBatch(ids, ids)) })
	model.upsert(1, 100)
	step("update 1", func() error { return w.Upsert(ctx, kvBatch([]int64{1}, []int64{100})) })
	model.del(1)
	model.del(2)
	step("delete 1 2", func() error { return w.Delete(ctx, keyBatch([]int64{1, 2})) })
	model.upsert(1, 101)
	step("insert 1 again", func() error { return w.Upsert(ctx, kvBatch([]int64{1}, []int64{101})) })
	model.del(1)
	model.del(3)
	step("delete 1 3", func() error { return w.Delete(ctx, keyBatch([]int64{1, 3})) })
	model.del(1) // a key not in the table: no delete at all
	step("delete 1 once more", func() error { return w.Delete(ctx, keyBatch([]int64{1})) })
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	live := liveDeletes(t, cat, ident)
	if live.eq != 0 {
		t.Fatalf("%+v: want no equality delete", live)
	}
	if got := live.positions[firstDataFile(t, cat, ident, 10)]; got != 3 {
		t.Fatalf("the first data file's newest position delete file holds %d positions, want 3 (keys 1, 2, 3: "+
			"each file merges the earlier ones)", got)
	}
}
