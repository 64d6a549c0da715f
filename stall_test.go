package iceberg_test

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/catalog"
	"github.com/icewriter/iceberg/internal/fakes3"
	"github.com/icewriter/iceberg/internal/faultproxy"
	"github.com/icewriter/iceberg/internal/seed"
	"github.com/icewriter/iceberg/storage"
	_ "github.com/icewriter/iceberg/storage/s3"
)

const stallSecret = "StallTestSecret99"

// stallingStore is an embedded catalog whose warehouse is on an in-memory S3 behind a fault proxy: the proxy
// can stall every request on demand (a server that accepts connections and never answers).
func stallingStore(t *testing.T, requestTimeout string, match func(*http.Request) bool) (icecatalog.Catalog, *faultproxy.Proxy) {
	t.Helper()
	srv := fakes3.Start()
	t.Cleanup(srv.Close)
	req, _ := http.NewRequest(http.MethodPut, srv.URL+"/wh", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	p, err := faultproxy.Start(srv.URL, faultproxy.Config{Seed: 1, Match: match})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	cat, err := catalog.OpenWithProperties(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "c.db"),
		map[string]string{"warehouse": "s3://wh/w", "s3.endpoint": p.URL(), "s3.region": "us-east-1",
			"s3.path-style-access": "true", "s3.access-key-id": "test", "s3.secret-access-key": stallSecret,
			"s3.retry.max-backoff": "100ms", storage.RequestTimeoutKey: requestTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cat.(icecatalog.Closer).Close() })
	return cat, p
}

// flushUntilStalled calls Flush and gives up waiting once the proxy holds a request (what Flush started is
// then stuck on the store): what follows finds the batch at that stage however slowly the machine got it there.
func flushUntilStalled(t *testing.T, w *iceberg.Writer, proxy *faultproxy.Proxy) {
	t.Helper()
	limit, cancelLimit := context.WithTimeout(context.Background(), time.Minute)
	defer cancelLimit()
	ctx, cancel := proxy.UntilStalled(limit)
	defer cancel()
	err := w.Flush(ctx)
	select {
	case <-proxy.Stalled():
	default:
		t.Fatalf("Flush returned (%v) and no request reached the stalled store within a minute", err)
	}
}

// metadataOnly matches the requests for table metadata (manifests, manifest lists, metadata.json): stalling
// them lets data files upload and stalls the commit that follows.
func metadataOnly(r *http.Request) bool { return strings.Contains(r.URL.Path, "/metadata/") }

// TestCloseReturnsByItsContextOnStalledStorage: with the object store accepting the commit's requests and
// never answering (and a request timeout far longer than the test), Close returns by its context, says what
// was not committed, and the writer's goroutines end once the commit in flight has had its commit timeout.
func TestCloseReturnsByItsContextOnStalledStorage(t *testing.T) {
	cat, proxy := stallingStore(t, "10m", metadataOnly)
	ctx := context.Background()
	w, err := iceberg.NewWriter(ctx, cat, table.Identifier{"stall", "close"}, iceberg.WithCreate(seed.Schema),
		iceberg.WithFlushRows(1000), iceberg.WithCommitTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	g := seed.New(0, 1)
	writeSeed(t, w, g, 1000)
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	proxy.SetFaults(map[faultproxy.Kind]float64{faultproxy.Stall: 1})
	writeSeed(t, w, g, 2500)
	flushUntilStalled(t, w, proxy) // the batch is uploaded and its commit hangs on a manifest
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	start := time.Now()
	err = w.Close(cctx)
	took := time.Since(start)
	t.Logf("Close after %v: %v", took, err)
	if took > 3*time.Second {
		t.Errorf("Close took %v with a 2s context", took)
	}
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "2500 rows in 1 batch not committed") ||
		!strings.Contains(err.Error(), "still in flight") {
		t.Errorf("Close error %v; want the context's error and the 2,500 rows in a commit still in flight", err)
	}
	select {
	case <-iceberg.Stopped(w):
	case <-time.After(20 * time.Second):
		t.Fatal("the writer's goroutines still run 20s after Close (commit timeout 2s)")
	}
	if !errors.Is(w.Close(ctx), iceberg.ErrClosed) {
		t.Error("a second Close did not return ErrClosed")
	}
	proxy.SetFaults(nil)
	counts, _ := readRows(t, cat, table.Identifier{"stall", "close"})
	if len(counts) != 1000 {
		t.Errorf("table holds %d rows, want the 1,000 flushed before the stall", len(counts))
	}
}

