package iceberg

import (
	"context"
	"fmt"
	"time"
)

// Flush returns when everything accepted before the call is committed (with WithCheckpoints: everything up to
// the last checkpoint), or with the error that prevented it. ctx bounds the wait, never an in-flight commit.
func (w *Writer) Flush(ctx context.Context) error {
	w.mu.Lock()
	if err := w.usableLocked(); err != nil {
		w.mu.Unlock()
		return err
	}
	target := w.flushTargetLocked()
	w.mu.Unlock()
	return w.waitCommitted(ctx, target)
}

// flushTargetLocked seals the open buffer and returns the sequence number Flush waits for.
func (w *Writer) flushTargetLocked() int64 {
	w.sealLocked(nil)
	target := w.committed
	for _, b := range w.queue {
		if !w.opts.checkpoints || b.hasToken {
			target = b.seq
		}
	}
	return target
}

func (w *Writer) waitCommitted(ctx context.Context, target int64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.committed < target {
		if w.failed != nil {
			return w.failed
		}
		if w.closed {
			select {
			case <-w.done: // no commit can come any more (Abort, or a Close that gave up)
				return ErrClosed
			default:
			}
		}
		ch := w.changed
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			w.mu.Lock()
			return ctx.Err()
		case <-ch:
		}
		w.mu.Lock()
	}
	return nil
}

// Close flushes as Flush does, stops the writer's goroutines and frees its memory. With WithCheckpoints, rows
// after the last checkpoint are discarded (Stats counts them). Later calls return ErrClosed.
//
// Close returns by the time ctx ends, whatever the catalog or the object store do. When ctx ends first, the
// error wraps ctx's error and says how many rows and batches were not committed; batches still encoding are
// cancelled at once, and a commit already sent to the catalog is left to resolve in the background on the
// writer's own context (for at most WithCommitTimeout, then it is cancelled too), so that no commit is cut off
// half-way by the caller's deadline: if it lands, WithOnCommit reports it, and LastCheckpoint tells either way.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	var err error
	if w.failed != nil {
		err = w.failed
	} else {
		target := w.flushTargetLocked()
		w.mu.Unlock()
		err = w.waitCommitted(ctx, target)
		w.mu.Lock()
	}
	failed := w.failed
	w.shutdownLocked()
	w.mu.Unlock()
	lost, serr := w.stop(ctx)
	switch {
	case failed != nil:
		_ = w.cbs.wait(ctx) // the callbacks of the commits before the failure, as far as ctx allows
		return failed
	case err == nil && (serr == nil || lost.batches == 0):
		// Everything was committed; what ctx cut short is the goroutines' end (a maintenance commit, say),
		// which finishes in the background. The callbacks of the commits are waited for as far as ctx allows.
		return w.cbs.wait(ctx)
	case ctx.Err() != nil:
		return fmt.Errorf("iceberg: close: %w: %s", ctx.Err(), lost)
	case err != nil:
		return err
	}
	return serr
}

// Abort discards everything not yet committed (e.g. when a source partition is revoked), waits for a commit
// already in flight to resolve, and closes the writer.
//
// Abort returns by the time ctx ends: a commit still in flight then resolves in the background as with Close,
// and the error wraps ctx's error and says so (batches still encoding are simply cancelled).
func (w *Writer) Abort(ctx context.Context) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	w.shutdownLocked()
	w.mu.Unlock()
	lost, err := w.stop(ctx)
	if err != nil && lost.inFlight > 0 {
		// Only a commit that may still land makes Abort's outcome differ from what was asked.
		return fmt.Errorf("iceberg: abort: %w: %s", err, lost)
	}
	// Callbacks of earlier commits are waited for as far as ctx allows; ones still running then are delivered
	// later, which changes nothing Abort was asked for.
	_ = w.cbs.wait(ctx)
	return nil
}

// shutdownLocked refuses new calls and new runs; the run in flight, if any, completes on the writer's context.
func (w *Writer) shutdownLocked() {
	w.closed, w.stopping = true, true
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	w.signalLocked()
}

