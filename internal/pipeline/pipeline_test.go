package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/icewriter/iceberg/internal/changes"
	"github.com/icewriter/iceberg/internal/encode"
)

// The pipeline driven by a fake env inside a synctest bubble: encodings and commits finish when the test says
// so, time moves only when every goroutine waits, and synctest.Wait replaces every sleep.

// testBatch is a batch of the fake env: the header, and the file metadata its fake encoding left it holding.
type testBatch struct {
	Header[*testBatch]
	held int64
}

func (b *testBatch) Head() *Header[*testBatch] { return &b.Header }
func (b *testBatch) Held() (int64, int64)      { return b.held, b.held }
func (b *testBatch) FilePaths() []string       { return nil }

// errWriterFailed stands for the writer's ErrWriterFailed.
var errWriterFailed = errors.New("writer failed")

// fakeEnv records what the pipeline asks of it. An encoding or commit with a gate waits for it.
type fakeEnv struct {
	mu         sync.Mutex
	encodeGate map[int64]chan error // by batch seq: the encoding returns what the gate sends
	commitGate chan error           // non-nil: every commit returns what it sends
	runs       [][]int64            // committed runs, by batch seq
	tokens     []string             // newest token of each committed run
	positions  []map[string]string  // positions of each committed run
	removed    []string
	failedWith error
	loopEnded  bool
	held       int64 // the file metadata each encoding leaves its batch holding (batch.held)
}

func newFakeEnv() *fakeEnv { return &fakeEnv{encodeGate: map[int64]chan error{}} }

// holdEncode makes the encoding of batch seq wait until release(seq, err).
func (e *fakeEnv) holdEncode(seq int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.encodeGate[seq] = make(chan error, 1)
}

func (e *fakeEnv) release(seq int64, err error) {
	e.mu.Lock()
	ch := e.encodeGate[seq]
	e.mu.Unlock()
	ch <- err
}

func (e *fakeEnv) Encode(ctx context.Context, b *testBatch, _ Slots) error {
	e.mu.Lock()
	ch := e.encodeGate[b.Seq]
	e.mu.Unlock()
	if ch != nil {
		select {
		case err := <-ch:
			if err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	b.held = e.held // a fake encoding writes no file
	return nil
}

func (e *fakeEnv) Commit(ctx context.Context, batches []*testBatch) (func(context.Context, int64), error) {
	if e.commitGate != nil {
		select {
		case err := <-e.commitGate:
			if err != nil {
				return nil, err
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	var seqs []int64
	var token string
	pos := map[string]string{}
	for _, b := range batches {
		seqs = append(seqs, b.Seq)
		if b.HasToken {
			token = b.Token
		}
		for k, v := range b.Positions {
			pos[k] = v
		}
	}
	e.mu.Lock()
	e.runs = append(e.runs, seqs)
	e.tokens = append(e.tokens, token)
	e.positions = append(e.positions, pos)
	e.mu.Unlock()
	return func(context.Context, int64) {}, nil
}

func (e *fakeEnv) NewBatch() *testBatch { return &testBatch{} }

func (e *fakeEnv) BulkClosed(encode.ClosedSpan[*testBatch]) {}

func (e *fakeEnv) Failure(err error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.failedWith = err
	return fmt.Errorf("%w: %w", errWriterFailed, err)
}

func (e *fakeEnv) RemoveFiles(_ context.Context, paths []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.removed = append(e.removed, paths...)
}

func (e *fakeEnv) LoopDone() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.loopEnded = true
}

func (e *fakeEnv) committedRuns() [][]int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.runs)
}

// testPipeline starts a pipeline on env with cfg's zero fields defaulted: rows seal at 1,000, bytes never,
// no interval, memory and the uncommitted bound are not reached.
func testPipeline(t *testing.T, env *fakeEnv, cfg Config[*testBatch]) *Pipeline[*testBatch] {
	t.Helper()
	if cfg.FlushRows == 0 {
		cfg.FlushRows = 1000
	}
	if cfg.FlushBytes == 0 {
		cfg.FlushBytes = 1 << 40
	}
	if cfg.RowBudget == 0 {
		cfg.RowBudget = 1 << 40
	}
	if cfg.MaxUncommitted == 0 {
		cfg.MaxUncommitted = 1000
	}
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = 4
	}
	if cfg.CommitTimeout == 0 {
		cfg.CommitTimeout = time.Minute
	}
	p := New[*testBatch](t.Context(), env, cfg, 0)
	p.Start()
	t.Cleanup(func() { _, _ = p.Shutdown(context.Background(), false) }) // ErrClosed when the test closed it
	return p
}

// rows makes an owned insert of n rows counted as size bytes.
func rows(n int, size int64) Record {
	b := array.NewInt64Builder(memory.NewGoAllocator())
	defer b.Release()
	for i := range n {
		b.Append(int64(i))
	}
	col := b.NewArray()
	defer col.Release()
	return Record{Rec: array.NewRecordBatch(pipelineSchema, []arrow.Array{col}, int64(n)), Size: size, Kind: changes.Insert}
}

// pipelineSchema is the one schema of the rows: a buffer ends where the schema changes (by pointer, as the
// conformer hands out one schema per table schema).
var pipelineSchema = arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)

