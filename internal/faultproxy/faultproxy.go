// Package faultproxy is an HTTP reverse proxy on 127.0.0.1 that injects the faults an object store's clients
// meet in production: 5xx answers, throttling (503 SlowDown, 429), connection resets, truncated bodies (the
// headers promise the full Content-Length, then the connection closes), stalls (a request accepted and never
// answered, or a body that stops mid-way), and lost replies (the request is applied upstream, then the reply is
// dropped). Each fault has a probability per request, drawn from a seeded generator, so a run is repeatable up
// to the order in which concurrent requests arrive; Stall(true) makes every request stall.
//
// The proxy keeps the Host header the client sent, so AWS SigV4 signatures made for the proxy's address still
// verify upstream (path-style S3 addressing).
//
//	p, _ := faultproxy.Start("127.0.0.1:7070", faultproxy.Config{Seed: 1, Faults: faultproxy.Mix(0.05)})
//	defer p.Close()
//	props["s3.endpoint"] = p.URL()
package faultproxy

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Kind is a fault the proxy can inject. Truncate and StallBody cut GET answers with a body; other requests
// drawn for them pass unharmed.
type Kind int

// The faults, in the order Config.Faults is drawn.
const (
	None        Kind = iota
	ServerError      // 500 InternalError, before the request reaches upstream
	Throttle         // 503 SlowDown or 429 Too Many Requests, before the request reaches upstream
	Reset            // the connection is reset (TCP RST) before any answer, the request not applied
	Truncate         // a GET's reply headers (full Content-Length) and part of its body, then the connection closes
	Stall            // accepted and never answered (until the client gives up), not applied
	StallBody        // a GET's reply headers and part of its body, then nothing more (until the client gives up)
	LostReply        // applied upstream, then the connection closes without a reply
	numKinds
)

var kindNames = [...]string{"none", "5xx", "throttle", "reset", "truncate", "stall", "stall-body", "lost-reply"}

// String names the fault.
func (k Kind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return "Kind(" + strconv.Itoa(int(k)) + ")"
	}
	return kindNames[k]
}

// Config sets the proxy's faults.
type Config struct {
	// Seed seeds the generator that draws each request's fault.
	Seed uint64
	// Faults maps a fault to its probability per request; the probabilities are added in Kind order and
	// their sum must not exceed 1.
	Faults map[Kind]float64
	// Match limits faults to the requests it accepts (nil: every request); other requests pass through.
	Match func(*http.Request) bool
	// Classify names a request's kind for Tally (nil: its method). S3Kind and RESTKind name the operations of
	// an S3 server and of an Iceberg REST catalog.
	Classify func(*http.Request) string
}

// Mix spreads a total fault rate over every fault but the stalls (whose cost is a whole request timeout
// each): 5xx, throttling, resets, truncated bodies and lost replies, in equal parts.
func Mix(rate float64) map[Kind]float64 {
	kinds := []Kind{ServerError, Throttle, Reset, Truncate, LostReply}
	m := map[Kind]float64{}
	for _, k := range kinds {
		m[k] = rate / float64(len(kinds))
	}
	return m
}

// Proxy is a running fault-injecting proxy.
type Proxy struct {
	upstream string // host:port
	cfg      Config
	ln       net.Listener
	srv      *http.Server
	tr       *http.Transport
	stallAll atomic.Bool
	done     chan struct{} // closed by Close: stalled handlers return
	closeMu  sync.Once
	stalled  chan struct{} // closed when the first request is held (Stalled)
	stallMu  sync.Once

	mu         sync.Mutex
	onLost     func()    // runs after a request whose reply is lost was applied, before the client hears anything
	firstStall time.Time // when the first request was held
	rng        *rand.Rand
	counts     [numKinds]int64
	total      int64

	byKind  map[string]int64 // requests by Classify's kind, for Tally
	retries map[string]int64 // of byKind, the clients' retries
	bytesIn map[string]int64 // request body bytes by kind
	conns   atomic.Int64     // client connections accepted
}

// Start listens on 127.0.0.1 (a free port) and forwards to upstream, an http:// URL or host:port.
func Start(upstream string, cfg Config) (*Proxy, error) {
	var sum float64
	for k, p := range cfg.Faults {
		if k <= None || k >= numKinds || p < 0 {
			return nil, fmt.Errorf("faultproxy: bad fault %v with probability %v", k, p)
		}
		sum += p
	}
	if sum > 1 {
		return nil, fmt.Errorf("faultproxy: fault probabilities add up to %v > 1", sum)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{
		upstream: strings.TrimSuffix(strings.TrimPrefix(upstream, "http://"), "/"),
		cfg:      cfg,
		ln:       ln,
		done:     make(chan struct{}),
		stalled:  make(chan struct{}),
		rng:      rand.New(rand.NewPCG(cfg.Seed, 0x9e3779b97f4a7c15)),
		tr: &http.Transport{
			Proxy:               nil,
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     30 * time.Second,
			DisableCompression:  true, // bodies pass through byte for byte (S3 checksums cover them)
		},
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 30 * time.Second,
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				p.conns.Add(1)
			}
		}}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// OnLost sets f to run after each request whose reply is lost has been applied upstream, before the client's
// connection is reset: what happens elsewhere while the client cannot hear back (nil: nothing).
func (p *Proxy) OnLost(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.onLost = f
}

