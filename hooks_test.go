package iceberg_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/collide"
	"github.com/icewriter/iceberg/internal/seed"
)

// recorder is a hook of every kind: it keeps the events in the order they were delivered.
type recorder struct {
	mu     sync.Mutex
	events []any
	// committed, when set, runs on each HookCommitted event (on the delivering goroutine).
	committed func(iceberg.CommitInfo)
}

type (
	opened struct{ w *iceberg.Writer }
	closed struct{ w *iceberg.Writer }
)

func (r *recorder) add(ev any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
}

func (r *recorder) OnNewWriter(w *iceberg.Writer)                  { r.add(opened{w}) }
func (r *recorder) OnWriterClosed(w *iceberg.Writer)               { r.add(closed{w}) }
func (r *recorder) OnBatchSealed(ev iceberg.BatchSealed)           { r.add(ev) }
func (r *recorder) OnFileWritten(ev iceberg.FileWritten)           { r.add(ev) }
func (r *recorder) OnCommitAttempt(ev iceberg.CommitAttempt)       { r.add(ev) }
func (r *recorder) OnConflict(ev iceberg.Conflict)                 { r.add(ev) }
func (r *recorder) OnRetry(ev iceberg.Retry)                       { r.add(ev) }
func (r *recorder) OnFenced(ev iceberg.Fenced)                     { r.add(ev) }
func (r *recorder) OnCompaction(ev iceberg.Compaction)             { r.add(ev) }
func (r *recorder) OnExpiry(ev iceberg.Expiry)                     { r.add(ev) }
func (r *recorder) OnBackpressureWait(ev iceberg.BackpressureWait) { r.add(ev) }
func (r *recorder) OnCommitted(ci iceberg.CommitInfo) {
	r.add(ci)
	if r.committed != nil {
		r.committed(ci)
	}
}

// all returns the events recorded so far.
func (r *recorder) all() []any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]any(nil), r.events...)
}

// eventsOf returns the recorded events of type E, in order.
func eventsOf[E any](r *recorder) []E {
	var out []E
	for _, ev := range r.all() {
		if e, ok := ev.(E); ok {
			out = append(out, e)
		}
	}
	return out
}

// TestHooksReportWhatTheWriterDid: a writer's hooks hear of every batch, file, attempt and commit, in order,
// between HookNewWriter and HookWriterClosed, and what they hear adds up to the writer's Stats and to the table.
func TestHooksReportWhatTheWriterDid(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"hooks", "events"}
	rec := &recorder{}
	began := time.Now()
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema), iceberg.WithFlushInterval(0),
		iceberg.WithFlushRows(300), iceberg.WithHooks(rec))
	if err != nil {
		t.Fatal(err)
	}
	g := seed.New(0, 1)
	for range 3 { // 2 batches (300 + 200 rows) per commit
		writeSeed(t, w, g, 300)
		writeSeed(t, w, g, 200)
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	ended := time.Now()
	st := w.Stats()
	evs := rec.all()
	if o, ok := evs[0].(opened); !ok || o.w != w {
		t.Fatalf("first event %#v, want HookNewWriter", evs[0])
	}
	if c, ok := evs[len(evs)-1].(closed); !ok || c.w != w {
		t.Fatalf("last event %#v, want HookWriterClosed", evs[len(evs)-1])
	}

	sealed := eventsOf[iceberg.BatchSealed](rec)
	var sealedRows int64
	for i, b := range sealed {
		sealedRows += b.Rows
		if b.Seq != int64(i+1) || b.Bytes <= 0 || b.Open < 0 || b.At.Before(began) || !slices.Equal(b.Table, ident) {
			t.Errorf("batch sealed %d: %+v", i, b)
		}
	}
	if int64(len(sealed)) != st.Batches || sealedRows != st.RowsAccepted || len(sealed) != 6 {
		t.Errorf("%d batches sealed of %d rows; Stats: %d batches, %d rows", len(sealed), sealedRows, st.Batches, st.RowsAccepted)
	}

	files := eventsOf[iceberg.FileWritten](rec)
	var fileRows, fileBytes int64
	for _, f := range files {
		fileRows += f.Rows
		fileBytes += f.Bytes
		if f.Path == "" || f.Deletes || f.Index != 0 || f.Encode <= 0 || f.Seq < 1 || f.Seq > 6 || f.WriterID != w.ID() {
			t.Errorf("file written: %+v", f)
		}
	}
	if int64(len(files)) != st.FilesWritten || fileBytes != st.BytesWritten || fileRows != 1500 {
		t.Errorf("%d files written, %d bytes, %d rows; Stats: %d files, %d bytes", len(files), fileBytes, fileRows,
			st.FilesWritten, st.BytesWritten)
	}

	commits := eventsOf[iceberg.CommitInfo](rec) // 3 to 6: a batch of 300 rows may commit before the next is sealed
	if int64(len(commits)) != st.Commits || len(commits) < 3 {
		t.Fatalf("%d commits reported, Stats: %d", len(commits), st.Commits)
	}
	var committedBytes, committedRows int64
	var committedFiles, committedBatches int
	for _, ci := range commits {
		committedBytes += ci.FileBytes
		committedRows += ci.Rows
		committedFiles += ci.Files
		committedBatches += ci.Batches
		if ci.Attempts != 1 || ci.Conflicts != 0 || ci.Duration <= 0 || ci.CommitTime.Before(began) ||
			ci.CommitTime.After(ended) || !slices.Equal(ci.Table, ident) || ci.WriterID != w.ID() {
			t.Errorf("commit: %+v", ci)
		}
	}
	if committedBytes != fileBytes || committedRows != 1500 || committedFiles != len(files) || committedBatches != 6 {
		t.Errorf("commits added %d rows in %d files (%d bytes) of %d batches; written: %d files, %d bytes",
			committedRows, committedFiles, committedBytes, committedBatches, len(files), fileBytes)
	}

	// A run's attempts come right before its commit.
	var pending []iceberg.CommitAttempt
	for _, ev := range evs {
		switch ev := ev.(type) {
		case iceberg.CommitAttempt:
			pending = append(pending, ev)
		case iceberg.CommitInfo:
			if len(pending) != 1 || pending[0].Kind != iceberg.KindRun || !pending[0].Sent || pending[0].Err != nil ||
				pending[0].Attempt != 1 || pending[0].Duration <= 0 || pending[0].Duration > ev.Duration {
				t.Errorf("attempts before commit %d..%d: %+v", ev.FirstSeq, ev.LastSeq, pending)
			}
			pending = nil
		}
	}
	counts, _ := readRows(t, cat, ident)
	assertIDs(t, counts, 0, 1500)
}