func mustAccept(t *testing.T, p *Pipeline[*testBatch], r Record) {
	t.Helper()
	if err := p.Accept(t.Context(), r); err != nil {
		t.Fatal(err)
	}
}

// Batches whose encodings finish out of order commit in sequence order, the ones ready together as one run.
func TestPipelineCommitsInSequenceOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newFakeEnv()
		env.holdEncode(1)
		env.holdEncode(2)
		p := testPipeline(t, env, Config[*testBatch]{FlushRows: 10})
		for range 3 {
			mustAccept(t, p, rows(10, 100)) // each call seals a batch of its own
		}
		synctest.Wait()
		if runs := env.committedRuns(); len(runs) != 0 {
			t.Fatalf("committed %v while batch 1 was still encoding", runs)
		}
		env.release(2, nil)
		synctest.Wait()
		if runs := env.committedRuns(); len(runs) != 0 {
			t.Fatalf("committed %v while batch 1 was still encoding", runs)
		}
		env.release(1, nil)
		synctest.Wait()
		if runs, want := env.committedRuns(), [][]int64{{1, 2, 3}}; !slices.EqualFunc(runs, want, slices.Equal) {
			t.Fatalf("runs %v, want %v", runs, want)
		}
		if s := p.State(); s.Committed != 3 || s.UncommittedBatches != 0 || s.BufferedBytes != 0 {
			t.Fatalf("state after the commit: %+v", s)
		}
		if err := p.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Shutdown(t.Context(), true); err != nil {
			t.Fatal(err)
		}
	})
}

