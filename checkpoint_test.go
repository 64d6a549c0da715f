package iceberg_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/catalog"
	"github.com/icewriter/iceberg/internal/seed"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// TestCheckpointsBoundCommits: with WithCheckpoints nothing after the newest token is committed, by Flush or by
// Close, and LastCheckpoint and OnCommit report the token.
func TestCheckpointsBoundCommits(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"ckpt", "events"}
	var tokens []string
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema), iceberg.WithWriterID("src-0"),
		iceberg.WithCheckpoints(), iceberg.WithFlushRows(30),
		iceberg.WithOnCommit(func(ci iceberg.CommitInfo) { tokens = append(tokens, ci.Token) }))
	if err != nil {
		t.Fatal(err)
	}
	g := seed.New(0, 1)
	writeSeed(t, w, g, 100)
	if err := w.Checkpoint(ctx, "offset=100"); err != nil {
		t.Fatal(err)
	}
	writeSeed(t, w, g, 50)
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if tok, ok, err := w.LastCheckpoint(ctx); err != nil || !ok || tok != "offset=100" {
		t.Fatalf("LastCheckpoint = %q %v %v", tok, ok, err)
	}
	counts, _ := readRows(t, cat, ident)
	assertIDs(t, counts, 0, 100)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.DiscardedRows != 50 {
		t.Fatalf("discarded %d, want 50", st.DiscardedRows)
	}
	counts, _ = readRows(t, cat, ident)
	assertIDs(t, counts, 0, 100)
	if len(tokens) == 0 || tokens[len(tokens)-1] != "offset=100" {
		t.Fatalf("OnCommit tokens %v", tokens)
	}

	// A restarted writer with the same ID resumes from the token; an empty checkpoint still records its token.
	w2, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithWriterID("src-0"), iceberg.WithCheckpoints())
	if err != nil {
		t.Fatal(err)
	}
	if tok, ok, _ := w2.LastCheckpoint(ctx); tok != "offset=100" || !ok {
		t.Fatalf("after restart LastCheckpoint = %q", tok)
	}
	if err := w2.Checkpoint(ctx, "offset=100;heartbeat"); err != nil {
		t.Fatal(err)
	}
	if err := w2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if tok, _, _ := iceberg.LastCheckpoint(ctx, cat, ident, "src-0"); tok != "offset=100;heartbeat" {
		t.Fatalf("token after empty checkpoint: %q", tok)
	}
	if _, ok, _ := iceberg.LastCheckpoint(ctx, cat, ident, "someone-else"); ok {
		t.Fatal("another ID must have no checkpoint")
	}
}

// TestCheckpointsDoNotEndFiles: a checkpoint marks a row boundary, not a file. A source that checkpoints every
// 400 rows gets files sized by the flush policy, every row up to the last checkpoint committed, and the rows
// after it carried into the next batch (committed with the next checkpoint, discarded by Close without one).
func TestCheckpointsDoNotEndFiles(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"ckpt", "boundaries"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema), iceberg.WithWriterID("poll"),
		iceberg.WithCheckpoints(), iceberg.WithFlushRows(20_000), iceberg.WithFlushInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	g := seed.New(0, 1)
	const rows, every = 50_000, 400
	for n := every; n <= rows; n += every {
		writeSeed(t, w, g, every)
		if err := w.Checkpoint(ctx, strconv.Itoa(n)); err != nil {
			t.Fatal(err)
		}
	}
	writeSeed(t, w, g, 150) // after the last checkpoint
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	last := rows / every * every
	counts, _ := readRows(t, cat, ident)
	assertIDs(t, counts, 0, int64(last))
	// 20,000-row seals cut back to the newest checkpoint: files of up to 20,000 rows, never one per checkpoint.
	if st := w.Stats(); st.FilesWritten > 4 || st.Commits > 4 {
		t.Fatalf("%d files in %d commits for %d checkpoints; want the flush policy's 3 or 4", st.FilesWritten,
			st.Commits, rows/every)
	}
	// The 150 rows after the last checkpoint are carried: the next checkpoint commits them.
	writeSeed(t, w, g, 50)
	if err := w.Checkpoint(ctx, "end"); err != nil {
		t.Fatal(err)
	}
	writeSeed(t, w, g, 10)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	counts, _ = readRows(t, cat, ident)
	assertIDs(t, counts, 0, int64(last+200))
	if st := w.Stats(); st.DiscardedRows != 10 {
		t.Fatalf("discarded %d rows, want the 10 after the last checkpoint", st.DiscardedRows)
	}
	if tok, _, _ := iceberg.LastCheckpoint(ctx, cat, ident, "poll"); tok != "end" {
		t.Fatalf("LastCheckpoint = %q, want end", tok)
	}
}

