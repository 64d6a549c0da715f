package iceberg

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
)

// callbacks delivers WithOnCommit callbacks in commit order on a goroutine of their own, outside the commit
// loop and every lock of the writer, so that a callback may call any Writer method: Compact and Flush wait for
// the commit loop, which no longer waits for the callback; Close called from a callback does not wait for the
// callbacks after it (they are delivered once it returns).
type callbacks struct {
	fn func(CommitInfo)

	mu     sync.Mutex
	queue  []CommitInfo
	closed bool
	wake   chan struct{} // capacity 1: something was queued, or closed was set
	done   chan struct{} // closed when the goroutine has delivered everything after close
	gid    atomic.Uint64 // the delivering goroutine's id
}

// newCallbacks starts the delivering goroutine; a nil fn delivers nothing and starts nothing.
func newCallbacks(fn func(CommitInfo)) *callbacks {
	c := &callbacks{fn: fn, wake: make(chan struct{}, 1), done: make(chan struct{})}
	if fn == nil {
		close(c.done)
		return c
	}
	go c.run()
	return c
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
		for _, ci := range next {
			c.fn(ci)
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

// deliver queues a commit's callback (the commit loop calls it in commit order).
func (c *callbacks) deliver(ci CommitInfo) {
	if c.fn == nil {
		return
	}
	c.mu.Lock()
	c.queue = append(c.queue, ci)
	c.mu.Unlock()
	c.signal()
}

// close lets the goroutine exit once it has delivered what is queued; nothing is queued after it.
func (c *callbacks) close() {
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
	if c.fn == nil || c.gid.Load() == goid() {
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
