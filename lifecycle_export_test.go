package iceberg

import "context"

// Stopped returns a channel closed once the writer's commit loop and encoders have all returned.
func Stopped(w *Writer) <-chan struct{} { return w.pipe.Stopped() }

// WaitFor waits until cond holds, checked again at every state change of the writer's pipeline (a batch
// sealed, staged or committed, a failure, Close), or until ctx ends: a wait on events, not a poll.
func WaitFor(ctx context.Context, w *Writer, cond func() bool) error {
	for {
		ch := w.pipe.Changed() // taken before cond runs: a change after it is not missed
		if cond() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// Staged reports whether every batch sealed so far is encoded and staged for a commit.
func Staged(w *Writer) bool { return w.pipe.AllStaged() }

// Closing reports whether Close or Abort has begun (the writer takes no more calls).
func Closing(w *Writer) bool { return w.pipe.Closing() }
