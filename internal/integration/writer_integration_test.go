//go:build integration

package integration_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/seed"
	"github.com/icewriter/iceberg/internal/testenv"
)

// addToModel records the rows of rec (id -> value) in the model.
func addToModel(model map[int64]float64, rec arrow.RecordBatch) {
	ids := rec.Column(0).(*array.Int64)
	vals := rec.Column(3).(*array.Float64)
	for r := 0; r < int(rec.NumRows()); r++ {
		model[ids.Value(r)] = vals.Value(r)
	}
}

// TestAppendModel writes random batch sizes under random flush sizes, MaxInFlight and Flush calls on every
// backend, and compares what iceberg-go's scanner reads back with the model.
func TestAppendModel(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		for trial := 0; trial < 2; trial++ {
			t.Run(fmt.Sprint("trial=", trial), func(t *testing.T) {
				ctx := context.Background()
				cat := b.open(t)
				rng := rand.New(rand.NewPCG(uint64(trial), 7))
				ident := newIdent("model")
				flushRows, inFlight := 500+rng.IntN(4000), 1+rng.IntN(6)
				t.Logf("flushRows=%d maxInFlight=%d", flushRows, inFlight)
				w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema),
					iceberg.WithFlushRows(flushRows), iceberg.WithMaxInFlight(inFlight))
				if err != nil {
					t.Fatal(err)
				}
				g := seed.New(0, uint64(trial))
				model := map[int64]float64{}
				for total := 0; total < 15_000; {
					n := 1 + rng.IntN(2000)
					rec := g.Batch(n)
					addToModel(model, rec)
					if err := w.Write(ctx, rec); err != nil {
						t.Fatal(err)
					}
					rec.Release()
					total += n
					if rng.IntN(8) == 0 {
						if err := w.Flush(ctx); err != nil {
							t.Fatal(err)
						}
					}
				}
				if err := w.Close(ctx); err != nil {
					t.Fatal(err)
				}
				t.Logf("stats: %+v", w.Stats())
				checkExactly(t, cat, ident, model)
			})
		}
	})
}

// TestConcurrentWriters runs two writers with distinct IDs, each from its own catalog client, on one table.
func TestConcurrentWriters(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		cat := b.open(t)
		ident := newIdent("conc")
		setup, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema))
		if err != nil {
			t.Fatal(err)
		}
		if err := setup.Close(ctx); err != nil {
			t.Fatal(err)
		}
		const writers, perWriter = 2, 8000
		models := make([]map[int64]float64, writers)
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for i := 0; i < writers; i++ {
			models[i] = map[int64]float64{}
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithWriterID(fmt.Sprintf("conc-%d", i)),
					iceberg.WithFlushRows(600), iceberg.WithMaxInFlight(3), iceberg.WithCommitTimeout(2*time.Minute))
				if err != nil {
					errs <- err
					return
				}
				g := seed.New(int64(i*perWriter), uint64(i))
				for n := 0; n < perWriter; n += 400 {
					rec := g.Batch(400)
					addToModel(models[i], rec)
					if err := w.Write(ctx, rec); err != nil {
						errs <- err
						rec.Release()
						return
					}
					rec.Release()
					// A commit per call, so that the two writers race for the table head.
					if err := w.Flush(ctx); err != nil {
						errs <- err
						return
					}
				}
				if err := w.Close(ctx); err != nil {
					errs <- err
					return
				}
				st := w.Stats()
				t.Logf("writer %d: commits %d retries %d conflicts %d", i, st.Commits, st.Retries, st.Conflicts)
			}(i)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		all := map[int64]float64{}
		for _, m := range models {
			for k, v := range m {
				all[k] = v
			}
		}
		checkExactly(t, cat, ident, all)
	})
}

