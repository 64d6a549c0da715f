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
// model after every few commits: 2 rounds of 15 calls (ICEWRITER_SOAK=1: 4).
func TestPositionDeletesV2Model(t *testing.T) {
	t.Parallel() // see TestMain
	// Superseded files are removed eight at a time rather than sixteen (the default): the default run's two
	// rounds of commits still reach a removal, and the bound on live files is as tight relative to the batch.
	const batch = 8
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
				iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompactionEvery(0), iceberg.WithFlushRows(50),
				iceberg.WithSupersededBatchForTest(batch))
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(7, 18))
			model := kvModel{}
			ops := &kvOps{rng: rng, keySpace: 200, maxRows: 30, writes: 2, next: 1_000_000}
			for round := range iceberg.SoakForTest(t, 2, 4) {
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
				if live.Eq != 0 {
					t.Fatalf("round %d: %d equality delete files; want position deletes only", round, live.Eq)
				}
				if live.Pos == 0 && round > 0 {
					t.Fatalf("round %d: no position delete file", round)
				}
				// One live file per data file, but for superseded ones waiting to be removed in a batch.
				if extra := live.Pos - len(live.PerData); extra >= batch {
					t.Fatalf("round %d: %d live position delete files on %d data files; want at most %d more",
						round, live.Pos, len(live.PerData), batch-1)
				}
				if live.Unscoped != 0 {
					t.Fatalf("round %d: %d position delete files without a referenced data file", round, live.Unscoped)
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
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"mor", "pos2twice"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(kvSchema, iceberg.IdentifierFields("id"),
		iceberg.FormatVersion(2)), iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompactionEvery(0))
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
	if live.Eq != 0 {
		t.Fatalf("%+v: want no equality delete", live)
	}
	if got := live.Positions[firstDataFile(t, cat, ident, 10)]; got != 3 {
		t.Fatalf("the first data file's newest position delete file holds %d positions, want 3 (keys 1, 2, 3: "+
			"each file merges the earlier ones)", got)
	}
}

// TestPositionDeletesV2StableWriterRestarts: a writer with a stable ID (WithWriterID) keeps upserting on a
// format-version 2 table while another writer appends to it between its commits (so it places each run on a
// freshly loaded table and catches its key index up), and is closed and opened again on the table, as a
// connector restarts. Every commit that wrote position deletes is recorded in the key index, and a process's
// index takes over the file-scoped position delete files already live on a data file (the process's before, or
// other writers'), so each new one supersedes them: the live position delete files stay at one per live data
// file plus the superseded ones waiting for the next removal batch, with no equality delete but after a
// fallback, and the table reads back as the model after every process.
func TestPositionDeletesV2StableWriterRestarts(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"mor", "pos2restart"}
	const batch = 4
	open := func(opts ...iceberg.Option) *iceberg.Writer {
		w, err := iceberg.NewWriter(ctx, cat, ident, append([]iceberg.Option{iceberg.WithCreate(kvSchema,
			iceberg.IdentifierFields("id"), iceberg.FormatVersion(2)), iceberg.WithFlushInterval(0),
			iceberg.WithSmallFileCompactionEvery(0), iceberg.WithDeleteConversionEvery(0)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	model := kvModel{}
	w := open(iceberg.WithWriterID("cdc"))
	writeIDs(t, ctx, w, model, 40)
	must(t, w.Close(ctx))
	rng := rand.New(rand.NewPCG(18, 2))
	other := int64(1000)
	// Two processes after the first: the second takes over files its predecessor and the other writer left.
	for restart := 0; restart < 2; restart++ {
		w = open(iceberg.WithWriterID("cdc"), iceberg.WithSupersededBatchForTest(batch))
		x := open(iceberg.WithKeyIndexBytes(0))
		for commit := 0; commit < 8; commit++ {
			// Every commit updates keys of the first file and of later ones: each data file's position
			// delete file is superseded again and again.
			var ids, vs []int64
			for _, id := range rng.Perm(40)[:4] {
				v := int64(1000*restart + 10*commit)
				ids, vs = append(ids, int64(id)), append(vs, v)
				model.upsert(int64(id), v)
			}
			must(t, w.Upsert(ctx, kvBatch(ids, vs)))
			must(t, w.Flush(ctx))
			// The other writer's rows: keys the first never touches.
			must(t, x.Write(ctx, kvBatch([]int64{other}, []int64{other})))
			model.insert(other, other)
			other++
			must(t, x.Flush(ctx))
		}
		must(t, x.Close(ctx))
		must(t, w.Close(ctx))
		compareKV(t, readKV(t, cat, ident), model)
		live := liveDeletes(t, cat, ident)
		// Only a run that met the other writer's commit between placing itself and committing falls back.
		if extra := live.Pos - len(live.PerData); extra >= batch {
			t.Fatalf("process %d: %d live position delete files on %d data files (%d equality delete files); "+
				"want at most %d more", restart, live.Pos, len(live.PerData), live.Eq, batch-1)
		}
	}
}
