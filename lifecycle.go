package iceberg

import "context"

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
// ctx bounds the wait for the flush; when it ends first, Close discards what is not committed but still waits
// for a commit already sent to the catalog to resolve (at most WithCommitTimeout), so that it never leaves a
// commit whose outcome nobody knows.
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
	w.shutdownLocked()
	w.mu.Unlock()
	w.stop()
	if cerr := w.cbs.wait(ctx); err == nil {
		err = cerr
	}
	return err
}

// Abort discards everything not yet committed (e.g. when a source partition is revoked), waits for a commit
// already in flight to resolve, and closes the writer.
func (w *Writer) Abort(ctx context.Context) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	w.shutdownLocked()
	w.mu.Unlock()
	w.stop()
	return w.cbs.wait(ctx)
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

// stop waits for the commit in flight, stops every goroutine and releases what was never committed.
func (w *Writer) stop() {
	// The commit loop sees stopping after its current run and exits; then encoders are cancelled.
	w.kickLoop()
	<-w.done
	w.cbs.close()
	w.cancel()
	w.encWG.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
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
	// These batches were never handed to the committer: provably not committed, so their files can go.
	if len(orphans) > 0 && w.tbl != nil {
		if fs, err := w.tbl.FS(context.Background()); err == nil {
			for _, p := range orphans {
				_ = fs.Remove(p)
			}
		}
	}
}
