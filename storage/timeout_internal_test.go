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

// A request body goes out through a connection with the idle timeout in writes of up to maxWriteChunk, not in
// io.Copy's 32 KiB pieces: 3 MiB (a Parquet file of the remote-cost benchmark) in about 12 writes instead of
// 97. The body is wrapped so that it offers only Read, as the S3 SDK's request body does, and it arrives
// intact.
func TestRequestBodiesGoOutInLargeWrites(t *testing.T) {
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
	WithIdleTimeout(tr, time.Minute)
	defer tr.CloseIdleConnections()

	body := make([]byte, 3<<20)
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
	t.Logf("%d writes for a %d-byte body", len(writes), len(body))
	// The headers and the start of the body leave through the transport's buffer, the rest a chunk a write.
	if want := len(body)/maxWriteChunk + 2; len(writes) > want {
		t.Errorf("%d writes for a %d-byte body, want at most %d (sizes %v)", len(writes), len(body), want, writes)
	}
	for _, n := range writes {
		if n > maxWriteChunk {
			t.Errorf("a write of %d bytes; the deadline moves only every %d", n, maxWriteChunk)
		}
	}
}
