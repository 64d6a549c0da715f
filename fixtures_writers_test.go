package iceberg_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/seed"
)

// Writers set up for a test and driven through commits: copy-on-write tables, the seed events (internal/seed),
// keyed id rows, fencing, and holding background compaction.

// cowTable writes m files of perFile rows each (one batch, one file) with ids 0..m*perFile-1, sorted or
// shuffled across files, and returns the writer (copy-on-write mode) and which file index holds each id.
func cowTable(t testing.TB, ctx context.Context, m, perFile int, shuffled bool, opts ...iceberg.Option) (*iceberg.Writer, map[int64]int, *slowCatalog, table.Identifier) {
	cat := &slowCatalog{Catalog: openCatalog(t)}
	ident := table.Identifier{"cow", "t"}
	ids := make([]int64, m*perFile)
	for i := range ids {
		ids[i] = int64(i)
	}
	if shuffled {
		rng := rand.New(rand.NewPCG(9, 9))
		rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	}
	w, err := iceberg.NewWriter(ctx, cat, ident, append([]iceberg.Option{
		iceberg.WithCreate(kvSchema, iceberg.IdentifierFields("id")), iceberg.WithMode(iceberg.CopyOnWrite),
		iceberg.WithFlushRows(perFile), iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompactionEvery(0)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	holder := map[int64]int{}
	for f := 0; f < m; f++ {
		chunk := ids[f*perFile : (f+1)*perFile]
		vs := make([]int64, len(chunk))
		for i, id := range chunk {
			holder[id] = f
			vs[i] = id
		}
		if err := w.Write(ctx, kvBatch(chunk, vs)); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return w, holder, cat, ident
}

// closedCowTable writes a table of the format version given as cowTable does (4 files of 50 rows, ids 0..199
// with v = id), closes its writer, and returns the catalog, the table and the model of its rows.
func closedCowTable(t *testing.T, ctx context.Context, version int) (*slowCatalog, table.Identifier, kvModel) {
	t.Helper()
	w, _, cat, ident := cowTable(t, ctx, 4, 50, false,
		iceberg.WithCreate(kvSchema, iceberg.IdentifierFields("id"), iceberg.FormatVersion(version)))
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	model := kvModel{}
	for id := int64(0); id < 200; id++ {
		model.insert(id, id)
	}
	return cat, ident, model
}

// waitStaged waits until w has written at least files data files and every sealed batch is staged for a
// commit (10 s at most), on the writer's own state changes.
func waitStaged(t *testing.T, w *iceberg.Writer, files int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	staged := func() bool { return w.Stats().FilesWritten >= files && iceberg.Staged(w) }
	if err := iceberg.WaitFor(ctx, w, staged); err != nil {
		t.Fatalf("%d data files not staged within 10 s: %+v", files, w.Stats())
	}
}

// takeOver opens a writer with the ID of a running one, which fences that one (NewWriter bumps the ID's epoch),
// and closes it when the test ends.
func takeOver(t testing.TB, ctx context.Context, cat icecatalog.Catalog, ident table.Identifier, id string) *iceberg.Writer {
	t.Helper()
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithWriterID(id), iceberg.WithFlushInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close(ctx) })
	return w
}

// holdFirstPass holds the first background compaction pass of the writer given hold (an option) after it wrote
// its files, before it takes the commit queue: held is closed once it waits, letGo releases it (later passes run
// through). Defer letGo after the writer's Close, so that a failed test does not leave Close waiting for the
// held pass.
func holdFirstPass() (hold iceberg.Option, held <-chan struct{}, letGo func()) {
	h, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hold = iceberg.WithHoldRewritesForTest(func() {
		select {
		case <-h:
			return
		default:
		}
		close(h)
		<-release
	})
	return hold, h, func() { once.Do(func() { close(release) }) }
}

// writeSeed writes the generator's next n rows.
func writeSeed(t *testing.T, w *iceberg.Writer, g *seed.Generator, n int) {
	t.Helper()
	rec := g.Batch(n)
	defer rec.Release()
	if err := w.Write(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
}

// commitSeed makes commits commits of the generator's next rows rows each (Write, then Flush).
func commitSeed(t *testing.T, w *iceberg.Writer, g *seed.Generator, commits, rows int) {
	t.Helper()
	for i := 0; i < commits; i++ {
		writeSeed(t, w, g, rows)
		if err := w.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// seedCommit writes the generator's next rows rows and flushes them: one commit. It returns the error, so that
// writers on goroutines of their own can call it.
func seedCommit(ctx context.Context, w *iceberg.Writer, g *seed.Generator, rows int) error {
	rec := g.Batch(rows)
	err := w.Write(ctx, rec)
	rec.Release()
	if err != nil {
		return err
	}
	return w.Flush(ctx)
}

// writeIDs writes rows (id, v=id) for ids 0..n-1 with w, commits them, and adds them to model.
func writeIDs(t *testing.T, ctx context.Context, w *iceberg.Writer, model kvModel, n int) {
	t.Helper()
	writeIDFiles(t, ctx, w, model, 1, n)
}

// writeIDFiles writes rows (id, v=id) for ids 0..files*perFile-1 with w in files commits of perFile rows each
// (a data file each under the default file size), and adds them to model.
func writeIDFiles(t *testing.T, ctx context.Context, w *iceberg.Writer, model kvModel, files, perFile int) {
	t.Helper()
	for f := range files {
		ids := make([]int64, perFile)
		for i := range ids {
			ids[i] = int64(f*perFile + i)
			model.insert(ids[i], ids[i])
		}
		must(t, w.Write(ctx, kvBatch(ids, ids)))
		must(t, w.Flush(ctx))
	}
}

// upsertDeleteRound upserts the keys given plus random ones below span until ups keys (value: base minus the
// key), deletes dels random keys below span that the round did not upsert, flushes, and fails the test when the
// writer's key index went off; model follows.
func upsertDeleteRound(t *testing.T, w *iceberg.Writer, model kvModel, rng *rand.Rand, keys []int64, span int64, ups, dels int, base int64) {
	t.Helper()
	ctx := context.Background()
	seen := map[int64]bool{}
	up := slices.Clone(keys)
	for _, id := range up {
		seen[id] = true
	}
	for len(up) < ups {
		if id := rng.Int64N(span); !seen[id] {
			seen[id] = true
			up = append(up, id)
		}
	}
	vs := make([]int64, len(up))
	for i, id := range up {
		vs[i] = base - id
		model.upsert(id, vs[i])
	}
	must(t, w.Upsert(ctx, kvBatch(up, vs)))
	var del []int64
	for len(del) < dels {
		if id := rng.Int64N(span); !seen[id] {
			seen[id] = true
			del = append(del, id)
			model.del(id)
		}
	}
	must(t, w.Delete(ctx, keyBatch(del)))
	must(t, w.Flush(ctx))
	if st := w.Stats(); st.KeyIndexBytes == 0 {
		t.Fatal("the key index went off")
	}
}

// mergeOnReadV3Writer creates a format-v3 kvSchema table keyed by id and returns a merge-on-read writer on it
// (no flush interval, no small-file compaction) that has committed keys 0..99 with v = id.
func mergeOnReadV3Writer(t *testing.T, ctx context.Context, cat icecatalog.Catalog, ident table.Identifier) *iceberg.Writer {
	t.Helper()
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(kvSchema, iceberg.IdentifierFields("id"),
		iceberg.FormatVersion(3)), iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompactionEvery(0))
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for id := int64(0); id < 100; id++ {
		ids = append(ids, id)
	}
	must(t, w.Write(ctx, kvBatch(ids, ids)))
	must(t, w.Flush(ctx))
	return w
}
