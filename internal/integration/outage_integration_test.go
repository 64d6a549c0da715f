//go:build integration

package integration_test

import (
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/seed"
	"github.com/icewriter/iceberg/internal/testenv"
)

// switchProxy forwards TCP connections from a 127.0.0.1 port to a target; Down closes the listener and every
// open connection (the catalog is unreachable, connections are refused), Up listens on the same port again.
type switchProxy struct {
	target string
	addr   string
	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]struct{}
}

func newSwitchProxy(t *testing.T, target string) *switchProxy {
	t.Helper()
	p := &switchProxy{target: target, conns: map[net.Conn]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.Down)
	return p
}

func (p *switchProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.pipe(c)
		}
	}()
}

func (p *switchProxy) pipe(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
	_ = c.Close()
	_ = up.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// Down makes the catalog unreachable.
func (p *switchProxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
}

// Up makes it reachable again, on the same address.
func (p *switchProxy) Up(t *testing.T) {
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ {
		if ln, err = net.Listen("tcp", p.addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("proxy up: %v", err)
	}
	p.serve(ln)
}

// TestRESTCatalogOutage makes the REST catalog unreachable (connections refused) while batches are staged and
// commits are pending, with storage still up, then brings it back: the committer retries within its commit
// timeout and nothing is lost or duplicated.
func TestRESTCatalogOutage(t *testing.T) {
	uri := testenv.Get(t, testenv.RESTURI)
	proxy := newSwitchProxy(t, strings.TrimPrefix(uri, "rest://"))
	ctx := context.Background()
	cat := openRESTVia(t, proxy.addr)
	ident := newIdent("outage")
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema), iceberg.WithWriterID("outage"),
		iceberg.WithFlushRows(1000), iceberg.WithMaxInFlight(2), iceberg.WithCommitTimeout(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	g := seed.New(0, 3)
	model := map[int64]float64{}
	write := func(n int) {
		for i := 0; i < n; i++ {
			rec := g.Batch(500)
			addToModel(model, rec)
			if err := w.Write(ctx, rec); err != nil {
				t.Fatalf("Write: %v", err)
			}
			rec.Release()
		}
	}
	write(10)
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	proxy.Down()
	write(10)
	time.Sleep(4 * time.Second) // commits fail and are retried meanwhile
	if st := w.Stats(); st.RowsCommitted != 5000 {
		t.Errorf("rows committed while the catalog was down: %d, want 5000", st.RowsCommitted)
	}
	proxy.Up(t)
	write(10)
	if err := w.Close(ctx); err != nil {
		t.Fatalf("Close after the outage: %v", err)
	}
	st := w.Stats()
	t.Logf("stats: commits %d retries %d conflicts %d", st.Commits, st.Retries, st.Conflicts)
	if st.Retries == 0 {
		t.Errorf("no commit was retried: the outage did not hit a commit")
	}
	checkExactly(t, cat, ident, model)
}
