package iceberg_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/seed"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// commitPositions writes n rows of g (none when n is 0), records positions on the same buffer and flushes: one
// commit carrying both.
func commitPositions(t *testing.T, w *iceberg.Writer, g *seed.Generator, n int, positions map[string]string) {
	t.Helper()
	if n > 0 {
		writeSeed(t, w, g, n)
	}
	if err := w.CheckpointPositions(context.Background(), positions); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// assertPositions fails unless the table's positions, read by a process without a writer, are exactly want.
func assertPositions(t *testing.T, cat icecatalog.Catalog, ident table.Identifier, want map[string]string) {
	t.Helper()
	got, err := iceberg.Positions(context.Background(), cat, ident)
	if err != nil {
		t.Fatal(err)
	}
	if got == nil || !maps.Equal(got, want) {
		t.Fatalf("positions %v, want %v", got, want)
	}
}

// positionsWriter opens a writer on the seed-event table ident (created if missing), sealed by Flush only, closed
// when the test ends.
func positionsWriter(t *testing.T, cat icecatalog.Catalog, ident table.Identifier, opts ...iceberg.Option) *iceberg.Writer {
	t.Helper()
	ctx := context.Background()
	w, err := iceberg.NewWriter(ctx, cat, ident, append([]iceberg.Option{iceberg.WithCreate(seed.Schema),
		iceberg.WithFlushInterval(0)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close(ctx) })
	return w
}

// assertSideFilesReferenced fails unless every side file in the table's metadata folder is named by a retained
// snapshot or by a positions mirror: files of attempts that did not commit and of expired snapshots are gone.
// It returns how many there are.
func assertSideFilesReferenced(t *testing.T, cat icecatalog.Catalog, ident table.Identifier) int {
	t.Helper()
	tbl := tabletest.Load(t, cat, ident)
	named := map[string]bool{}
	for _, s := range tbl.Metadata().Snapshots() {
		if p := s.Summary.Properties["icewriter.positions"]; p != "" {
			named[localDir(t, p)] = true
		}
	}
	for k, v := range tbl.Properties() {
		if strings.HasPrefix(k, "icewriter.positions.") {
			var m struct{ Path string }
			if err := json.Unmarshal([]byte(v), &m); err != nil {
				t.Fatalf("mirror %s=%s: %v", k, v, err)
			}
			named[localDir(t, m.Path)] = true
		}
	}
	files := positionFiles(t, cat, ident)
	for _, f := range files {
		if !named[f] {
			t.Fatalf("side file %s is named by no snapshot or mirror (%d files, %d named)", filepath.Base(f), len(files), len(named))
		}
	}
	return len(files)
}

// TestPositionsCommitWithRows: positions commit in the snapshot that adds the rows they cover, not before the
// rows; a run that does not commit commits neither.
func TestPositionsCommitWithRows(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := &slowCatalog{Catalog: openCatalog(t)}
	ident := table.Identifier{"pos", "rows"}
	w := positionsWriter(t, cat, ident, iceberg.WithWriterID("kafka-0"))
	assertPositions(t, cat, ident, map[string]string{})
	g := seed.New(0, 1)
	writeSeed(t, w, g, 10)
	if err := w.CheckpointPositions(context.Background(), map[string]string{"orders/0": "10", "orders/1": "7"}); err != nil {
		t.Fatal(err)
	}
	assertPositions(t, cat, ident, map[string]string{}) // recorded, not committed
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"orders/0": "10", "orders/1": "7"}
	assertPositions(t, cat, ident, want)
	if got, err := w.Positions(ctx); err != nil || !maps.Equal(got, want) {
		t.Fatalf("Writer.Positions = %v, %v", got, err)
	}
	head := w.Table().CurrentSnapshot()
	if head.Summary.Properties["added-records"] != "10" || head.Summary.Properties["icewriter.positions"] == "" {
		t.Fatalf("the snapshot adding the rows must name the positions: %v", head.Summary.Properties)
	}
	counts, _ := readRows(t, cat, ident)
	assertIDs(t, counts, 0, 10)

	// A second writer whose commit never reaches the table: neither its rows nor its positions appear.
	failing, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithWriterID("kafka-1"), iceberg.WithFlushInterval(0),
		iceberg.WithCommitTimeout(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer failing.Abort(ctx)
	cat.mu.Lock()
	cat.failBefore = 1 << 20
	cat.mu.Unlock()
	writeSeed(t, failing, seed.New(1000, 2), 5)
	if err := failing.CheckpointPositions(context.Background(), map[string]string{"orders/0": "99", "orders/2": "5"}); err != nil {
		t.Fatal(err)
	}
	if err := failing.Flush(ctx); !errors.Is(err, iceberg.ErrWriterFailed) {
		t.Fatalf("Flush with every commit failing: %v", err)
	}
	cat.mu.Lock()
	cat.failBefore = 0
	cat.mu.Unlock()
	assertPositions(t, cat, ident, want)
	counts, _ = readRows(t, cat, ident)
	assertIDs(t, counts, 0, 10)
}

// TestPositionsAcrossWriters: positions belong to the table: two writer IDs record different partitions and
// both are read back merged; a partition taken over by the other ID reads back with its newer value; a
// restarted writer reads them all.
func TestPositionsAcrossWriters(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"pos", "group"}
	a, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema), iceberg.WithWriterID("member-a"),
		iceberg.WithFlushInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	b := positionsWriter(t, cat, ident, iceberg.WithWriterID("member-b"))
	want := map[string]string{}
	fromA, fromB := map[string]string{}, map[string]string{}
	for i := 0; i < 5; i++ {
		fromA[fmt.Sprintf("topic/%d", i)] = fmt.Sprintf("a-%d", 100+i)
		fromB[fmt.Sprintf("topic/%d", 5+i)] = fmt.Sprintf("b-%d", 200+i)
	}
	commitPositions(t, a, seed.New(0, 1), 10, fromA)
	commitPositions(t, b, seed.New(1000, 2), 10, fromB)
	maps.Copy(want, fromA)
	maps.Copy(want, fromB)
	assertPositions(t, cat, ident, want)

	// A rebalance hands topic/0 to member-b, which resumes from a's position and moves it on.
	got, err := b.Positions(ctx)
	if err != nil || got["topic/0"] != "a-100" {
		t.Fatalf("member-b reads topic/0 = %q (%v), want a's a-100", got["topic/0"], err)
	}
	commitPositions(t, b, seed.New(2000, 3), 5, map[string]string{"topic/0": "b-150"})
	want["topic/0"] = "b-150"
	assertPositions(t, cat, ident, want)

	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	restarted := positionsWriter(t, cat, ident, iceberg.WithWriterID("member-a"))
	if got, err := restarted.Positions(ctx); err != nil || !maps.Equal(got, want) {
		t.Fatalf("restarted writer reads %v (%v), want %v", got, err, want)
	}
	counts, _ := readRows(t, cat, ident)
	if len(counts) != 25 {
		t.Fatalf("table has %d ids, want 25", len(counts))
	}
}