// With checkpoints, a run ends at its newest token and nothing after the last token is ever committed: Close
// discards it. A checkpoint seals nothing: the seal the policy makes next cuts the buffer at it.
func TestPipelineCheckpointsEndRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newFakeEnv()
		gate := make(chan error)
		env.commitGate = gate
		p := testPipeline(t, env, Config[*testBatch]{FlushRows: 10, Checkpoints: true})
		mustAccept(t, p, rows(10, 100))           // past the policy, but no checkpoint to cut at: stays open
		if err := p.Checkpoint("a"); err != nil { // the due buffer is sealed at it: batch 1
			t.Fatal(err)
		}
		synctest.Wait()
		gate <- nil // the first run: batch 1
		synctest.Wait()
		if err := p.Checkpoint("b"); err != nil { // a mark in the empty open buffer
			t.Fatal(err)
		}
		mustAccept(t, p, rows(10, 100)) // trips the policy: batch 2 is the token alone, the 10 rows stay open
		synctest.Wait()
		gate <- nil // the second run: batch 2
		synctest.Wait()
		mustAccept(t, p, rows(5, 50)) // 15 rows open: no checkpoint covers them, so they stay open
		flushed := make(chan error, 1)
		go func() { flushed <- p.Flush(t.Context()) }()
		synctest.Wait()
		select {
		case err := <-flushed:
			if err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatal("Flush waits for rows after the last checkpoint")
		}
		s, err := p.Shutdown(t.Context(), true)
		if err != nil || s.FlushErr != nil {
			t.Fatal(err, s.FlushErr)
		}
		if runs, want := env.committedRuns(), [][]int64{{1}, {2}}; !slices.EqualFunc(runs, want, slices.Equal) {
			t.Fatalf("runs %v, want %v", runs, want)
		}
		if !slices.Equal(env.tokens, []string{"a", "b"}) {
			t.Fatalf("tokens %q, want a and b", env.tokens)
		}
		if st := p.State(); st.Discarded != 15 {
			t.Fatalf("discarded %d rows, want the 15 after the token", st.Discarded)
		}
	})
}

// A call that would pass the memory budget seals the open buffer and waits for encodings to free memory; its
// ctx ends the wait, and then nothing of it was accepted.
func TestPipelineMemoryBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newFakeEnv()
		env.holdEncode(1)
		p := testPipeline(t, env, Config[*testBatch]{RowBudget: 1000})
		mustAccept(t, p, rows(10, 600)) // open, not sealed by any policy
		ctx, cancel := context.WithCancel(t.Context())
		accepted := make(chan error, 1)
		go func() { accepted <- p.Accept(ctx, rows(10, 600)) }()
		synctest.Wait()
		if s := p.State(); s.UncommittedBatches != 1 || s.BufferedRows != 0 {
			t.Fatalf("the full budget did not seal the open buffer: %+v", s)
		}
		select {
		case err := <-accepted:
			t.Fatalf("accepted over the memory budget: %v", err)
		default:
		}
		cancel()
		if err := <-accepted; !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
		if s := p.State(); s.RowsAccepted != 10 {
			t.Fatalf("%d rows accepted, want the first call's 10", s.RowsAccepted)
		}
		go func() { accepted <- p.Accept(t.Context(), rows(10, 600)) }()
		synctest.Wait()
		env.release(1, nil) // encoding frees the first call's memory
		if err := <-accepted; err != nil {
			t.Fatal(err)
		}
		if err := p.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		if s := p.State(); s.BufferedBytes != 0 || s.Committed != 2 {
			t.Fatalf("after flush: %+v", s)
		}
	})
}

