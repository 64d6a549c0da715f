package iceberg

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/icewriter/iceberg/internal/redact"
)

// callbacks delivers the events of WithHooks (WithOnCommit's callback among them: a HookCommitted hook) in the
// order they happened, on a goroutine of their own, outside the commit loop and every lock of the writer, so that a callback or a hook
// may call any Writer method: Compact and Flush wait for the commit loop, which no longer waits for the
// callback; Close called from a callback does not wait for the callbacks after it (they are delivered once it
// returns). Queueing takes only mu, a leaf: events are queued from under the pipeline's locks too.
type callbacks struct {
	hooks    hookSet
	red      *redact.Redactor // masks the errors events carry
	writerID string           // the writer the events name

	mu     sync.Mutex
	queue  []any // the hooks' events
	closed bool
	wake   chan struct{} // capacity 1: something was queued, or closed was set
	done   chan struct{} // closed when the goroutine has delivered everything after close
	gid    atomic.Uint64 // the delivering goroutine's id
}

// newCallbacks starts the delivering goroutine; without hooks it delivers nothing and starts nothing.
func newCallbacks(hooks hookSet, red *redact.Redactor, writerID string) *callbacks {
	c := &callbacks{hooks: hooks, red: red, writerID: writerID, wake: make(chan struct{}, 1),
		done: make(chan struct{})}
	if c.idle() {
		close(c.done)
		return c
	}
	go c.run()
	return c
}

// idle reports that there is nothing to deliver to.
func (c *callbacks) idle() bool { return len(c.hooks.hooks) == 0 }

// wants reports whether a hook wants events of kind k: the caller builds the event only then. A nil c (before
// NewWriter made it: the fence) wants nothing.
func (c *callbacks) wants(k hookKind) bool { return c != nil && c.hooks.wants&(1<<k) != 0 }

// masked is err as events carry it: masked like the writer's errors.
func (c *callbacks) masked(err error) error {
	if err == nil || c.red == nil {
		return err
	}
	return c.red.Error(err)
}

func (c *callbacks) run() {
	defer close(c.done)
	c.gid.Store(goid())
	for {
		c.mu.Lock()
		next := c.queue
		c.queue = nil
		closed := c.closed
		c.mu.Unlock()
		for _, ev := range next {
			c.hooks.dispatch(ev)
		}
		if len(next) > 0 {
			continue
		}
		if closed {
			return
		}
		<-c.wake
	}
}

// deliver queues a commit's HookCommitted event (the commit loop calls it in commit order).
func (c *callbacks) deliver(ci CommitInfo) {
	if c.wants(hookCommitted) {
		c.emit(ci)
	}
}

// emit queues an event; after close it is dropped (an encoder cancelled by Close, say).
func (c *callbacks) emit(ev any) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.queue = append(c.queue, ev)
	c.mu.Unlock()
	c.signal()
}

// close queues HookWriterClosed (a writer's: w is nil for a Router's events), the last event, and lets the goroutine exit once it has delivered what is
// queued; nothing is queued after it.
func (c *callbacks) close(w *Writer) {
	if w != nil && c.wants(hookWriterClosed) {
		c.emit(writerClosed{w})
	}
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.signal()
}

func (c *callbacks) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// wait returns when every queued callback has returned, or with an error when ctx ends first (they are still
// delivered, in order). Called from a callback it returns at once: the callbacks after the running one cannot
// start before it returns.
func (c *callbacks) wait(ctx context.Context) error {
	if c.idle() || c.gid.Load() == goid() {
		return nil
	}
	select {
	case <-c.done: // finished wins over a ctx that is also done
		return nil
	default:
	}
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		n := len(c.queue)
		c.mu.Unlock()
		return fmt.Errorf("iceberg: commit callbacks still running (%d queued; delivered after Close returns): %w", n, ctx.Err())
	}
}

// goid is the calling goroutine's id, read from its stack header ("goroutine 17 [running]:"). It is only used
// to recognise the callback goroutine when a callback calls Close, which Go gives no other way to tell.
func goid() uint64 {
	var buf [32]byte
	n := runtime.Stack(buf[:], false)
	s := bytes.TrimPrefix(buf[:n], []byte("goroutine "))
	if i := bytes.IndexByte(s, ' '); i > 0 {
		s = s[:i]
	}
	id, _ := strconv.ParseUint(string(s), 10, 64)
	return id
}