// TestPositionsWithoutRows: positions with no rows and no token commit alone (an empty snapshot names them);
// positions that change nothing write no side file.
func TestPositionsWithoutRows(t *testing.T) {
	cat := openCatalog(t)
	ident := table.Identifier{"pos", "idle"}
	w := positionsWriter(t, cat, ident)
	commitPositions(t, w, nil, 0, map[string]string{"shard-1": "seq-42"})
	assertPositions(t, cat, ident, map[string]string{"shard-1": "seq-42"})
	head := w.Table().CurrentSnapshot()
	if head.Summary.Properties["added-records"] != "" && head.Summary.Properties["added-records"] != "0" {
		t.Fatalf("an empty snapshot should carry the positions: %v", head.Summary.Properties)
	}
	if n := len(positionFiles(t, cat, ident)); n != 1 {
		t.Fatalf("%d side files, want 1", n)
	}
	commitPositions(t, w, nil, 0, map[string]string{"shard-1": "seq-42"})
	if n := len(positionFiles(t, cat, ident)); n != 1 {
		t.Fatalf("positions that change nothing wrote a side file: %d files", n)
	}
	if now := w.Table().CurrentSnapshot(); now.SnapshotID != head.SnapshotID {
		t.Fatalf("positions that change nothing, with no rows, committed snapshot %d", now.SnapshotID)
	}
	// Rows without a new position: their commit names no side file.
	writeSeed(t, w, seed.New(0, 1), 5)
	if err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if p := w.Table().CurrentSnapshot().Summary.Properties["icewriter.positions"]; p != "" {
		t.Fatalf("a commit changing no position names a side file: %s", p)
	}
	assertPositions(t, cat, ident, map[string]string{"shard-1": "seq-42"})
}