// The metadata of files written and not yet committed counts against the budget: a call waits for the commit
// that frees it (sealing would free nothing). Batches that wait for a checkpoint are not waited on: the
// caller's next checkpoint is what lets them go.
func TestPipelineFileMetadataBudget(t *testing.T) {
	for _, checkpoints := range []bool{false, true} {
		t.Run(fmt.Sprintf("checkpoints=%v", checkpoints), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				env := newFakeEnv()
				env.held = 900
				gate := make(chan error, 1)
				env.commitGate = gate
				p := testPipeline(t, env, Config[*testBatch]{FlushRows: 10, RowBudget: 1000, Checkpoints: checkpoints})
				mustAccept(t, p, rows(10, 10)) // batch 1: encoded at once, holding 900 until its commit
				if checkpoints {
					// The policy waits for a checkpoint to cut at: batch 1 is sealed with token a, and may commit.
					if err := p.Checkpoint("a"); err != nil {
						t.Fatal(err)
					}
					mustAccept(t, p, rows(10, 10)) // stays open: no checkpoint covers it
				} else {
					mustAccept(t, p, rows(2, 10))
				}
				synctest.Wait()
				if s := p.State(); s.BufferedBytes != 910 {
					t.Fatalf("buffered %d bytes, want the open rows' 10 and batch 1's file metadata 900", s.BufferedBytes)
				}
				accepted := make(chan error, 1)
				go func() { accepted <- p.Accept(t.Context(), rows(2, 200)) }()
				synctest.Wait()
				select {
				case err := <-accepted:
					t.Fatalf("accepted over the budget while file metadata waits for its commit: %v", err)
				default:
				}
				gate <- nil // batch 1's commit frees its metadata
				if err := <-accepted; err != nil {
					t.Fatal(err)
				}
				if !checkpoints {
					return
				}
				// The 12 rows open stay open (no checkpoint covers them) until a call past the memory budget seals
				// them as batch 3, which no checkpoint covers: its metadata never blocks that call, nor the one
				// that may make a checkpoint.
				synctest.Wait()
				done := make(chan error, 1)
				go func() { done <- p.Accept(t.Context(), rows(2, 800)) }()
				synctest.Wait()
				select {
				case err := <-done:
					if err != nil {
						t.Fatal(err)
					}
				default:
					t.Fatal("a call waits on the metadata of a batch only a checkpoint can commit")
				}
				if s := p.State(); s.UncommittedBatches != 1 || s.BufferedBytes != 900+800 {
					t.Fatalf("state: %+v, want batch 3 uncommitted holding 900 and 800 bytes open", s)
				}
			})
		})
	}
}

// While a commit is slow, batches waiting for it are bounded: a call waits once maxUncommitted are queued.
func TestPipelineUncommittedBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newFakeEnv()
		gate := make(chan error)
		env.commitGate = gate
		env.holdEncode(1)
		p := testPipeline(t, env, Config[*testBatch]{FlushRows: 10, MaxUncommitted: 2})
		mustAccept(t, p, rows(10, 100))
		mustAccept(t, p, rows(10, 100))
		accepted := make(chan error, 1)
		go func() { accepted <- p.Accept(t.Context(), rows(10, 100)) }()
		synctest.Wait()
		select {
		case err := <-accepted:
			t.Fatalf("a third batch was accepted with two uncommitted: %v", err)
		default:
		}
		env.release(1, nil)
		synctest.Wait()
		gate <- nil // batches 1 and 2, one run
		if err := <-accepted; err != nil {
			t.Fatal(err)
		}
		gate <- nil // the third batch's run
		if err := p.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		if runs, want := env.committedRuns(), [][]int64{{1, 2}, {3}}; !slices.EqualFunc(runs, want, slices.Equal) {
			t.Fatalf("runs %v, want %v", runs, want)
		}
	})
}

// A failed commit stops the pipeline: nothing after it is committed, and every call returns the failure.
func TestPipelineFailedCommitStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newFakeEnv()
		gate := make(chan error, 2)
		env.commitGate = gate
		p := testPipeline(t, env, Config[*testBatch]{FlushRows: 10})
		env.holdEncode(2)
		mustAccept(t, p, rows(10, 100))
		mustAccept(t, p, rows(10, 100))
		boom := errors.New("boom")
		gate <- boom
		synctest.Wait()
		env.release(2, nil)
		gate <- nil
		synctest.Wait()
		if runs := env.committedRuns(); len(runs) != 0 {
			t.Fatalf("committed %v after a failed run", runs)
		}
		for _, err := range []error{p.Flush(t.Context()), p.Accept(t.Context(), rows(1, 1)), p.Checkpoint("x")} {
			if !errors.Is(err, errWriterFailed) || !errors.Is(err, boom) {
				t.Fatalf("got %v, want the failure", err)
			}
		}
		s, err := p.Shutdown(t.Context(), true)
		if err != nil || !errors.Is(s.Failed, boom) {
			t.Fatalf("shutdown: %v, %+v", err, s)
		}
	})
}