// TestIdleCheckpointsCommitNothing: a checkpoint with no new rows and the token already recorded commits nothing
// (before and after a restart); a new token without rows commits once.
func TestIdleCheckpointsCommitNothing(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"ckpt", "idle"}
	open := func() *iceberg.Writer {
		w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema), iceberg.WithWriterID("idle"),
			iceberg.WithCheckpoints())
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	snapshots := func() int {
		tbl := tabletest.Load(t, cat, ident)
		return len(tbl.Metadata().Snapshots())
	}
	w := open()
	writeSeed(t, w, seed.New(0, 1), 10)
	if err := w.Checkpoint(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	before := snapshots()
	for range 5 {
		if err := w.Checkpoint(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := snapshots(); got != before {
		t.Fatalf("5 idle checkpoints made %d snapshots", got-before)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	w = open() // its fence is a snapshot of its own
	before = snapshots()
	_ = w.Checkpoint(ctx, "a")
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := snapshots(); got != before {
		t.Fatalf("an idle checkpoint after a restart made %d snapshots", got-before)
	}
	_ = w.Checkpoint(ctx, "b")
	_ = w.Checkpoint(ctx, "b")
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := snapshots(); got != before+1 {
		t.Fatalf("a new token made %d snapshots, want 1", got-before)
	}
	if tok, _, _ := iceberg.LastCheckpoint(ctx, cat, ident, "idle"); tok != "b" {
		t.Fatalf("LastCheckpoint = %q, want b", tok)
	}
}

// TestLastCheckpointRollbackAndExpiry: a rollback hides tokens committed after the restored snapshot; snapshot
// expiry does not erase the newest token.
func TestLastCheckpointRollbackAndExpiry(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"ckpt", "rollback"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema), iceberg.WithWriterID("cdc"),
		iceberg.WithCheckpoints(), iceberg.WithKeepSnapshots(0))
	if err != nil {
		t.Fatal(err)
	}
	g := seed.New(0, 1)
	writeSeed(t, w, g, 10)
	_ = w.Checkpoint(ctx, "a")
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	snapA := w.Table().CurrentSnapshot().SnapshotID
	writeSeed(t, w, g, 10)
	_ = w.Checkpoint(ctx, "b")
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	rollbackTo(t, cat, ident, snapA)
	if tok, _, _ := iceberg.LastCheckpoint(ctx, cat, ident, "cdc"); tok != "a" {
		t.Fatalf("after rollback: %q, want a", tok)
	}

	// Another writer appends and expires everything but the last 2 snapshots: "a"'s snapshot is gone.
	other, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithKeepSnapshots(2), iceberg.WithFlushRows(5))
	if err != nil {
		t.Fatal(err)
	}
	commitSeed(t, other, seed.New(1000, 2), 30, 5)
	if err := other.Close(ctx); err != nil {
		t.Fatal(err)
	}
	tbl := tabletest.Load(t, cat, ident)
	if tbl.Metadata().SnapshotByID(snapA) != nil {
		t.Fatalf("snapshot %d should have expired (%d snapshots left)", snapA, len(tbl.Metadata().Snapshots()))
	}
	if tok, ok, _ := iceberg.LastCheckpoint(ctx, cat, ident, "cdc"); tok != "a" || !ok {
		t.Fatalf("after expiry: %q %v, want a", tok, ok)
	}
	// Expiry deleted only unreferenced metadata: every live row still reads back (ids 0..9 kept by the
	// rollback, 1000..1149 from the other writer).
	counts, _ := readRows(t, cat, ident)
	if len(counts) != 160 || counts[0] != 1 || counts[1149] != 1 || counts[15] != 0 {
		t.Fatalf("after expiry the table has %d ids", len(counts))
	}
}