// TestPositionsSurviveExpiry: the writer's snapshot expiry removes the snapshots that named positions; the
// mirror keeps the newest, and the side files only expired snapshots named are deleted.
func TestPositionsSurviveExpiry(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"pos", "expiry"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema), iceberg.WithWriterID("cdc"),
		iceberg.WithFlushInterval(0), iceberg.WithKeepSnapshots(2), iceberg.WithSmallFileCompactionEvery(0))
	if err != nil {
		t.Fatal(err)
	}
	g := seed.New(0, 1)
	want := map[string]string{}
	for i := 0; i < 3; i++ {
		p := map[string]string{"slot": strconv.Itoa(i), fmt.Sprintf("table/%d", i): "lsn-" + strconv.Itoa(i)}
		commitPositions(t, w, g, 5, p)
		maps.Copy(want, p)
	}
	commitSeed(t, w, g, 30, 5)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	tbl := tabletest.Load(t, cat, ident)
	snaps := tbl.Metadata().Snapshots()
	if len(snaps) > 14 {
		t.Fatalf("expiry did not run: %d snapshots", len(snaps))
	}
	for _, s := range snaps {
		if p := s.Summary.Properties["icewriter.positions"]; p != "" {
			t.Fatalf("snapshot %d naming positions was not expired", s.SnapshotID)
		}
	}
	assertPositions(t, cat, ident, want)
	if n := assertSideFilesReferenced(t, cat, ident); n != 1 {
		t.Fatalf("%d side files left, want the current one only", n)
	}
	restarted := positionsWriter(t, cat, ident, iceberg.WithWriterID("cdc"))
	// The next positions commit builds on the mirror's file: nothing recorded before expiry is lost.
	commitPositions(t, restarted, g, 1, map[string]string{"slot": "3"})
	want["slot"] = "3"
	assertPositions(t, cat, ident, want)
}

// TestPositionsThroughCoordinator: a run forwarded to a coordinator (Run.MarshalBinary and UnmarshalBinary,
// then NewCatalogCommitter) keeps its positions.
func TestPositionsThroughCoordinator(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"pos", "coord"}
	createTable(t, ctx, cat, ident, seed.Schema)
	coord := iceberg.NewCatalogCommitter(cat, time.Minute)
	runs := 0
	var mu sync.Mutex
	want := map[string]string{}
	for i, id := range []string{"w-0", "w-1"} {
		w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithWriterID(id), iceberg.WithFlushInterval(0),
			iceberg.WithCommitter(forwarder{coord: coord, mu: &mu, runs: &runs}))
		if err != nil {
			t.Fatal(err)
		}
		p := map[string]string{id: strconv.Itoa(i), "shared": id}
		commitPositions(t, w, seed.New(int64(i)*1000, uint64(i)), 10, p)
		maps.Copy(want, p)
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if runs < 2 {
		t.Fatalf("%d runs went through the coordinator", runs)
	}
	assertPositions(t, cat, ident, want)
	counts, _ := readRows(t, cat, ident)
	if len(counts) != 20 {
		t.Fatalf("table has %d ids, want 20", len(counts))
	}
}