// TestHooksReportConflictsAndRetries: writers that collide hear of each attempt the catalog rejected, why, and
// each retry: as many as their Stats count.
func TestHooksReportConflictsAndRetries(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	const writers = 3
	base := openCatalog(t)
	ident := table.Identifier{"hooks", "conflicts"}
	createTable(t, ctx, base, ident, seed.Schema)
	recs := make([]*recorder, writers)
	for i := range recs {
		recs[i] = &recorder{}
	}
	stats, err := collide.Writers(ctx, collide.NewCatalog(base, writers), ident, writers, 3, 100, func(i int) []iceberg.Option {
		return []iceberg.Option{iceberg.WithQuickRetriesForTest(), iceberg.WithHooks(recs[i])}
	})
	if err != nil {
		t.Fatal(err)
	}
	var conflicts int
	for i, r := range recs {
		cs, rs := eventsOf[iceberg.Conflict](r), eventsOf[iceberg.Retry](r)
		conflicts += len(cs)
		if int64(len(cs)) != stats[i].Conflicts || int64(len(rs)) != stats[i].Retries {
			t.Errorf("writer %d: %d conflicts and %d retries reported, Stats: %+v", i, len(cs), len(rs), stats[i])
		}
		for _, c := range cs {
			if c.Cause != iceberg.ConflictBranch && c.Cause != iceberg.ConflictCatalog || c.Err == nil || c.Kind != iceberg.KindRun {
				t.Errorf("writer %d: conflict %+v", i, c)
			}
		}
		for _, r := range rs {
			if r.Attempt < 2 || r.Wait < 0 || r.Err == nil || r.Cause == "" {
				t.Errorf("writer %d: retry %+v", i, r)
			}
		}
		attempts := eventsOf[iceberg.CommitAttempt](r)
		if int64(len(attempts)) != stats[i].Commits+stats[i].Retries {
			t.Errorf("writer %d: %d attempts reported, %d commits and %d retries", i, len(attempts), stats[i].Commits, stats[i].Retries)
		}
		var commitAttempts int
		for _, ci := range eventsOf[iceberg.CommitInfo](r) {
			commitAttempts += ci.Attempts
		}
		if commitAttempts != len(attempts) {
			t.Errorf("writer %d: commits took %d attempts, %d reported", i, commitAttempts, len(attempts))
		}
	}
	if conflicts < writers-1 {
		t.Errorf("%d conflicts reported, the first round makes %d", conflicts, writers-1)
	}
}

// TestHooksMayCallWriter: hooks run outside the writer's locks: one that calls Stats, Flush and Compact on its
// writer from HookCommitted deadlocks nothing, and the compaction it runs is reported too.
func TestHooksMayCallWriter(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"hooks", "reenter"}
	var w *iceberg.Writer
	rec := &recorder{}
	var callErr error
	called := make(chan struct{})
	rec.committed = func(ci iceberg.CommitInfo) {
		_ = w.Stats()
		if ci.LastSeq == 3 {
			if err := w.Flush(ctx); err != nil {
				callErr = err
			}
			if _, err := w.Compact(ctx); err != nil {
				callErr = err
			}
			close(called)
		}
	}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema), iceberg.WithFlushInterval(0),
		iceberg.WithHooks(rec))
	if err != nil {
		t.Fatal(err)
	}
	commitSeed(t, w, seed.New(0, 1), 4, 50)
	select { // hooks run a little after the commits: the writer must still be open for the hook's calls
	case <-called:
	case <-time.After(time.Minute):
		t.Fatal("the hook's calls did not return")
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if callErr != nil {
		t.Fatal(callErr)
	}
	cs := eventsOf[iceberg.Compaction](rec)
	if len(cs) != 1 || cs[0].Automatic || cs[0].Err != nil || cs[0].Result.RewrittenDataFiles < 3 || cs[0].Duration <= 0 {
		t.Fatalf("compactions reported: %+v", cs)
	}
	var compactAttempt bool
	for _, a := range eventsOf[iceberg.CommitAttempt](rec) {
		compactAttempt = compactAttempt || (a.Kind == iceberg.KindCompaction && a.Err == nil)
	}
	if !compactAttempt {
		t.Error("the compaction's attempt was not reported")
	}
	counts, _ := readRows(t, cat, ident)
	assertIDs(t, counts, 0, 200)
}

