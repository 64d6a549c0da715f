package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"
)

// Request timeout: how long one storage request may go without moving a byte before it is abandoned.
const (
	// RequestTimeoutKey sets the request timeout on every backend, as a Go duration ("30s") or seconds ("30").
	RequestTimeoutKey = "icewriter.request-timeout"
	// S3RequestTimeoutKey is the S3 spelling of RequestTimeoutKey; it wins over it when both are set.
	S3RequestTimeoutKey = "s3.request-timeout"
	// DefaultRequestTimeout is the request timeout when no property sets one: long enough for a store that
	// computes before it answers (a large multipart completion), short enough that a dead connection is
	// abandoned well inside the writer's commit timeout.
	DefaultRequestTimeout = 60 * time.Second
)

// RequestTimeout resolves the request timeout from the properties (S3RequestTimeoutKey, then
// RequestTimeoutKey, else DefaultRequestTimeout).
func RequestTimeout(props map[string]string) (time.Duration, error) {
	for _, k := range []string{S3RequestTimeoutKey, RequestTimeoutKey} {
		v, ok := props[k]
		if !ok || v == "" {
			continue
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			s, ferr := strconv.ParseFloat(v, 64)
			if ferr != nil {
				return 0, fmt.Errorf("storage: %s=%q: want a duration (30s) or seconds", k, v)
			}
			d = time.Duration(s * float64(time.Second))
		}
		if d <= 0 {
			return 0, fmt.Errorf("storage: %s=%q: want a positive duration", k, v)
		}
		return d, nil
	}
	return DefaultRequestTimeout, nil
}

// ErrStalled is wrapped by every error that reports a request abandoned because no byte moved for the request
// timeout (a server that accepted the connection and stopped answering, or stopped mid-body).
var ErrStalled = errors.New("storage: request stalled")

// StallError reports a stalled request: what was waiting, where, and for how long.
type StallError struct {
	Op    string        // "read from", "write to" (a connection), or "read" (an object body)
	Addr  string        // the remote address, for connection-level stalls
	After time.Duration // the request timeout that expired
	Err   error         // the underlying error, if any
}

// Error names the operation and the timeout, never a credential (neither is part of it).
func (e *StallError) Error() string {
	where := e.Op
	if e.Addr != "" {
		where += " " + e.Addr
	}
	return fmt.Sprintf("storage: %s: no progress for %s (request timeout, %s)", where, e.After, RequestTimeoutKey)
}

// Unwrap returns ErrStalled and the underlying error.
func (e *StallError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrStalled}
	}
	return []error{ErrStalled, e.Err}
}

// Timeout reports true: a stall is a timeout (net.Error), which HTTP clients and SDK retryers treat as a
// retryable connection error.
func (e *StallError) Timeout() bool { return true }

// Temporary reports true, for retryers that still ask.
func (e *StallError) Temporary() bool { return true }

// WithIdleTimeout makes every connection of tr fail once no byte has moved in either direction for d: while
// connecting through TLS, sending a request body, waiting for the response headers and reading the body. An
// HTTP client's own timeouts cover only part of that (ResponseHeaderTimeout starts after the body is sent; a
// client Timeout bounds the whole exchange, which a large but progressing transfer may rightly exceed). The
// error wraps ErrStalled. Idle pooled connections are closed by the transport before their deadline passes.
func WithIdleTimeout(tr *http.Transport, d time.Duration) {
	if d <= 0 {
		return
	}
	dial := tr.DialContext
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		ic := &idleConn{Conn: c, idle: d, chunk: writeChunk(d)}
		ic.touch(true)
		return ic, nil
	}
	// A pooled connection's read loop waits in Read with the deadline running: close it before it fires, so
	// that an idle connection is never taken for a stalled request.
	if half := d / 2; tr.IdleConnTimeout == 0 || tr.IdleConnTimeout > half {
		tr.IdleConnTimeout = half
	}
}

// idleConn is a connection with a rolling deadline: every read or write pushes it d into the future (both
// directions at once, so that a long upload keeps the read side, which waits for the response, alive).
type idleConn struct {
	net.Conn
	idle  time.Duration
	chunk int          // the largest write, writeChunk(idle)
	last  atomic.Int64 // unix nanoseconds of the last deadline set
}

// One write to a connection is at most writeChunk(timeout) bytes, so that the deadline moves while a large
// body goes out: a write must finish within the timeout. Larger writes cost fewer syscalls, and on loopback
// each one also runs the receiver's side of TCP and wakes the server on the writer's CPU. The chunk grows with
// the timeout at minWriteRate, from minWriteChunk (the size before writes grew; short timeouts keep it) to
// maxWriteChunk (at the default request timeout, 30 s an attempt: 256 KiB must move in 30 s, 9 KB/s).
const (
	minWriteChunk = 64 << 10
	maxWriteChunk = uploadChunkSize // 256 KiB: ReadFrom copies through an upload chunk
	minWriteRate  = 32 << 10        // bytes per second
)

func writeChunk(timeout time.Duration) int {
	return int(min(maxWriteChunk, max(minWriteChunk, int64(timeout.Seconds()*minWriteRate))))
}

// touch moves the deadline, at most once per tenth of the timeout unless forced (setting a deadline is not
// free, and a read returns as soon as any bytes arrive): the effective limit lies between 0.9 and 1 times it.
func (c *idleConn) touch(force bool) {
	now := time.Now()
	last := c.last.Load()
	if !force && now.UnixNano()-last < int64(c.idle/10) {
		return
	}
	if c.last.CompareAndSwap(last, now.UnixNano()) || force {
		_ = c.Conn.SetDeadline(now.Add(c.idle))
	}
}

func (c *idleConn) Read(p []byte) (int, error) {
	c.touch(false)
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.touch(false)
	}
	return n, c.wrap("read from", err)
}

func (c *idleConn) Write(p []byte) (int, error) {
	written := 0
	for written < len(p) {
		c.touch(false)
		end := min(len(p), written+c.chunk)
		n, err := c.Conn.Write(p[written:end])
		written += n
		if err != nil {
			return written, c.wrap("write to", err)
		}
	}
	return written, nil
}

// ReadFrom sends r through the connection in writes of up to c.chunk. net/http hands a request body to
// the connection's ReadFrom when it has one; without it, io.Copy would send the body in 32 KiB writes (96
// syscalls for a 3 MiB Parquet file instead of 12). Over TLS the body goes through tls.Conn, which writes a
// record at a time, and this is not used.
func (c *idleConn) ReadFrom(r io.Reader) (int64, error) {
	// The buffer is an idle upload chunk, kept across garbage collections (a sync.Pool's would be allocated
	// and zeroed anew after each: 0.1 ms an append commit in the remote-cost benchmark).
	buf := uploadChunks.get()
	defer uploadChunks.put(buf)
	return io.CopyBuffer(writeOnly{c}, r, buf[:c.chunk])
}

// writeOnly hides idleConn's ReadFrom from io.CopyBuffer, which would otherwise call it again.
type writeOnly struct{ io.Writer }

func (c *idleConn) wrap(op string, err error) error {
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		return &StallError{Op: op, Addr: c.RemoteAddr().String(), After: c.idle, Err: err}
	}
	return err
}