// TestPositionsConcurrentWriters: two writers commit at once, each recording 20 partitions one commit at a
// time; conflicts retry and re-merge on the new head, so no partition's position is lost. (Two writers
// committing at once conflict within a few commits; 20 each keep the test to seconds.)
func TestPositionsConcurrentWriters(t *testing.T) {
	t.Parallel() // a long test that mostly waits: see TestMain
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"pos", "concurrent"}
	createTable(t, ctx, cat, ident, seed.Schema)
	const partitions = 20
	want := map[string]string{}
	var wg sync.WaitGroup
	writers := make([]*iceberg.Writer, 2)
	for i := range writers {
		w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithWriterID(fmt.Sprintf("c-%d", i)), iceberg.WithFlushInterval(0))
		if err != nil {
			t.Fatal(err)
		}
		writers[i] = w
		for p := 0; p < partitions; p++ {
			want[fmt.Sprintf("c-%d/%d", i, p)] = strconv.Itoa(p)
		}
	}
	for i, w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := seed.New(int64(i)*1000, uint64(i))
			for p := 0; p < partitions; p++ {
				rec := g.Batch(2)
				err := w.Write(ctx, rec)
				rec.Release()
				if err == nil {
					err = w.CheckpointPositions(context.Background(), map[string]string{fmt.Sprintf("c-%d/%d", i, p): strconv.Itoa(p)})
				}
				if err == nil {
					err = w.Flush(ctx)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	var retries int64
	for _, w := range writers {
		retries += w.Stats().Retries
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d attempts retried", retries)
	assertPositions(t, cat, ident, want)
	counts, _ := readRows(t, cat, ident)
	if len(counts) != 2*2*partitions {
		t.Fatalf("table has %d ids, want %d", len(counts), 2*2*partitions)
	}
	assertSideFilesReferenced(t, cat, ident)
}

// TestPositionsRetryReMerges: another writer's positions commit lands between an attempt's build and its
// commit; the retry re-merges on the new head, keeping both, and the failed attempt's side file is deleted.
// A lost reply after the commit applied and a failure before it keep exactly the side files referenced too.
func TestPositionsRetryReMerges(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := &slowCatalog{Catalog: openCatalog(t)}
	ident := table.Identifier{"pos", "retry"}
	w := positionsWriter(t, cat, ident, iceberg.WithWriterID("a"))
	other := positionsWriter(t, cat, ident, iceberg.WithWriterID("b"))
	g, og := seed.New(0, 1), seed.New(1000, 2)
	commitPositions(t, w, g, 5, map[string]string{"p/0": "5"})
	if err := other.CheckpointPositions(context.Background(), map[string]string{"p/1": "50"}); err != nil {
		t.Fatal(err)
	}
	rec := og.Batch(5)
	defer rec.Release()
	commitBeforeNext(t, ctx, cat, other, other.Write, rec)
	before := w.Stats().Retries
	commitPositions(t, w, g, 5, map[string]string{"p/0": "10", "p/2": "1"})
	if st := w.Stats(); st.Retries == before {
		t.Fatalf("the commit did not meet the other writer's: %+v", st)
	}
	assertPositions(t, cat, ident, map[string]string{"p/0": "10", "p/1": "50", "p/2": "1"})
	assertSideFilesReferenced(t, cat, ident)

	for _, fault := range []string{"fail before", "lose reply"} {
		before := w.Stats().Retries
		cat.mu.Lock()
		if fault == "fail before" {
			cat.failBefore = 1
		} else {
			cat.loseReplies = 1
		}
		cat.mu.Unlock()
		commitPositions(t, w, g, 5, map[string]string{"p/0": fault})
		assertPositions(t, cat, ident, map[string]string{"p/0": fault, "p/1": "50", "p/2": "1"})
		assertSideFilesReferenced(t, cat, ident)
		if st := w.Stats(); st.Retries == before {
			t.Fatalf("%s: the fault cost no retry: %+v", fault, st)
		}
	}
	counts, _ := readRows(t, cat, ident)
	for id := int64(1000); id < 1005; id++ { // the other writer's rows
		if counts[id] != 1 {
			t.Fatalf("id %d appears %d times", id, counts[id])
		}
		delete(counts, id)
	}
	assertIDs(t, counts, 0, 20)
}

// TestPositionsRollback: positions follow the branch history: after a rollback to a snapshot before a positions
// commit they are the older ones, and they stay so when the writer's expiry removes the rolled-back commit
// (it re-derives the mirror from the ancestry first). The next commit merges into the restored positions.
func TestPositionsRollback(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"pos", "rollback"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema), iceberg.WithWriterID("src"),
		iceberg.WithFlushInterval(0), iceberg.WithKeepSnapshots(0), iceberg.WithSmallFileCompactionEvery(0))
	if err != nil {
		t.Fatal(err)
	}
	g := seed.New(0, 1)
	commitPositions(t, w, g, 5, map[string]string{"p": "1"})
	commitSeed(t, w, g, 1, 5)
	between := w.Table().CurrentSnapshot().SnapshotID
	commitPositions(t, w, g, 5, map[string]string{"p": "2"})
	assertPositions(t, cat, ident, map[string]string{"p": "2"})
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	rollbackTo(t, cat, ident, between)
	assertPositions(t, cat, ident, map[string]string{"p": "1"})

	// Another writer commits rows and expires everything but 2 snapshots: both positions commits go.
	expirer, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithKeepSnapshots(2), iceberg.WithFlushInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	og := seed.New(1000, 2)
	commitSeed(t, expirer, og, 20, 2)
	for _, s := range expirer.Table().Metadata().Snapshots() {
		if s.Summary.Properties["icewriter.positions"] != "" {
			t.Fatalf("snapshot %d naming positions was not expired", s.SnapshotID)
		}
	}
	assertPositions(t, cat, ident, map[string]string{"p": "1"})
	commitPositions(t, expirer, og, 1, map[string]string{"q": "7"})
	assertPositions(t, cat, ident, map[string]string{"p": "1", "q": "7"})
	if err := expirer.Close(ctx); err != nil {
		t.Fatal(err)
	}
	counts, _ := readRows(t, cat, ident)
	if len(counts) != 10+41 {
		t.Fatalf("table has %d ids, want 51", len(counts))
	}
}

