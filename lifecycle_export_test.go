package iceberg

import "context"

// Stopped returns a channel closed once the writer's commit loop and encoders have all returned.
func Stopped(w *Writer) <-chan struct{} { return w.pipe.stopped() }

// WaitFor waits until cond holds, checked again at every state change of the writer's pipeline (a batch
// sealed, staged or committed, a failure, Close), or until ctx ends: a wait on events, not a poll.
func WaitFor(ctx context.Context, w *Writer, cond func() bool) error {
	p := w.pipe
	for {
		p.mu.Lock()
		ch := p.changed // taken before cond runs: a change after it is not missed
		p.mu.Unlock()
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
func Staged(w *Writer) bool {
	p := w.pipe
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, b := range p.queue {
		if !b.Staged {
			return false
		}
	}
	return true
}

// Closing reports whether Close or Abort has begun (the writer takes no more calls).
func Closing(w *Writer) bool {
	p := w.pipe
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.life.closed
}