// Close returns by its deadline whatever a commit does, and says what was in flight; the commit goes on on the
// pipeline's own context until it resolves.
func TestPipelineCloseByDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newFakeEnv()
		gate := make(chan error)
		env.commitGate = gate
		p := testPipeline(t, env, Config[*testBatch]{FlushRows: 10, CommitTimeout: time.Hour})
		mustAccept(t, p, rows(10, 100))
		synctest.Wait() // the commit is in flight
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		s, err := p.Shutdown(ctx, true)
		if err != nil || !errors.Is(s.FlushErr, context.DeadlineExceeded) {
			t.Fatalf("shutdown: %v, %+v", err, s)
		}
		if s.Lost.InFlight != 1 || s.Lost.InFlightRows != 10 {
			t.Fatalf("lost %+v, want one batch of 10 rows in flight", s.Lost)
		}
		gate <- nil // the commit lands after Close returned
		<-p.Stopped()
		if runs := env.committedRuns(); len(runs) != 1 {
			t.Fatalf("runs %v, want the one in flight", runs)
		}
		if !env.loopEnded {
			t.Fatal("the loop did not end")
		}
		if _, err := p.Shutdown(t.Context(), true); !errors.Is(err, ErrClosed) {
			t.Fatalf("second shutdown: %v", err)
		}
	})
}

// The interval policy seals a buffer the other policies would leave open, measured from its first row.
func TestPipelineIntervalSeals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newFakeEnv()
		p := testPipeline(t, env, Config[*testBatch]{FlushInterval: time.Second})
		start := time.Now()
		mustAccept(t, p, rows(3, 30))
		time.Sleep(500 * time.Millisecond) // the bubble's clock: no real wait
		mustAccept(t, p, rows(3, 30))
		synctest.Wait()
		if len(env.committedRuns()) != 0 {
			t.Fatal("sealed before the interval")
		}
		time.Sleep(time.Until(start.Add(time.Second)))
		synctest.Wait()
		if runs := env.committedRuns(); len(runs) != 1 {
			t.Fatalf("runs %v, want one run a second after the first row", runs)
		}
		if s := p.State(); s.RowsAccepted != 6 || s.Committed != 1 {
			t.Fatalf("state %+v", s)
		}
		if _, err := p.Shutdown(t.Context(), true); err != nil {
			t.Fatal(err)
		}
	})
}

// A failed encoding stops the pipeline: nothing after it is committed, and what was accepted is reported lost.
func TestPipelineFailedEncodingStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newFakeEnv()
		env.holdEncode(1)
		p := testPipeline(t, env, Config[*testBatch]{FlushRows: 10})
		mustAccept(t, p, rows(10, 100))
		mustAccept(t, p, rows(10, 100))
		env.release(1, errors.New("disk full"))
		synctest.Wait()
		if err := p.Flush(t.Context()); !errors.Is(err, errWriterFailed) {
			t.Fatalf("flush after a failed encoding: %v", err)
		}
		if runs := env.committedRuns(); len(runs) != 0 {
			t.Fatalf("committed %v past a failed encoding", runs)
		}
		s, _ := p.Shutdown(t.Context(), false)
		if s.Lost.Batches != 2 || p.State().Discarded != 20 {
			t.Fatalf("lost %+v, discarded %d", s.Lost, p.State().Discarded)
		}
	})
}

// rowsFrom is rows(n, size) of a source partition.
func rowsFrom(src string, n int, size int64) Record {
	r := rows(n, size)
	r.Source = src
	return r
}