// TestPositionsUnreadable: a side file that cannot be read (corrupt, missing) is an error naming it, not an
// empty map, for a reader without a writer and for a writer that never read it.
func TestPositionsUnreadable(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"pos", "lost"}
	w := positionsWriter(t, cat, ident)
	commitPositions(t, w, seed.New(0, 1), 1, map[string]string{"p": "1"})
	files := positionFiles(t, cat, ident)
	if len(files) != 1 {
		t.Fatalf("%d side files, want 1", len(files))
	}
	if err := os.WriteFile(files[0], []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := iceberg.Positions(ctx, cat, ident)
	if err == nil || !strings.Contains(err.Error(), filepath.Base(files[0])) {
		t.Fatalf("a corrupt side file: %v, %v; want an error naming %s", got, err, filepath.Base(files[0]))
	}
	if err := os.Remove(files[0]); err != nil {
		t.Fatal(err)
	}
	if got, err := iceberg.Positions(ctx, cat, ident); err == nil || !strings.Contains(err.Error(), filepath.Base(files[0])) {
		t.Fatalf("a missing side file: %v, %v; want an error naming %s", got, err, filepath.Base(files[0]))
	}
	fresh := positionsWriter(t, cat, ident)
	if got, err := fresh.Positions(ctx); err == nil || !strings.Contains(err.Error(), filepath.Base(files[0])) {
		t.Fatalf("Writer.Positions on a missing side file: %v, %v; want an error naming it", got, err)
	}
}

// TestPositionsTooLarge: a partition key or position over 1 KiB is refused with an error naming the partition.
func TestPositionsTooLarge(t *testing.T) {
	cat := openCatalog(t)
	ident := table.Identifier{"pos", "large"}
	w := positionsWriter(t, cat, ident)
	for _, tc := range []struct{ partition, position string }{
		{strings.Repeat("k", 1025), "1"},
		{"orders/3", strings.Repeat("9", 1025)},
		{"orders/4", "\xff\xfe"},
	} {
		err := w.CheckpointPositions(context.Background(), map[string]string{tc.partition: tc.position})
		if !errors.Is(err, iceberg.ErrInvalidPosition) || !strings.Contains(err.Error(), tc.partition[:8]) {
			t.Fatalf("partition %.8q: %v", tc.partition, err)
		}
	}
	if err := w.CheckpointPositions(context.Background(), map[string]string{strings.Repeat("k", 1024): strings.Repeat("v", 1024)}); err != nil {
		t.Fatalf("1 KiB each is allowed: %v", err)
	}
}

