package iceberg_test

import (
	"context"
	"testing"

	"github.com/apache/iceberg-go/table"

	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/seed"
)

// A writer alone on its table commits without loading the table first: the table its last commit left is the
// head. When another writer commits in between, the attempt built on the stale table is rejected, the retry
// reloads at once, nothing is lost or doubled, and the next commits load first for a while.
func TestCommitsBuildOnTheTableTheirLastCommitLeft(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	base := openCatalog(t)
	cat := &slowCatalog{Catalog: base}
	ident := table.Identifier{"trips", "events"}
	createTable(t, ctx, base, ident, seed.Schema)
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithFlushInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	g := seed.New(0, 1)
	commitSeed(t, w, g, 1, 10) // the first commit builds on the table NewWriter loaded
	loads := cat.loadCount()
	commitSeed(t, w, g, 5, 10)
	if n := cat.loadCount() - loads; n != 0 {
		t.Fatalf("%d table loads for 5 commits of a writer alone on its table, want 0", n)
	}
	if st := w.Stats(); st.Conflicts != 0 || st.Retries != 0 {
		t.Fatalf("alone on the table: %d conflicts, %d retries", st.Conflicts, st.Retries)
	}

	other, err := iceberg.NewWriter(ctx, base, ident, iceberg.WithFlushInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	commitSeed(t, other, seed.New(1_000_000, 2), 1, 10)
	if err := other.Close(ctx); err != nil {
		t.Fatal(err)
	}
	loads = cat.loadCount()
	commitSeed(t, w, g, 1, 10)
	st := w.Stats()
	if st.Conflicts != 1 || st.Retries != 1 {
		t.Fatalf("after another writer's commit: %d conflicts, %d retries, want 1 and 1", st.Conflicts, st.Retries)
	}
	if n := cat.loadCount() - loads; n != 1 {
		t.Fatalf("%d table loads for the commit after another writer's, want 1 (the retry's)", n)
	}
	loads = cat.loadCount()
	commitSeed(t, w, g, 3, 10)
	if n := cat.loadCount() - loads; n != 3 {
		t.Fatalf("%d table loads for 3 commits after seeing another writer, want 3 (one each)", n)
	}
	if st := w.Stats(); st.Conflicts != 1 {
		t.Fatalf("%d conflicts, want still 1: commits that load first do not build on a stale table", st.Conflicts)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	counts, _ := readRows(t, base, ident)
	if len(counts) != 110 {
		t.Fatalf("table holds %d ids, want 110", len(counts))
	}
	for id, n := range counts {
		if n != 1 {
			t.Fatalf("id %d appears %d times", id, n)
		}
	}
}

// The maintainer's conversion of equality deletes builds on the table the writer's last commit left: a v2
// writer alone on its table, upserting (equality deletes every commit: its key index is off, else it writes
// position deletes) and converting every 2 commits, loads no table over 6 commits and 3 passes (each waited for
// before the next commit, so none is skipped), and the table reads back as the model.
func TestConversionBuildsOnTheTableTheLastCommitLeft(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := &slowCatalog{Catalog: openCatalog(t)}
	ident := table.Identifier{"trips", "converted"}
	events := make(conversions, 8)
	w, err := iceberg.NewWriter(ctx, cat, ident,
		iceberg.WithCreate(kvSchema, iceberg.IdentifierFields("id"), iceberg.FormatVersion(2)),
		iceberg.WithFlushInterval(0), iceberg.WithDeleteConversionEvery(2), iceberg.WithSmallFileCompactionEvery(0),
		iceberg.WithKeyIndexBytes(0), iceberg.WithHooks(events))
	if err != nil {
		t.Fatal(err)
	}
	model := kvModel{}
	upsert := func(c int) {
		t.Helper()
		ids, vs := make([]int64, 20), make([]int64, 20)
		for i := range ids {
			ids[i], vs[i] = int64(c*15+i), int64(c) // the first 5 update the previous commit's last 5
			model.upsert(ids[i], vs[i])
		}
		rec := kvBatch(ids, vs)
		defer rec.Release()
		if err := w.Upsert(ctx, rec); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		// The pass runs off the commit path: waiting for it keeps the next one due from being skipped.
		<-iceberg.BackgroundPassDoneForTest(w)
	}
	upsert(0)
	loads := cat.loadCount()
	for c := 1; c <= 6; c++ {
		upsert(c)
	}
	if n := cat.loadCount() - loads; n != 0 {
		t.Errorf("%d table loads for 6 commits and their conversions, want 0", n)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	close(events)
	passes := 0
	for ev := range events {
		if ev.Err != nil || !ev.Automatic || ev.Result.EqualityDeleteFiles == 0 || ev.Result.Attempts != 1 {
			t.Errorf("conversion pass: %+v", ev)
		}
		passes++
	}
	if passes != 3 {
		t.Errorf("%d conversion passes, want 3 (every 2 commits of 7)", passes)
	}
	compareKV(t, readKV(t, cat.Catalog, ident), model)
}

// The maintainer's small-file compaction commits on the table the writer's last commit left, as the writer's
// commits and the conversion do: a writer alone on its table, appending 8 small files and compacting every 8
// commits, loads no table over the 8 commits and the pass (waited for), the pass rewrites the 8 files into one
// in one attempt, and the table reads back every row once. (Before: one table load a pass.)
func TestSmallFileCompactionBuildsOnTheTableTheLastCommitLeft(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := &slowCatalog{Catalog: openCatalog(t)}
	ident := table.Identifier{"trips", "compacted"}
	events := make(compactions, 4)
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema), iceberg.WithFlushInterval(0),
		iceberg.WithSmallFileCompactionEvery(8), iceberg.WithHooks(events))
	if err != nil {
		t.Fatal(err)
	}
	g := seed.New(0, 1)
	loads := cat.loadCount()
	commitSeed(t, w, g, 8, 10)
	<-iceberg.BackgroundPassDoneForTest(w) // the pass the 8th commit made due
	if n := cat.loadCount() - loads; n != 0 {
		t.Errorf("%d table loads for 8 commits and a small-file compaction, want 0", n)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	close(events)
	passes := 0
	for ev := range events {
		if ev.Err != nil || !ev.Automatic || !ev.SmallOnly || ev.Result.RewrittenDataFiles != 8 || ev.Result.Attempts != 1 {
			t.Errorf("compaction pass: %+v", ev)
		}
		passes++
	}
	if passes != 1 {
		t.Errorf("%d compaction passes, want 1", passes)
	}
	counts, _ := readRows(t, cat.Catalog, ident)
	if len(counts) != 80 {
		t.Fatalf("table holds %d ids, want 80", len(counts))
	}
	for id, n := range counts {
		if n != 1 {
			t.Fatalf("id %d appears %d times", id, n)
		}
	}
}