// A position covers the rows of its partition only: a seal takes them and leaves the other partitions' rows
// open; the same position again with no new rows commits nothing.
func TestPipelinePositionsCoverTheirPartition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newFakeEnv()
		p := testPipeline(t, env, Config[*testBatch]{Checkpoints: true})
		mustAccept(t, p, rowsFrom("a", 3, 30))
		mustAccept(t, p, rowsFrom("b", 4, 40))
		mustAccept(t, p, rowsFrom("a", 2, 20))
		if err := p.CheckpointPositions(map[string]string{"a": "a@5"}); err != nil {
			t.Fatal(err)
		}
		mustAccept(t, p, rowsFrom("a", 1, 10)) // after a's position
		if err := p.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		if s := p.State(); s.Committed != 1 || s.BufferedRows != 5 {
			t.Fatalf("after the first flush: %+v, want batch 1 committed and b's 4 and a's last row open", s)
		}
		if got := env.positions[0]; len(got) != 1 || got["a"] != "a@5" {
			t.Fatalf("positions %v, want a@5", got)
		}
		if err := p.CheckpointPositions(map[string]string{"a": "a@6", "b": "b@4"}); err != nil {
			t.Fatal(err)
		}
		mustFlush(t, p)
		if s := p.State(); s.Committed != 2 || s.BufferedRows != 0 {
			t.Fatalf("after the second flush: %+v", s)
		}
		if got := env.positions[1]; len(got) != 2 || got["a"] != "a@6" || got["b"] != "b@4" {
			t.Fatalf("positions %v, want a@6 and b@4", got)
		}
		// Idle: no new rows and the same positions, so nothing is sealed.
		if err := p.CheckpointPositions(map[string]string{"a": "a@6", "b": "b@4"}); err != nil {
			t.Fatal(err)
		}
		mustFlush(t, p)
		if n := len(env.committedRuns()); n != 2 {
			t.Fatalf("idle positions made %d more commits", n-2)
		}
	})
}

func mustFlush(t *testing.T, p *Pipeline[*testBatch]) {
	t.Helper()
	if err := p.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// A run may end only where every row before it is covered: a batch sealed without a checkpoint (the memory
// limit came first) waits until later checkpoints cover each of its partitions.
func TestCoveredEnd(t *testing.T) {
	fallback := &testBatch{Header: Header[*testBatch]{Uncovered: map[string]struct{}{"a": {}, "b": {}}}}
	posA := &testBatch{Header: Header[*testBatch]{Positions: map[string]string{"a": "1"}}}
	posB := &testBatch{Header: Header[*testBatch]{Positions: map[string]string{"b": "1"}}}
	token := &testBatch{Header: Header[*testBatch]{HasToken: true}}
	for _, c := range []struct {
		name string
		q    []*testBatch
		want int
	}{
		{"nothing marked", []*testBatch{fallback}, 0},
		{"one partition covered", []*testBatch{fallback, posA}, 0},
		{"both covered", []*testBatch{fallback, posA, posB}, 3},
		{"a token covers all", []*testBatch{fallback, token}, 2},
		{"covered, then uncovered again", []*testBatch{posA, fallback, posB}, 1},
	} {
		if got := coveredEnd(c.q, len(c.q)); got != c.want {
			t.Errorf("%s: coveredEnd = %d, want %d", c.name, got, c.want)
		}
	} // Source.Abort may wait for a partition's sealed rows only where a checkpoint covers them.
	if coversLater([]*testBatch{fallback, posB}, "a") || !coversLater([]*testBatch{fallback, posA}, "a") ||
		!coversLater([]*testBatch{fallback, token}, "a") || !coversLater([]*testBatch{posB}, "a") {
		t.Error("coversLater: a partition's uncovered rows are covered by its later position or a token only")
	}
}

// Aborting a partition drops its rows after its newest position, commits the rest (sealed before or now), and
// leaves the other partitions' rows and positions as they were.
func TestPipelineAbortSource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newFakeEnv()
		gate := make(chan error)
		env.commitGate = gate
		p := testPipeline(t, env, Config[*testBatch]{Checkpoints: true})
		mustAccept(t, p, rowsFrom("a", 3, 30))
		if err := p.CheckpointPositions(map[string]string{"a": "a@3"}); err != nil {
			t.Fatal(err)
		}
		p.mu.Lock()
		p.sealLocked() // batch 1: a's 3 rows, committed once the gate opens
		p.mu.Unlock()
		synctest.Wait() // its commit waits at the gate
		mustAccept(t, p, rowsFrom("b", 4, 40))
		mustAccept(t, p, rowsFrom("a", 2, 20))
		if err := p.CheckpointPositions(map[string]string{"a": "a@5", "b": "b@4"}); err != nil {
			t.Fatal(err)
		}
		mustAccept(t, p, rowsFrom("a", 1, 10))
		aborted := make(chan error, 1)
		go func() {
			_, _, err := p.AbortSource(t.Context(), "a")
			aborted <- err
		}()
		synctest.Wait()
		select {
		case err := <-aborted:
			t.Fatalf("Abort returned (%v) before a's sealed rows were committed", err)
		default:
		}
		gate <- nil // batch 1
		synctest.Wait()
		gate <- nil // batch 2: a's and b's covered open rows, sealed by the abort
		synctest.Wait()
		if err := <-aborted; err != nil {
			t.Fatal(err)
		}
		if s := p.State(); s.Committed != 2 || s.BufferedRows != 0 || s.Discarded != 1 || s.BufferedBytes != 0 {
			t.Fatalf("after Abort: %+v, want batches 1 and 2 committed and a's last row dropped", s)
		}
		if got := env.positions[1]; len(got) != 2 || got["a"] != "a@5" || got["b"] != "b@4" {
			t.Fatalf("positions of the abort's commit %v, want a@5 and b@4", got)
		}
	})
}

