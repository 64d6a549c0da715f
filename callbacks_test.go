package iceberg_test

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/seed"
)

// TestOnCommitMayCallWriter: a WithOnCommit callback calls Compact, Flush, Write and finally Close on its own
// writer; none of them deadlocks, callbacks arrive in commit order, and the table holds every row once.
func TestOnCommitMayCallWriter(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"callbacks", "reenter"}
	var w *iceberg.Writer
	var mu sync.Mutex
	var seqs []int64
	var callErrs []error
	closed := make(chan struct{})
	g := seed.New(1_000_000, 3)
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema), iceberg.WithFlushInterval(0),
		iceberg.WithOnCommit(func(ci iceberg.CommitInfo) {
			mu.Lock()
			seqs = append(seqs, ci.LastSeq)
			n := len(seqs)
			mu.Unlock()
			var err error
			switch n {
			case 1:
				_, err = w.Compact(ctx)
			case 2:
				rec := g.Batch(10) // ids 1,000,000..1,000,009
				err = w.Write(ctx, rec)
				rec.Release()
				if err == nil {
					err = w.Flush(ctx) // commits the rows just written: callback 3 comes after this one
				}
			case 3:
				err = w.Close(ctx)
				close(closed)
			}
			if err != nil {
				mu.Lock()
				callErrs = append(callErrs, err)
				mu.Unlock()
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	gen := seed.New(0, 1)
	for i := 0; i < 2; i++ {
		writeSeed(t, w, gen, 100)
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-closed:
	case <-time.After(time.Minute):
		t.Fatal("the callback's Close did not return")
	}
	if err := w.Close(ctx); !errors.Is(err, iceberg.ErrClosed) {
		t.Fatalf("Close after the callback's Close: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, err := range callErrs {
		t.Errorf("call from the callback: %v", err)
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			t.Fatalf("callbacks out of commit order: %v", seqs)
		}
	}
	counts, _ := readRows(t, cat, ident)
	if len(counts) != 210 {
		t.Fatalf("table has %d ids, want 210", len(counts))
	}
}

// TestCloseWaitsForCallbacks: Close from another goroutine returns after every callback has returned; a
// callback blocked on something Close's caller holds makes Close return by its ctx, with everything committed.
func TestCloseWaitsForCallbacks(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"callbacks", "wait"}
	var delivered sync.WaitGroup
	var userMu sync.Mutex // a connector's own lock, held around Close
	var calls int
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema), iceberg.WithFlushInterval(0),
		iceberg.WithOnCommit(func(iceberg.CommitInfo) {
			userMu.Lock() // waits while the main goroutine is inside Close
			calls++
			userMu.Unlock()
			delivered.Done()
		}))
	if err != nil {
		t.Fatal(err)
	}
	delivered.Add(1)
	writeSeed(t, w, seed.New(0, 1), 100)
	userMu.Lock()
	// The rows commit before Close (Flush does not wait for callbacks): a Close that had to commit them within
	// its short ctx on a busy machine returned with them uncommitted, and no callback ever came.
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	err = w.Close(short)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close with a callback blocked on the caller's lock: %v, want DeadlineExceeded", err)
	}
	userMu.Unlock()
	delivered.Wait() // the callback is still delivered
	if calls != 1 {
		t.Fatalf("%d callbacks, want 1", calls)
	}
	counts, _ := readRows(t, cat, ident)
	assertIDs(t, counts, 0, 100)
}

// TestOnCommitIsACommittedHook: a WithOnCommit callback and a HookCommitted hook get the same CommitInfo
// sequence for the same commits, the callback before the hook for each commit; a later WithOnCommit replaces
// an earlier one.
func TestOnCommitIsACommittedHook(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"callbacks", "hook"}
	var mu sync.Mutex
	var order []string
	var viaOption []iceberg.CommitInfo
	rec := &recorder{committed: func(iceberg.CommitInfo) {
		mu.Lock()
		order = append(order, "hook")
		mu.Unlock()
	}}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema), iceberg.WithFlushInterval(0),
		iceberg.WithHooks(rec),
		iceberg.WithOnCommit(func(iceberg.CommitInfo) { t.Error("the replaced callback was called") }),
		iceberg.WithOnCommit(func(ci iceberg.CommitInfo) {
			mu.Lock()
			order = append(order, "callback")
			viaOption = append(viaOption, ci)
			mu.Unlock()
		}))
	if err != nil {
		t.Fatal(err)
	}
	commitSeed(t, w, seed.New(0, 1), 3, 50)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	viaHook := eventsOf[iceberg.CommitInfo](rec)
	if len(viaHook) != 3 || !reflect.DeepEqual(viaOption, viaHook) {
		t.Fatalf("WithOnCommit got %+v\nHookCommitted got %+v", viaOption, viaHook)
	}
	for i := 0; i < len(order); i += 2 {
		if order[i] != "callback" || order[i+1] != "hook" {
			t.Fatalf("delivery order %v, want the callback before the hook for each commit", order)
		}
	}
}
