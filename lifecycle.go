package iceberg

import (
	"context"
	"fmt"
)

// Flush returns when everything accepted before the call is committed (with WithCheckpoints: everything up to
// the last checkpoint), or with the error that prevented it. ctx bounds the wait, never an in-flight commit.
func (w *Writer) Flush(ctx context.Context) error { return w.pipe.Flush(ctx) }

// Close flushes as Flush does, stops the writer's goroutines and frees its memory. With WithCheckpoints, rows
// after the last checkpoint are discarded (Stats counts them). Later calls return ErrClosed.
//
// Close returns by the time ctx ends, whatever the catalog or the object store do. When ctx ends first, the
// error wraps ctx's error and says how many rows and batches were not committed; batches still encoding are
// cancelled at once, and a commit already sent to the catalog is left to resolve in the background on the
// writer's own context (for at most WithCommitTimeout, then it is cancelled too), so that no commit is cut off
// half-way by the caller's deadline: if it lands, WithOnCommit reports it, and LastCheckpoint tells either way.
func (w *Writer) Close(ctx context.Context) error {
	defer w.own.stop(ctx)
	s, err := w.pipe.Shutdown(ctx, true)
	w.maint.Stop()
	w.files.DropBulk(ctx, w.view.table()) // bulk files still open hold rows never committed
	w.keys.drop("", nil)                  // a Router's other tables may have the index's bytes
	w.changes.Release()                   // and the versions' bytes
	switch {
	case err != nil:
		return err
	case s.Failed != nil:
		_ = w.cbs.wait(ctx) // the callbacks of the commits before the failure, as far as ctx allows
		return s.Failed
	case s.FlushErr == nil && (s.StopErr == nil || s.Lost.Batches == 0):
		// Everything was committed; what ctx cut short is the goroutines' end (a maintenance commit, say),
		// which finishes in the background. The callbacks of the commits are waited for as far as ctx allows.
		return w.cbs.wait(ctx)
	case ctx.Err() != nil:
		return fmt.Errorf("iceberg: close: %w: %s", ctx.Err(), s.Lost)
	case s.FlushErr != nil:
		return s.FlushErr
	}
	return s.StopErr
}

// Abort discards everything not yet committed (e.g. when a source partition is revoked), waits for a commit
// already in flight to resolve, and closes the writer.
//
// Abort returns by the time ctx ends: a commit still in flight then resolves in the background as with Close,
// and the error wraps ctx's error and says so (batches still encoding are simply cancelled).
func (w *Writer) Abort(ctx context.Context) error {
	defer w.own.stop(ctx)
	s, err := w.pipe.Shutdown(ctx, false)
	w.maint.Stop()
	w.files.DropBulk(ctx, w.view.table()) // bulk files still open hold rows never committed
	w.keys.drop("", nil)                  // a Router's other tables may have the index's bytes
	w.changes.Release()                   // and the versions' bytes
	if err != nil {
		return err
	}
	if s.StopErr != nil && s.Lost.InFlight > 0 {
		// Only a commit that may still land makes Abort's outcome differ from what was asked.
		return fmt.Errorf("iceberg: abort: %w: %s", s.StopErr, s.Lost)
	}
	// Callbacks of earlier commits are waited for as far as ctx allows; ones still running then are delivered
	// later, which changes nothing Abort was asked for.
	_ = w.cbs.wait(ctx)
	return nil
}

// removeFiles deletes files the pipeline released as provably never committed, as far as ctx allows.
func (w *Writer) removeFiles(ctx context.Context, paths []string) {
	tbl := w.view.table()
	if tbl == nil {
		return
	}
	if fs, err := tbl.FS(ctx); err == nil {
		for _, p := range paths {
			if ctx.Err() != nil {
				return
			}
			_ = fs.Remove(p)
		}
	}
}