// With checkpoints, the flush policy (interval or rows) leaves rows no checkpoint covers open: Source.Abort
// drops them instead of failing with ErrPartitionUncovered. The next checkpoint seals the due buffer at once.
func TestPipelineFlushPolicyLeavesUncheckpointedRowsAbortable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newFakeEnv()
		p := testPipeline(t, env, Config[*testBatch]{Checkpoints: true, FlushInterval: time.Second, FlushRows: 10})
		mustAccept(t, p, rowsFrom("a", 5, 50))
		time.Sleep(2 * time.Second) // the bubble's clock: the interval passes
		synctest.Wait()
		mustAccept(t, p, rowsFrom("b", 12, 120)) // past the rows policy, no checkpoint either
		synctest.Wait()
		dropped, _, err := p.AbortSource(t.Context(), "a")
		if err != nil || dropped != 5 {
			t.Fatalf("Abort after an interval: dropped %d, %v; want a's 5 rows dropped", dropped, err)
		}
		dropped, _, err = p.AbortSource(t.Context(), "b")
		if err != nil || dropped != 12 {
			t.Fatalf("Abort past the rows policy: dropped %d, %v; want b's 12 rows dropped", dropped, err)
		}
		if s := p.State(); s.BufferedRows != 0 || s.UncommittedBatches != 0 || s.Discarded != 17 || len(env.committedRuns()) != 0 {
			t.Fatalf("after the aborts: %+v, runs %v", s, env.committedRuns())
		}
		// A due buffer goes with its first checkpoint, without waiting for another interval.
		mustAccept(t, p, rowsFrom("a", 3, 30))
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if err := p.CheckpointPositions(map[string]string{"a": "a@3"}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if runs := env.committedRuns(); len(runs) != 1 || env.positions[0]["a"] != "a@3" {
			t.Fatalf("runs %v positions %v, want one run with a@3", runs, env.positions)
		}
	})
}

