package storage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// countingConn counts the writes that reach the connection under idleConn: one write syscall each.
type countingConn struct {
	net.Conn
	mu      *sync.Mutex
	writes  *[]int
	written *int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	*c.writes = append(*c.writes, len(p))
	*c.written += int64(len(p))
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// A request body goes out through a connection with the idle timeout in writes of up to writeChunk(timeout),
// not in io.Copy's 32 KiB pieces: 3 MiB (a Parquet file of the remote-cost benchmark) in about 13 writes at the
// default timeout instead of 97; a short timeout keeps writes small enough to finish within it. The body is
// wrapped so that it offers only Read, as the S3 SDK's request body does, and it arrives intact.
func TestRequestBodiesGoOutInLargeWrites(t *testing.T) {
	for _, tc := range []struct {
		timeout time.Duration
		chunk   int
	}{
		{DefaultRequestTimeout / 2, maxWriteChunk}, // one attempt's share of the default
		{4 * time.Second, 128 << 10},
		{time.Second, minWriteChunk},
	} {
		writes := sendBody(t, tc.timeout, 3<<20)
		t.Logf("timeout %s: %d writes", tc.timeout, len(writes))
		// The headers and the start of the body leave through the transport's buffer, the rest a chunk a write.
		if want := 3<<20/tc.chunk + 2; len(writes) > want {
			t.Errorf("timeout %s: %d writes for 3 MiB, want at most %d (sizes %v)", tc.timeout, len(writes), want, writes)
		}
		for _, n := range writes {
			if n > tc.chunk {
				t.Errorf("timeout %s: a write of %d bytes, more than %d", tc.timeout, n, tc.chunk)
			}
		}
	}
}

// sendBody PUTs size bytes to a server through a transport with the idle timeout and returns the size of
// each write that reached the connection, after checking that the server received the body intact.
func sendBody(t *testing.T, timeout time.Duration, size int) []int {
	t.Helper()
	var got [sha256.Size]byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		if _, err := io.Copy(h, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		copy(got[:], h.Sum(nil))
	}))
	defer srv.Close()

	var (
		mu      sync.Mutex
		writes  []int
		written int64
	)
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{Conn: c, mu: &mu, writes: &writes, written: &written}, nil
	}}
	WithIdleTimeout(tr, timeout)
	defer tr.CloseIdleConnections()

	body := make([]byte, size)
	for i := range body {
		body[i] = byte(i*7 + i>>11)
	}
	req, err := http.NewRequest(http.MethodPut, srv.URL+"/file", struct{ io.Reader }{bytes.NewReader(body)})
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(len(body))
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || got != sha256.Sum256(body) {
		t.Fatalf("status %d; the server did not receive the body as sent", resp.StatusCode)
	}
	mu.Lock()
	defer mu.Unlock()
	if written < int64(len(body)) {
		t.Fatalf("%d bytes written for a %d-byte body", written, len(body))
	}
	return append([]int(nil), writes...)
}