// uncommitted describes what a writer that stopped early did not commit.
type uncommitted struct {
	rows, batches          int64
	inFlightRows, inFlight int64 // of which in a commit still in flight (outcome unknown until it resolves)
}

func (u uncommitted) String() string {
	s := fmt.Sprintf("%d rows in %s not committed", u.rows, batches(u.batches))
	if u.inFlight > 0 {
		s += fmt.Sprintf(" (%d rows in %s in a commit still in flight, whose outcome is unknown until it "+
			"resolves; LastCheckpoint tells)", u.inFlightRows, batches(u.inFlight))
	}
	return s
}

func batches(n int64) string {
	if n == 1 {
		return "1 batch"
	}
	return fmt.Sprintf("%d batches", n)
}

// uncommittedLocked counts the rows and batches not committed.
func (w *Writer) uncommittedLocked() uncommitted {
	var u uncommitted
	if w.open != nil {
		u.rows += w.open.rows
		u.batches++
	}
	for _, b := range w.queue {
		u.rows += b.rows
		u.batches++
		if b.handed {
			u.inFlightRows += b.rows
			u.inFlight++
		}
	}
	return u
}

// stop waits for the commit in flight, stops every goroutine and releases what was never committed. It returns
// by the time ctx ends: then encoders are cancelled at once, the commit in flight gets WithCommitTimeout more
// on the writer's context, and the rest of the shutdown happens in the background.
func (w *Writer) stop(ctx context.Context) (uncommitted, error) {
	// The commit loop sees stopping after its current run and exits; then encoders are cancelled.
	w.kickLoop()
	if !waitOr(ctx, w.done) {
		return w.stopLater(ctx)
	}
	w.cancel()
	encoded := make(chan struct{})
	go func() {
		w.encWG.Wait()
		close(encoded)
	}()
	if !waitOr(ctx, encoded) {
		return w.stopLater(ctx)
	}
	w.mu.Lock()
	lost := w.uncommittedLocked()
	w.mu.Unlock()
	w.release(ctx)
	return lost, nil
}

// waitOr waits for ch to close and reports true, or for ctx to end first and reports false (a channel already
// closed wins over a context already done).
func waitOr(ctx context.Context, ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
	}
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}

// stopLater gives up waiting: encoders stop now, a commit in flight has WithCommitTimeout to resolve, and the
// goroutines' end and the release of what was never committed happen in the background.
func (w *Writer) stopLater(ctx context.Context) (uncommitted, error) {
	w.encCancel()
	hard := time.AfterFunc(w.opts.commitTimeout, w.cancel)
	w.mu.Lock()
	lost := w.uncommittedLocked()
	w.mu.Unlock()
	go func() {
		<-w.done
		hard.Stop()
		w.cancel()
		w.encWG.Wait()
		// Removing the files of batches never handed over is best effort and nobody waits for it any more: a
		// minute bounds it on a store that does not answer.
		rctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		w.release(rctx)
	}()
	return lost, ctx.Err()
}

// release frees what was never committed and deletes the files of batches never handed to the committer
// (provably not committed), as far as ctx allows.
func (w *Writer) release(ctx context.Context) {
	w.mu.Lock()
	var dropped int64
	if w.open != nil {
		dropped += w.open.rows
		for _, r := range w.open.recs {
			r.Release()
		}
		w.open = nil
	}
	var orphans []string
	for _, b := range w.queue {
		dropped += b.rows
		for _, r := range b.recs {
			r.Release()
		}
		b.recs = nil
		if b.handed {
			continue // a run whose outcome may be unknown: its files are kept
		}
		for _, f := range append(b.files, b.deletes...) {
			orphans = append(orphans, f.FilePath())
		}
	}
	w.queue = nil
	w.memUsed = 0
	w.st.discarded.Add(dropped)
	w.signalLocked()
	tbl := w.tbl
	w.mu.Unlock()
	if len(orphans) == 0 || tbl == nil || ctx.Err() != nil {
		return
	}
	if fs, err := tbl.FS(ctx); err == nil {
		for _, p := range orphans {
			if ctx.Err() != nil {
				return
			}
			_ = fs.Remove(p)
		}
	}
}