// sourceRows writes the generator's next n rows through partition src and checkpoints src at position pos.
func sourceRows(t *testing.T, w *iceberg.Writer, src string, g *seed.Generator, n int, pos string) {
	t.Helper()
	rec := g.Batch(n)
	defer rec.Release()
	if err := w.Source(src).Write(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Source(src).Checkpoint(context.Background(), pos); err != nil {
		t.Fatal(err)
	}
}

// resumeAt resumes partition src on w and fails unless the table holds want there ("" for none).
func resumeAt(t *testing.T, w *iceberg.Writer, src, want string) {
	t.Helper()
	got, ok, err := w.Source(src).Resume(context.Background())
	if err != nil || got != want || ok != (want != "") {
		t.Fatalf("resume %s: %q, %v (%v), want %q", src, got, ok, err, want)
	}
}

// TestPositionMovedFencesPausedWriter hands a partition from writer a to writer b while a still holds rows of
// it (a consumer paused past its session timeout): b resumes from the table and commits the same records, and
// a's commit then fails with ErrPositionMoved instead of adding them again and moving the position back. A
// writer that only resumed a partition, never committed it, is fenced the same way; one that released its
// partition with Abort and resumed it again commits as usual.
func TestPositionMovedFencesPausedWriter(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"pos", "handover"}
	a := positionsWriter(t, cat, ident, iceberg.WithWriterID("member-a"), iceberg.WithCheckpoints())
	b := positionsWriter(t, cat, ident, iceberg.WithWriterID("member-b"), iceberg.WithCheckpoints())

	// t/2 goes a -> b -> a properly: a releases it, b resumes and commits, a resumes again and commits.
	resumeAt(t, a, "t/2", "")
	sourceRows(t, a, "t/2", seed.New(200, 1), 5, "5")
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Source("t/2").Abort(ctx); err != nil {
		t.Fatal(err)
	}
	resumeAt(t, b, "t/2", "5")
	sourceRows(t, b, "t/2", seed.New(205, 2), 5, "10")
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	resumeAt(t, a, "t/2", "10")
	sourceRows(t, a, "t/2", seed.New(210, 3), 5, "15")
	if err := a.Flush(ctx); err != nil {
		t.Fatalf("a commits t/2 after resuming it again: %v", err)
	}

	// t/0: a commits records 0..9, holds 10..19 uncommitted when the group hands t/0 to b.
	resumeAt(t, a, "t/0", "")
	sourceRows(t, a, "t/0", seed.New(0, 4), 10, "10")
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	sourceRows(t, a, "t/0", seed.New(10, 5), 10, "20")
	resumeAt(t, b, "t/0", "10")
	sourceRows(t, b, "t/0", seed.New(10, 5), 10, "20")
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	err := a.Flush(ctx)
	if !errors.Is(err, iceberg.ErrPositionMoved) || !errors.Is(err, iceberg.ErrWriterFailed) {
		t.Fatalf("paused writer's commit: %v, want ErrPositionMoved and ErrWriterFailed", err)
	}
	if msg := err.Error(); !strings.Contains(msg, `"t/0"`) || !strings.Contains(msg, `"20"`) {
		t.Errorf("error %q does not name the partition and the table's position", msg)
	}

	// t/1: c resumes it (no position yet) and holds rows; d resumes it too and commits first.
	c := positionsWriter(t, cat, ident, iceberg.WithWriterID("member-c"), iceberg.WithCheckpoints())
	d := positionsWriter(t, cat, ident, iceberg.WithWriterID("member-d"), iceberg.WithCheckpoints())
	resumeAt(t, c, "t/1", "")
	sourceRows(t, c, "t/1", seed.New(100, 6), 7, "7")
	resumeAt(t, d, "t/1", "")
	sourceRows(t, d, "t/1", seed.New(100, 6), 7, "7")
	if err := d.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(ctx); !errors.Is(err, iceberg.ErrPositionMoved) {
		t.Fatalf("writer that resumed t/1 before another committed it: %v, want ErrPositionMoved", err)
	}

	counts, _ := readRows(t, cat, ident)
	want := map[int64]int{}
	for _, r := range [][2]int64{{0, 20}, {100, 107}, {200, 215}} {
		for id := r[0]; id < r[1]; id++ {
			want[id] = 1
		}
	}
	if !maps.Equal(counts, want) {
		t.Fatalf("table ids %v, want each of %v once", counts, want)
	}
	assertPositions(t, cat, ident, map[string]string{"t/0": "20", "t/1": "7", "t/2": "15"})
}