// TestCheckpointsWriteDoesNotDeadlock: with WithCheckpoints, batches sealed by policy after the last token
// cannot commit before the next one. A single-threaded caller writing 1,000 rows between two checkpoints, ten
// such batches against WithMaxUncommitted(4), sees every Write return within 3 s and then reaches its
// Checkpoint.
func TestCheckpointsWriteDoesNotDeadlock(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"ckpt", "uncommitted"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema), iceberg.WithWriterID("c"),
		iceberg.WithCheckpoints(), iceberg.WithFlushRows(100), iceberg.WithMaxUncommitted(4))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort(ctx)
	g := seed.New(0, 1)
	for i := 0; i < 10; i++ { // 1,000 rows between two checkpoints
		rec := g.Batch(100)
		wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := w.Write(wctx, rec)
		cancel()
		rec.Release()
		if err != nil {
			t.Fatalf("Write %d between checkpoints: %v (deadlock: only Checkpoint could unblock it)", i, err)
		}
	}
	if err := w.Checkpoint(ctx, "t1"); err != nil {
		t.Fatal(err)
	}
}

// TestCrashResume kills a writer process at random moments and restarts it with the same writer ID: after each
// kill the table holds exactly the rows before the checkpoint LastCheckpoint returns, and replaying the source
// from there ends with every row exactly once.
func TestCrashResume(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	t.Parallel() // a long test that mostly waits: see TestMain
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(3, 4))
	ctx := context.Background()
	kills := iceberg.SoakForTest(t, 2, 4)           // rounds that kill the child before the one that runs to its end
	total := iceberg.SoakForTest(t, 20_000, 60_000) // the ids the children write, checkpointing after each batch
	for round := 0; ; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.v")
		cmd.Env = append(os.Environ(), "ICEWRITER_CRASH_DIR="+dir, fmt.Sprintf("ICEWRITER_CRASH_SEED=%d", round),
			fmt.Sprintf("ICEWRITER_CRASH_TOTAL=%d", total))
		out, _ := os.Create(filepath.Join(dir, fmt.Sprintf("child-%d.log", round)))
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		finalRound := round >= kills
		if finalRound {
			if err := cmd.Wait(); err != nil {
				t.Fatalf("final child failed: %v (see %s)", err, out.Name())
			}
		} else {
			time.Sleep(time.Duration(300+rng.IntN(1500)) * time.Millisecond)
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		out.Close()

		cat, err := catalog.Open(ctx, "sqlite://"+filepath.Join(dir, "catalog.db"))
		if err != nil {
			t.Fatal(err)
		}
		ident := table.Identifier{"crash", "events"}
		tok, ok, err := iceberg.LastCheckpoint(ctx, cat, ident, "crash-writer")
		var upto int64
		if err == nil && ok {
			upto, _ = strconv.ParseInt(tok, 10, 64)
		}
		if err == nil {
			counts, _ := readRows(t, cat, ident)
			assertIDs(t, counts, 0, upto)
		}
		t.Logf("round %d: checkpoint %d", round, upto)
		cat.(icecatalog.Closer).Close()
		if finalRound {
			if upto != int64(total) {
				t.Fatalf("final checkpoint %d, want %d", upto, total)
			}
			return
		}
	}
}

// TestCrashChild is the process TestCrashResume kills: it resumes from its last checkpoint and writes ids up to
// ICEWRITER_CRASH_TOTAL, checkpointing after every batch.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv("ICEWRITER_CRASH_DIR")
	if dir == "" {
		t.Skip("run by TestCrashResume")
	}
	ctx := context.Background()
	cat := openCatalogAt(t, filepath.Join(dir, "catalog.db"))
	seedN, _ := strconv.Atoi(os.Getenv("ICEWRITER_CRASH_SEED"))
	crashTotal, err := strconv.ParseInt(os.Getenv("ICEWRITER_CRASH_TOTAL"), 10, 64)
	if err != nil {
		t.Fatalf("ICEWRITER_CRASH_TOTAL: %v", err)
	}
	rng := rand.New(rand.NewPCG(uint64(seedN), 1))
	w, err := iceberg.NewWriter(ctx, cat, table.Identifier{"crash", "events"}, iceberg.WithCreate(seed.Schema),
		iceberg.WithWriterID("crash-writer"), iceberg.WithCheckpoints(),
		iceberg.WithFlushInterval(time.Duration(5+rng.IntN(50))*time.Millisecond), iceberg.WithMaxInFlight(1+rng.IntN(3)))
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := w.LastCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	next, _ := strconv.ParseInt(tok, 10, 64)
	g := seed.New(next, uint64(seedN))
	for next < crashTotal {
		n := min(int64(1+rng.IntN(400)), crashTotal-next)
		writeSeed(t, w, g, int(n))
		next += n
		if err := w.Checkpoint(ctx, strconv.FormatInt(next, 10)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rng.IntN(2)) * time.Millisecond)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