// TestHooksReportExpiryFencingAndBackpressure: the maintainer's expiry, a takeover of the writer's ID and a
// call that waited for room each reach the hooks.
func TestHooksReportExpiryFencingAndBackpressure(t *testing.T) {
	ctx := context.Background()
	t.Run("expiry", func(t *testing.T) {
		cat := openCatalog(t)
		rec := &recorder{}
		w, err := iceberg.NewWriter(ctx, cat, table.Identifier{"hooks", "expiry"}, iceberg.WithCreate(seed.Schema),
			iceberg.WithFlushInterval(0), iceberg.WithKeepSnapshots(1), iceberg.WithSmallFileCompactionEvery(0), iceberg.WithHooks(rec))
		if err != nil {
			t.Fatal(err)
		}
		commitSeed(t, w, seed.New(0, 1), 12, 10) // 12 snapshots: over the 1 kept by the slack of 10
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		ex := eventsOf[iceberg.Expiry](rec)
		if len(ex) != 1 || ex[0].Expired != 11 || ex[0].Err != nil || ex[0].Attempts != 1 || ex[0].Duration <= 0 {
			t.Fatalf("expiries reported: %+v", ex)
		}
	})
	t.Run("fenced", func(t *testing.T) {
		cat := openCatalog(t)
		ident := table.Identifier{"hooks", "fenced"}
		rec := &recorder{}
		old, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema), iceberg.WithWriterID("job"),
			iceberg.WithHooks(rec))
		if err != nil {
			t.Fatal(err)
		}
		g := seed.New(0, 1)
		commitSeed(t, old, g, 1, 10)
		takeOver(t, ctx, cat, ident, "job")
		writeSeed(t, old, g, 10)
		if err := old.Flush(ctx); !errors.Is(err, iceberg.ErrFenced) {
			t.Fatalf("Flush of the fenced writer: %v", err)
		}
		_ = old.Close(ctx)
		fs := eventsOf[iceberg.Fenced](rec)
		if len(fs) != 1 || fs[0].WriterID != "job" || fs[0].Epoch != 1 || fs[0].TableEpoch != 2 || fs[0].Kind != iceberg.KindRun {
			t.Fatalf("fencing reported: %+v", fs)
		}
	})
	t.Run("backpressure", func(t *testing.T) {
		cat := &slowCatalog{Catalog: openCatalog(t)}
		rec := &recorder{}
		w, err := iceberg.NewWriter(ctx, cat, table.Identifier{"hooks", "backpressure"}, iceberg.WithCreate(seed.Schema),
			iceberg.WithFlushInterval(0), iceberg.WithFlushRows(10), iceberg.WithMaxUncommitted(1), iceberg.WithHooks(rec))
		if err != nil {
			t.Fatal(err)
		}
		cat.hold()
		g := seed.New(0, 1)
		writeSeed(t, w, g, 10) // sealed: its commit waits at the gate
		if !cat.held(10 * time.Second) {
			t.Fatal("the commit did not reach the gate")
		}
		wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		batch := g.Batch(10)
		called := time.Now()
		err = w.Write(wctx, batch) // waits for the uncommitted batch until its context ends
		took := time.Since(called)
		batch.Release()
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Write with a batch uncommitted: %v", err)
		}
		cat.release()
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		bp := eventsOf[iceberg.BackpressureWait](rec)
		if len(bp) != 1 || bp[0].Reason != iceberg.BackpressureUncommitted || bp[0].Duration <= 0 || bp[0].Duration > took ||
			bp[0].Rows != 10 || bp[0].Bytes <= 0 {
			t.Fatalf("waits reported: %+v", bp)
		}
	})
}

// TestWithHooksRefusesANonHook: a value that implements no hook interface is an option error naming WithHooks.
func TestWithHooksRefusesANonHook(t *testing.T) {
	_, err := iceberg.NewWriter(context.Background(), openCatalog(t), table.Identifier{"hooks", "none"},
		iceberg.WithCreate(seed.Schema), iceberg.WithHooks(&recorder{}, fmt.Stringer(nil), 42))
	if !errors.Is(err, iceberg.ErrInvalidOption) || !strings.Contains(err.Error(), "WithHooks") {
		t.Fatalf("NewWriter with a non-hook: %v", err)
	}
}
