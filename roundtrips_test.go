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