// TestAbortReturnsByItsContextOnStalledStorage: Abort on a writer whose commit is stuck on a stalled store
// returns by its context and says a commit is still in flight.
func TestAbortReturnsByItsContextOnStalledStorage(t *testing.T) {
	cat, proxy := stallingStore(t, "10m", metadataOnly)
	ctx := context.Background()
	w, err := iceberg.NewWriter(ctx, cat, table.Identifier{"stall", "abort"}, iceberg.WithCreate(seed.Schema),
		iceberg.WithCommitTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	proxy.SetFaults(map[faultproxy.Kind]float64{faultproxy.Stall: 1})
	g := seed.New(0, 1)
	writeSeed(t, w, g, 500)
	flushUntilStalled(t, w, proxy) // the batch encodes, its commit stalls
	actx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	start := time.Now()
	err = w.Abort(actx)
	took := time.Since(start)
	t.Logf("Abort after %v: %v", took, err)
	if took > 2*time.Second {
		t.Errorf("Abort took %v with a 1s context", took)
	}
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "still in flight") {
		t.Errorf("Abort error %v; want the context's error and the commit still in flight", err)
	}
	select {
	case <-iceberg.Stopped(w):
	case <-time.After(20 * time.Second):
		t.Fatal("the writer's goroutines still run 20s after Abort (commit timeout 2s)")
	}
}

// TestAbortCancelsStalledUploads: Abort stops batches whose uploads stall at once (they were never handed to
// the committer, so stopping them is never ambiguous).
func TestAbortCancelsStalledUploads(t *testing.T) {
	cat, proxy := stallingStore(t, "10m", nil)
	ctx := context.Background()
	w, err := iceberg.NewWriter(ctx, cat, table.Identifier{"stall", "uploads"}, iceberg.WithCreate(seed.Schema))
	if err != nil {
		t.Fatal(err)
	}
	proxy.StallAll(true)
	writeSeed(t, w, seed.New(0, 1), 500)
	flushUntilStalled(t, w, proxy) // seals the batch; its upload stalls
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := w.Abort(actx); err != nil {
		t.Fatalf("Abort: %v", err)
	}
	select {
	case <-iceberg.Stopped(w):
	case <-time.After(5 * time.Second):
		t.Fatal("an encoder still runs after Abort returned")
	}
	if st := w.Stats(); st.DiscardedRows != 500 {
		t.Errorf("discarded %d rows, want 500", st.DiscardedRows)
	}
}

// TestStalledStorageFailsWriter: with the object store stalled, a writer reports the stall as ErrWriterFailed
// wrapping storage.ErrStalled (naming the object, never the secret) after its request timeout (two attempts of
// half of it: one retry), instead of waiting for its caller's deadline.
func TestStalledStorageFailsWriter(t *testing.T) {
	cat, proxy := stallingStore(t, "500ms", nil)
	ctx := context.Background()
	w, err := iceberg.NewWriter(ctx, cat, table.Identifier{"stall", "fail"}, iceberg.WithCreate(seed.Schema))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort(ctx)
	g := seed.New(0, 1)
	writeSeed(t, w, g, 1000)
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	proxy.StallAll(true)
	before := proxy.Tally()
	writeSeed(t, w, g, 1000)
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	err = w.Flush(fctx)
	// The bound is on the time from the store's stall (the first request it held) to the report: the batch's
	// encoding before it, slow on a loaded machine, is no part of it.
	took := time.Since(proxy.FirstStall())
	t.Logf("Flush after %v, %v after the store stalled: %v", time.Since(start), took, err)
	if !errors.Is(err, iceberg.ErrWriterFailed) || !errors.Is(err, storage.ErrStalled) {
		t.Fatalf("Flush error %v; want ErrWriterFailed wrapping storage.ErrStalled", err)
	}
	// The writer's own waiting: the upload sent and retried once, each attempt given up after its 250ms share.
	if sent := proxy.Tally().Sub(before); sent.Requests["PUT"] != 2 || sent.Retries["PUT"] != 1 ||
		!strings.Contains(err.Error(), "no progress for 250ms") {
		t.Errorf("%d PUTs (%d retries), error %v; want the upload sent twice, each given up after 250ms",
			sent.Requests["PUT"], sent.Retries["PUT"], err)
	}
	if took > 5*time.Second {
		t.Errorf("the stall was reported %v after the store stalled; want about two request timeouts (2 x 500ms)", took)
	}
	if !strings.Contains(err.Error(), "s3://wh/") || strings.Contains(err.Error(), stallSecret) {
		t.Errorf("the error should name the object and not the secret: %v", err)
	}
}
