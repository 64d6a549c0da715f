package faultproxy_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/icewriter/iceberg/internal/faultproxy"
)

// upstream serves a fixed body on GET and counts the requests that reached it, and the Host each carried.
type upstream struct {
	*httptest.Server
	hits  atomic.Int64
	puts  atomic.Int64
	hosts chan string
}

var payload = bytes.Repeat([]byte("0123456789abcdef"), 64<<10/16) // 64 KiB

func newUpstream(t *testing.T) *upstream {
	u := &upstream{hosts: make(chan string, 100)}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		select {
		case u.hosts <- r.Host:
		default:
		}
		if r.Method == http.MethodPut {
			_, _ = io.Copy(io.Discard, r.Body)
			u.puts.Add(1)
			w.WriteHeader(http.StatusOK)
			return
		}
		w.Header().Set("Content-Length", "65536")
		_, _ = w.Write(payload)
	}))
	t.Cleanup(u.Close)
	return u
}

func start(t *testing.T, up *upstream, cfg faultproxy.Config) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.Start(up.URL, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func only(k faultproxy.Kind) faultproxy.Config {
	return faultproxy.Config{Seed: 1, Faults: map[faultproxy.Kind]float64{k: 1}}
}

func get(ctx context.Context, url string) (*http.Response, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	return (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
}

func put(url string) error {
	req, _ := http.NewRequest(http.MethodPut, url, strings.NewReader("body"))
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err == nil {
		resp.Body.Close()
	}
	return err
}

func TestPassThrough(t *testing.T) {
	up := newUpstream(t)
	p := start(t, up, faultproxy.Config{Seed: 1})
	resp, err := get(context.Background(), p.URL()+"/b/k")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !bytes.Equal(body, payload) {
		t.Fatalf("body %d bytes, %v", len(body), err)
	}
	if host := <-up.hosts; host != p.Addr() {
		t.Errorf("upstream saw Host %q, want the proxy's %q (signatures cover it)", host, p.Addr())
	}
}

func TestServerErrorAndThrottleNeverReachUpstream(t *testing.T) {
	for _, k := range []faultproxy.Kind{faultproxy.ServerError, faultproxy.Throttle} {
		t.Run(k.String(), func(t *testing.T) {
			up := newUpstream(t)
			p := start(t, up, only(k))
			for i := 0; i < 10; i++ {
				resp, err := get(context.Background(), p.URL()+"/b/k")
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				switch {
				case k == faultproxy.ServerError && resp.StatusCode != 500,
					k == faultproxy.Throttle && resp.StatusCode != 503 && resp.StatusCode != 429:
					t.Fatalf("status %d", resp.StatusCode)
				}
			}
			if n := up.hits.Load(); n != 0 {
				t.Errorf("%d requests reached upstream", n)
			}
		})
	}
}

func TestReset(t *testing.T) {
	up := newUpstream(t)
	p := start(t, up, only(faultproxy.Reset))
	if _, err := get(context.Background(), p.URL()+"/b/k"); err == nil {
		t.Fatal("no error from a reset connection")
	}
	if n := up.hits.Load(); n != 0 {
		t.Errorf("a reset request reached upstream %d times", n)
	}
}

func TestTruncatedBody(t *testing.T) {
	up := newUpstream(t)
	p := start(t, up, only(faultproxy.Truncate))
	resp, err := get(context.Background(), p.URL()+"/b/k")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.ContentLength != int64(len(payload)) {
		t.Errorf("Content-Length %d, want the full %d", resp.ContentLength, len(payload))
	}
	body, err := io.ReadAll(resp.Body)
	if !errors.Is(err, io.ErrUnexpectedEOF) || len(body) == 0 || len(body) >= len(payload) {
		t.Fatalf("read %d of %d bytes, %v; want a cut-off body (unexpected EOF)", len(body), len(payload), err)
	}
	if !bytes.Equal(body, payload[:len(body)]) {
		t.Error("the bytes before the cut differ from upstream's")
	}
}

func TestStallNeverAnswers(t *testing.T) {
	up := newUpstream(t)
	p := start(t, up, only(faultproxy.Stall))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := get(ctx, p.URL()+"/b/k"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the client's deadline", err)
	}
	if n := up.hits.Load(); n != 0 {
		t.Errorf("a stalled request reached upstream %d times", n)
	}
}

func TestStallMidBody(t *testing.T) {
	up := newUpstream(t)
	p := start(t, up, only(faultproxy.StallBody))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := get(ctx, p.URL()+"/b/k")
	if err != nil {
		t.Fatalf("headers should arrive: %v", err)
	}
	defer resp.Body.Close()
	// The client gives up once the proxy holds the rest of the body (a minute: it never did). Not UntilStalled:
	// the proxy holds the body after it sent the headers, and the request's context must outlive them.
	go func() {
		select {
		case <-p.Stalled():
		case <-time.After(time.Minute):
		}
		cancel()
	}()
	body, err := io.ReadAll(resp.Body)
	if err == nil || len(body) >= len(payload) {
		t.Fatalf("read %d bytes, %v; want part of the body, then the client giving up", len(body), err)
	}
	select {
	case <-p.Stalled():
	default:
		t.Fatal("the proxy did not report holding the body (Stalled)")
	}
}

func TestLostReplyIsApplied(t *testing.T) {
	up := newUpstream(t)
	p := start(t, up, only(faultproxy.LostReply))
	var atHook atomic.Int64 // the hook runs on the proxy's handler goroutine
	atHook.Store(-1)
	p.OnLost(func() { atHook.Store(up.puts.Load()) })
	if err := put(p.URL() + "/b/k"); err == nil {
		t.Fatal("the client got a reply")
	}
	if n := up.puts.Load(); n != 1 {
		t.Fatalf("upstream applied %d PUTs, want 1 (applied, then the reply lost)", n)
	}
	if n := atHook.Load(); n != 1 {
		t.Fatalf("OnLost saw %d PUTs applied, want 1 (it runs after the request applied)", n)
	}
}

func TestStallAllSwitch(t *testing.T) {
	up := newUpstream(t)
	p := start(t, up, faultproxy.Config{Seed: 1})
	if _, err := get(context.Background(), p.URL()+"/b/k"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Stalled():
		t.Fatal("Stalled is closed before any request was held")
	default:
	}
	p.StallAll(true)
	// The client gives up once the proxy holds its request (a minute: it never did).
	limit, cancelLimit := context.WithTimeout(context.Background(), time.Minute)
	defer cancelLimit()
	ctx, cancel := p.UntilStalled(limit)
	defer cancel()
	before := time.Now()
	if _, err := get(ctx, p.URL()+"/b/k"); err == nil {
		t.Fatal("a request was answered while everything stalls")
	}
	select {
	case <-p.Stalled():
	default:
		t.Fatal("Stalled is not closed: a request sent while everything stalls was not held")
	}
	if at := p.FirstStall(); at.Before(before) {
		t.Errorf("FirstStall %v is not when the request was held (sent at %v)", at, before)
	}
	uctx, ucancel := p.UntilStalled(context.Background())
	defer ucancel()
	<-uctx.Done() // the proxy has stalled already: at once (a hang here fails the test by its timeout)
	p.StallAll(false)
	resp, err := get(context.Background(), p.URL()+"/b/k")
	if err != nil {
		t.Fatalf("after StallAll(false): %v", err)
	}
	resp.Body.Close()
}

// TestSeedRepeats: the same seed draws the same faults for the same sequence of requests.
func TestSeedRepeats(t *testing.T) {
	run := func(seed uint64) []int {
		up := newUpstream(t)
		p := start(t, up, faultproxy.Config{Seed: seed, Faults: map[faultproxy.Kind]float64{
			faultproxy.ServerError: 0.3, faultproxy.Throttle: 0.2}})
		var codes []int
		for i := 0; i < 40; i++ {
			resp, err := get(context.Background(), p.URL()+"/b/k")
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			code := resp.StatusCode
			if code == 429 {
				code = 503 // the kind of throttling is drawn too, but both are throttling
			}
			codes = append(codes, code)
		}
		counts, total := p.Counts()
		if total != 40 || counts[faultproxy.ServerError]+counts[faultproxy.Throttle] == 0 {
			t.Errorf("counts %v of %d", counts, total)
		}
		return codes
	}
	a, b := run(7), run(7)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("request %d: %d then %d with the same seed", i, a[i], b[i])
		}
	}
}

func TestBadConfig(t *testing.T) {
	if _, err := faultproxy.Start("127.0.0.1:1", faultproxy.Config{Faults: map[faultproxy.Kind]float64{
		faultproxy.ServerError: 0.7, faultproxy.Reset: 0.5}}); err == nil {
		t.Error("probabilities over 1 accepted")
	}
}