// With checkpoints, the memory limit seals rows no checkpoint covers as batches of one partition each, which
// Source.Abort drops while no commit took them: a batch still encoding and one already staged alike. The other
// partitions' rows are committed in sequence order once covered; nothing of the dropped batches is, and their
// memory is freed. Keyed rows are split the same way when no key has rows of two partitions (the versions of
// the dropped ones are returned for restoring); otherwise they are sealed whole and stay ErrPartitionUncovered.
func TestPipelineAbortDropsRowsTheMemoryLimitSealed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newFakeEnv()
		p := testPipeline(t, env, Config[*testBatch]{Checkpoints: true, RowBudget: 100})
		env.holdEncode(1) // a's batch: still encoding when it is dropped
		mustAccept(t, p, rowsFrom("a", 3, 30))
		mustAccept(t, p, rowsFrom("b", 4, 40))
		mustAccept(t, p, rowsFrom("c", 1, 5))
		mustAccept(t, p, rowsFrom("a", 2, 20))
		mustAccept(t, p, rowsFrom("a", 1, 20)) // past the limit: seals a's 5 rows (1), b's 4 (2) and c's 1 (3)
		synctest.Wait()
		if s := p.State(); s.UncommittedBatches != 3 || s.UncommittedRows != 10 || s.BufferedRows != 1 {
			env.release(1, nil)
			t.Fatalf("after the memory seal: %+v, want a batch per partition and a's last row open", s)
		}
		for _, src := range []string{"a", "c"} {
			if _, _, err := p.AbortSource(t.Context(), src); err != nil {
				t.Fatalf("Abort %s: %v", src, err)
			}
		}
		env.release(1, nil)
		synctest.Wait()
		if s := p.State(); s.UncommittedBatches != 1 || s.UncommittedRows != 4 || s.Discarded != 7 ||
			s.BufferedBytes != 0 || s.BufferedRows != 0 {
			t.Fatalf("after the aborts: %+v, want b's batch left, a's 6 rows and c's 1 dropped, no memory held", s)
		}
		if err := p.CheckpointPositions(map[string]string{"b": "b@4"}); err != nil {
			t.Fatal(err)
		}
		mustFlush(t, p)
		if runs := env.committedRuns(); len(runs) != 1 || !slices.Equal(runs[0], []int64{2, 4}) ||
			env.positions[0]["b"] != "b@4" || len(env.positions[0]) != 1 {
			t.Fatalf("runs %v positions %v, want b's batch 2 with b@4 in batch 4", runs, env.positions)
		}
		// Keyed rows of partitions with no key in common: a batch per partition, d's dropped with its versions.
		shared := false
		p.cfg.SharedKeys = func(*testBatch) bool { return shared }
		upsert := rowsFrom("d", 5, 30)
		upsert.Kind, upsert.Undo = changes.Upsert, []*changes.Undo{{}}
		mustAccept(t, p, upsert)
		mustAccept(t, p, rowsFrom("e", 5, 30))
		mustAccept(t, p, rowsFrom("e", 1, 50)) // past the limit
		synctest.Wait()
		dropped, undos, err := p.AbortSource(t.Context(), "d")
		if err != nil || dropped != 5 || len(undos) != 1 || undos[0] != upsert.Undo[0] {
			t.Fatalf("Abort of keyed rows split from another partition's: dropped %d, undos %v, %v; want 5 and d's undo",
				dropped, undos, err)
		}
		if s := p.State(); s.UncommittedBatches != 1 || s.UncommittedRows != 5 || s.BufferedRows != 1 || s.Discarded != 12 {
			t.Fatalf("after the keyed abort: %+v, want e's batch and e's last row left", s)
		}
		// A key with rows of both partitions: one batch, in the order accepted; its rows cannot be dropped alone.
		shared = true
		upsert = rowsFrom("d", 5, 30)
		upsert.Kind = changes.Upsert
		mustAccept(t, p, upsert)
		mustAccept(t, p, rowsFrom("e", 5, 50)) // past the limit
		synctest.Wait()
		if _, _, err := p.AbortSource(t.Context(), "d"); !errors.Is(err, ErrPartitionUncovered) {
			t.Fatalf("Abort of keyed rows sealed with another partition's: %v, want ErrPartitionUncovered", err)
		}
		if s := p.State(); s.UncommittedBatches != 2 || s.UncommittedRows != 11 || s.Discarded != 12 {
			t.Fatalf("after the refused abort: %+v, want the keyed batch kept", s)
		}
	})
}