// TestCheckpointResume: with checkpoints, rows after the last checkpoint are not committed by Close; a new
// writer with the same ID finds the token with LastCheckpoint and resumes from it without loss or duplicates.
func TestCheckpointResume(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		cat := b.open(t)
		ident := newIdent("ckpt")
		const id = "resumer"
		const batch = 500
		// The source: a replayable log of batches, addressed by offset (the first id of the batch).
		source := func(offset int64) arrow.RecordBatch { return seed.New(offset, uint64(offset)).Batch(batch) }
		committed := map[int64]float64{}

		w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema), iceberg.WithWriterID(id),
			iceberg.WithCheckpoints(), iceberg.WithFlushRows(100_000))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok, err := w.LastCheckpoint(ctx); err != nil || ok {
			t.Fatalf("fresh table: LastCheckpoint ok=%v err=%v", ok, err)
		}
		var offset int64
		for i := 0; i < 10; i++ {
			rec := source(offset)
			addToModel(committed, rec)
			if err := w.Write(ctx, rec); err != nil {
				t.Fatal(err)
			}
			rec.Release()
			offset += batch
			if i%3 == 2 {
				if err := w.Checkpoint(ctx, fmt.Sprint("offset=", offset)); err != nil {
					t.Fatal(err)
				}
			}
		}
		// Offsets 4500..5000 were written after the last checkpoint (offset=4500): Close drops them.
		for id := int64(4500); id < 5000; id++ {
			delete(committed, id)
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		checkExactly(t, cat, ident, committed)

		w2, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithWriterID(id), iceberg.WithCheckpoints())
		if err != nil {
			t.Fatal(err)
		}
		tok, ok, err := w2.LastCheckpoint(ctx)
		if err != nil || !ok || tok != "offset=4500" {
			t.Fatalf("LastCheckpoint = %q, %v, %v; want offset=4500", tok, ok, err)
		}
		var resume int64
		if _, err := fmt.Sscanf(tok, "offset=%d", &resume); err != nil {
			t.Fatal(err)
		}
		for off := resume; off < 8000; off += batch {
			rec := source(off)
			addToModel(committed, rec)
			if err := w2.Write(ctx, rec); err != nil {
				t.Fatal(err)
			}
			rec.Release()
		}
		if err := w2.Checkpoint(ctx, "offset=8000"); err != nil {
			t.Fatal(err)
		}
		if err := w2.Close(ctx); err != nil {
			t.Fatal(err)
		}
		checkExactly(t, cat, ident, committed)
		if tok, ok, err := w2.LastCheckpoint(ctx); err != nil || !ok || tok != "offset=8000" {
			// LastCheckpoint after Close may return ErrClosed; then ask a fresh writer.
			w3, err3 := iceberg.NewWriter(ctx, cat, ident, iceberg.WithWriterID(id))
			if err3 != nil {
				t.Fatal(err3)
			}
			tok, ok, err = w3.LastCheckpoint(ctx)
			_ = w3.Close(ctx)
			if err != nil || !ok || tok != "offset=8000" {
				t.Fatalf("final LastCheckpoint = %q, %v, %v", tok, ok, err)
			}
		}
	})
}

// TestRESTRestart stops the SeaweedFS server (REST catalog and S3) in the middle of a stream and starts it again:
// the writer retries within its commit timeout, and the table ends up with every row exactly once.
func TestRESTRestart(t *testing.T) {
	restart := testenv.Get(t, testenv.RESTRestart)
	ctx := context.Background()
	cat := openREST(t)
	ident := newIdent("restart")
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema), iceberg.WithWriterID("restart"),
		iceberg.WithFlushRows(2000), iceberg.WithMaxInFlight(2), iceberg.WithCommitTimeout(3*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	g := seed.New(0, 42)
	model := map[int64]float64{}
	write := func(batches int) {
		for i := 0; i < batches; i++ {
			rec := g.Batch(500)
			addToModel(model, rec)
			if err := w.Write(ctx, rec); err != nil {
				t.Fatalf("Write: %v", err)
			}
			rec.Release()
		}
	}
	write(20)
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Keep writing while the server goes down for a few seconds and comes back.
	done := make(chan error, 1)
	go func() {
		cmd := exec.Command(restart, "2")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		done <- cmd.Run()
	}()
	write(40)
	if err := <-done; err != nil {
		t.Fatalf("restart: %v", err)
	}
	write(20)
	closeCtx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	if err := w.Close(closeCtx); err != nil {
		if errors.Is(err, iceberg.ErrWriterFailed) {
			t.Fatalf("the writer failed through a server restart: %v", err)
		}
		t.Fatal(err)
	}
	st := w.Stats()
	t.Logf("stats: commits %d retries %d conflicts %d", st.Commits, st.Retries, st.Conflicts)
	cat2 := openREST(t) // a fresh client after the restart
	checkExactly(t, cat2, ident, model)
}