// TestCheckpointRefusesBackwardsPosition: a position before the partition's last one known to the writer (its
// newest checkpoint, or the one Resume read) is refused with ErrPositionBackwards naming the partition and both
// positions; nothing of the call is recorded, the writer stays usable, equal positions pass, and
// WithPositionOrder decides which positions compare.
func TestCheckpointRefusesBackwardsPosition(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"db", "backwards"}
	w := positionsWriter(t, cat, ident, iceberg.WithWriterID("c0"))
	g := seed.New(0, runSeed(t))
	writeSeed(t, w, g, 5)
	must(t, w.Source("p0").Checkpoint(ctx, "10"))
	writeSeed(t, w, g, 5)
	err := w.Source("p0").Checkpoint(ctx, "5")
	if !errors.Is(err, iceberg.ErrPositionBackwards) {
		t.Fatalf("Checkpoint 5 after 10: %v, want ErrPositionBackwards", err)
	}
	for _, s := range []string{`"p0"`, `"5"`, `"10"`} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not name %s", err, s)
		}
	}
	// One backwards partition refuses the whole call: p1's position is not recorded either.
	if err := w.CheckpointPositions(ctx, map[string]string{"p1": "7", "p0": "9"}); !errors.Is(err, iceberg.ErrPositionBackwards) {
		t.Fatalf("CheckpointPositions with p0 backwards: %v, want ErrPositionBackwards", err)
	}
	must(t, w.Flush(ctx))
	assertPositions(t, cat, ident, map[string]string{"p0": "10"})

	// The writer stays usable; an equal position and later ones pass; strings the default order does not
	// compare are not checked.
	must(t, w.Source("p0").Checkpoint(ctx, "10"))
	commitPositions(t, w, g, 5, map[string]string{"p0": "0011", "p1": "b"})
	commitPositions(t, w, g, 0, map[string]string{"p1": "a"})
	assertPositions(t, cat, ident, map[string]string{"p0": "0011", "p1": "a"})

	// Another writer knows the partition's position once it resumes it.
	w2 := positionsWriter(t, cat, ident, iceberg.WithWriterID("c1"))
	must(t, w2.Source("p0").Checkpoint(ctx, "3")) // nothing known yet: the table is not read per checkpoint
	if pos, _, err := w2.Source("p0").Resume(ctx); err != nil || pos != "0011" {
		t.Fatalf("Resume: %q, %v", pos, err)
	}
	if err := w2.Source("p0").Checkpoint(ctx, "4"); !errors.Is(err, iceberg.ErrPositionBackwards) {
		t.Fatalf("Checkpoint 4 after resuming at 11: %v, want ErrPositionBackwards", err)
	}
	must(t, w2.Source("p0").Checkpoint(ctx, "12"))

	// An order of the caller's: here, "topic-id:offset" compares only within one topic ID.
	byTopic := func(_, a, b string) (int, bool) {
		ta, oa, _ := strings.Cut(a, ":")
		tb, ob, _ := strings.Cut(b, ":")
		if ta != tb {
			return 0, false
		}
		x, _ := strconv.Atoi(oa)
		y, _ := strconv.Atoi(ob)
		return x - y, true
	}
	w3 := positionsWriter(t, cat, table.Identifier{"db", "backwards_topic"}, iceberg.WithPositionOrder(byTopic))
	must(t, w3.Source("t/0").Checkpoint(ctx, "A:10"))
	must(t, w3.Source("t/0").Checkpoint(ctx, "B:1")) // a recreated topic: not compared
	if err := w3.Source("t/0").Checkpoint(ctx, "B:0"); !errors.Is(err, iceberg.ErrPositionBackwards) {
		t.Fatalf("B:0 after B:1: %v, want ErrPositionBackwards", err)
	}
}