// Stalled is closed once the proxy holds a request (a Stall, StallBody or StallAll fault): from then on a
// client waits for an answer that never comes. A test that times how long the client takes to report a stall
// measures from here (FirstStall), not from before the work that led to the request.
func (p *Proxy) Stalled() <-chan struct{} { return p.stalled }

// UntilStalled returns a copy of parent that is cancelled once the proxy holds a request (Stalled): a call
// made with it returns when what it started is stuck on the store, however long the work before took.
func (p *Proxy) UntilStalled(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	go func() {
		select {
		case <-p.stalled:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// FirstStall returns when the proxy first held a request (the zero time before any was).
func (p *Proxy) FirstStall() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.firstStall
}

// URL is the proxy's address as an http:// URL.
func (p *Proxy) URL() string { return "http://" + p.ln.Addr().String() }

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// StallAll switches the "stall everything" mode: every request is accepted and never answered while on.
// Requests already stalled stay stalled until their clients give up.
func (p *Proxy) StallAll(on bool) { p.stallAll.Store(on) }

// SetFaults replaces the fault probabilities (same rules as Config.Faults; invalid maps are ignored).
func (p *Proxy) SetFaults(faults map[Kind]float64) {
	var sum float64
	for _, v := range faults {
		sum += v
	}
	if sum > 1 {
		return
	}
	p.mu.Lock()
	p.cfg.Faults = faults
	p.mu.Unlock()
}

// Counts returns how many requests got each fault, and the total of requests seen.
func (p *Proxy) Counts() (map[Kind]int64, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := map[Kind]int64{}
	for k := Kind(1); k < numKinds; k++ {
		if p.counts[k] > 0 {
			m[k] = p.counts[k]
		}
	}
	return m, p.total
}

// Close stops listening, releases stalled requests (their connections close) and closes idle upstream
// connections.
func (p *Proxy) Close() error {
	p.closeMu.Do(func() { close(p.done) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := p.srv.Shutdown(ctx)
	if err != nil {
		err = p.srv.Close()
	}
	p.tr.CloseIdleConnections()
	return err
}

// draw picks the fault of one request.
func (p *Proxy) draw(r *http.Request) Kind {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total++
	if p.stallAll.Load() {
		p.counts[Stall]++
		return Stall
	}
	if p.cfg.Match != nil && !p.cfg.Match(r) {
		return None
	}
	x := p.rng.Float64()
	for k := Kind(1); k < numKinds; k++ {
		if x < p.cfg.Faults[k] {
			p.counts[k]++
			return k
		}
		x -= p.cfg.Faults[k]
	}
	return None
}

// frac draws a fraction in [0.1, 0.9): where a truncated or stalled body stops.
func (p *Proxy) frac() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return 0.1 + 0.8*p.rng.Float64()
}

// ServeHTTP forwards one request, injecting the fault drawn for it.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.count(r)
	kind := p.draw(r)
	switch kind {
	case ServerError:
		s3Error(w, http.StatusInternalServerError, "InternalError", "injected server error")
		return
	case Throttle:
		if p.frac() < 0.5 {
			s3Error(w, http.StatusServiceUnavailable, "SlowDown", "injected throttling: reduce your request rate")
		} else {
			s3Error(w, http.StatusTooManyRequests, "TooManyRequests", "injected throttling")
		}
		return
	case Reset:
		// Read a little of the body first, as a server that dies mid-request would.
		_, _ = io.CopyN(io.Discard, r.Body, 1024)
		reset(w)
		return
	case Stall:
		p.hold(r)
		return
	}
	resp, err := p.forward(r)
	if err != nil {
		s3Error(w, http.StatusBadGateway, "InternalError", "faultproxy: upstream: "+err.Error())
		return
	}
	defer resp.Body.Close()
	if kind == LostReply {
		_, _ = io.Copy(io.Discard, resp.Body) // the upstream finished applying the request
		p.mu.Lock()
		hook := p.onLost
		p.mu.Unlock()
		if hook != nil {
			hook()
		}
		reset(w)
		return
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	cut := int64(-1)
	if (kind == Truncate || kind == StallBody) && r.Method == http.MethodGet && resp.ContentLength > 0 {
		cut = int64(float64(resp.ContentLength) * p.frac())
		w.Header().Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	w.WriteHeader(resp.StatusCode)
	if cut < 0 {
		_, _ = io.Copy(w, resp.Body)
		return
	}
	_, _ = io.CopyN(w, resp.Body, cut)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	if kind == StallBody {
		p.hold(r)
	}
	// Abort the response: the server closes the connection with the body short of its Content-Length.
	panic(http.ErrAbortHandler)
}

// hold waits until the client gives up on the request or the proxy closes.
func (p *Proxy) hold(r *http.Request) {
	p.stallMu.Do(func() {
		p.mu.Lock()
		p.firstStall = time.Now()
		p.mu.Unlock()
		close(p.stalled)
	})
	select {
	case <-r.Context().Done():
	case <-p.done:
	}
}

// forward sends the request upstream with the client's Host header (its signature covers it).
func (p *Proxy) forward(r *http.Request) (*http.Response, error) {
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.URL.Scheme = "http"
	out.URL.Host = p.upstream
	out.Host = r.Host
	if r.ContentLength == 0 {
		out.Body = nil
	}
	for _, h := range []string{"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Upgrade"} {
		out.Header.Del(h)
	}
	return p.tr.RoundTrip(out)
}

// reset closes the client's connection with a TCP RST (no FIN, no reply).
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// s3Error answers with an S3-style XML error.
func s3Error(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message><RequestId>faultproxy</RequestId></Error>`, code, msg)
}
