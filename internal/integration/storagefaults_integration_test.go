//go:build integration

package integration_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	iceberggo "github.com/apache/iceberg-go"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/catalog"
	"github.com/icewriter/iceberg/internal/faultproxy"
	"github.com/icewriter/iceberg/internal/seed"
	"github.com/icewriter/iceberg/internal/testenv"
	"github.com/icewriter/iceberg/storage"
)

// The storage fault suite: the writer's object store sits behind internal/faultproxy, in front of a real S3
// server (versitygw, SeaweedFS), with an embedded catalog (the catalog itself never fails here: catalog faults
// have their own tests). Short settings (2s request timeout, 200ms retry backoff) keep it to about two minutes;
// ICEWRITER_SOAK=1 runs longer workloads, at more seeds, on every workload and server.

// soak reports whether the long storage-fault runs are asked for.
func soak() bool { return os.Getenv("ICEWRITER_SOAK") == "1" }

// faultyS3 is one S3 server behind a fault proxy.
type faultyS3 struct {
	name     string
	endpoint string // the server's own
}

func faultyServers(t *testing.T) []faultyS3 {
	var out []faultyS3
	for _, s := range []struct{ name, env string }{
		{"versitygw", testenv.VersityS3Endpoint},
		{"seaweedfs", testenv.SeaweedS3Endpoint},
	} {
		if ep := os.Getenv(s.env); ep != "" {
			out = append(out, faultyS3{s.name, ep})
		}
	}
	if len(out) == 0 {
		t.Skip("no S3 endpoint set: run scripts/integration.sh")
	}
	return out
}

// openFaulty starts a proxy in front of the server and an embedded catalog whose warehouse is on it, through
// the proxy. The proxy starts without faults; the catalog, with no faults, is returned too for read-back.
func openFaulty(t *testing.T, s faultyS3, seedN uint64, requestTimeout string, match func(*http.Request) bool) (icecatalog.Catalog, *faultproxy.Proxy) {
	t.Helper()
	if err := testenv.EnsureBucket(context.Background(), s.endpoint, warehouseBucket); err != nil {
		t.Fatal(err)
	}
	p, err := faultproxy.Start(s.endpoint, faultproxy.Config{Seed: seedN, Match: match})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	props := iceberggo.Properties{"warehouse": "s3://" + warehouseBucket + "/faults-" + uuid.NewString()[:8]}
	for k, v := range testenv.S3Props(p.URL()) {
		props[k] = v
	}
	props["s3.retry.max-backoff"] = "200ms"
	props[storage.RequestTimeoutKey] = requestTimeout
	cat, err := catalog.OpenWithProperties(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "catalog.db"), props)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cat.(icecatalog.Closer).Close() })
	return cat, p
}

// workload is a sequence of operations on keyed rows and the writer options that run it.
type workload struct {
	name string
	mode iceberg.Mode
	v    int  // table format version
	keys bool // upserts and deletes (else appends only)
}

var workloads = []workload{
	{"append", iceberg.MergeOnRead, 2, false},
	{"merge-on-read-v3", iceberg.MergeOnRead, 3, true}, // deletion vectors: the key read-back of new files
	{"copy-on-write", iceberg.CopyOnWrite, 2, true},    // planning and rewriting read every candidate file
}

type faultOpKind int

const (
	opWrite faultOpKind = iota
	opUpsert
	opDelete
)

type faultOp struct {
	kind  faultOpKind
	first int64 // first id of the batch
	n     int
	seed  uint64
	flush bool // Flush after the operation's checkpoint
}

func (o faultOp) batch() arrow.RecordBatch { return seed.New(o.first, o.seed).Batch(o.n) }

// ops draws a workload's operations: new ids appended or upserted, and (keyed) upserts and deletes of ids
// written before, with a Flush every few operations so that commits see the table change under them.
func ops(w workload, n int, rng *rand.Rand) []faultOp {
	var out []faultOp
	var next int64
	for i := 0; i < n; i++ {
		o := faultOp{kind: opWrite, n: 200 + rng.IntN(800), seed: rng.Uint64(), flush: rng.IntN(3) == 0}
		o.first = next
		if w.keys {
			o.kind = opUpsert
			if next > 0 && rng.IntN(2) == 0 {
				o.first = rng.Int64N(next) // rewrites rows committed earlier
				if rng.IntN(3) == 0 {
					o.kind, o.n = opDelete, 1+rng.IntN(200)
				}
			}
		}
		if end := o.first + int64(o.n); end > next {
			next = end
		}
		out = append(out, o)
	}
	return out
}

// apply runs the operations on a model of the table (id -> value).
func apply(model map[int64]float64, list []faultOp) {
	for _, o := range list {
		rec := o.batch()
		ids := rec.Column(0).(*array.Int64)
		for r := 0; r < int(rec.NumRows()); r++ {
			if o.kind == opDelete {
				delete(model, ids.Value(r))
			}
		}
		if o.kind != opDelete {
			addToModel(model, rec)
		}
		rec.Release()
	}
}

// runWithRestarts drives the operations through writers with one writer ID and checkpoints: when a writer
// fails, it is recreated and the operations replayed from its LastCheckpoint (the token is the number of
// operations done). It returns how many times it recreated a writer.
func runWithRestarts(t *testing.T, cat icecatalog.Catalog, ident table.Identifier, w workload, list []faultOp, maxRestarts int) int {
	t.Helper()
	ctx := context.Background()
	id := "faults-" + w.name
	create := []iceberg.CreateOption{iceberg.FormatVersion(w.v)}
	if w.keys {
		create = append(create, iceberg.IdentifierFields("id"))
	}
	restarts := 0
	for {
		err := runOnce(ctx, cat, ident, id, w, create, list)
		if err == nil {
			return restarts
		}
		restarts++
		t.Logf("writer restart %d: %v", restarts, err)
		if restarts > maxRestarts {
			t.Fatalf("%d writer restarts, at most %d allowed; last error: %v", restarts, maxRestarts, err)
		}
	}
}

func runOnce(ctx context.Context, cat icecatalog.Catalog, ident table.Identifier, id string, w workload,
	create []iceberg.CreateOption, list []faultOp) error {
	wr, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema, create...), iceberg.WithWriterID(id),
		iceberg.WithCheckpoints(), iceberg.WithMode(w.mode), iceberg.WithFlushRows(2000),
		iceberg.WithMaxInFlight(2), iceberg.WithCommitTimeout(2*time.Minute))
	if err != nil {
		return fmt.Errorf("NewWriter: %w", err)
	}
	defer wr.Abort(ctx)
	start := 0
	tok, ok, err := wr.LastCheckpoint(ctx)
	if err != nil {
		return fmt.Errorf("LastCheckpoint: %w", err)
	}
	if ok {
		if start, err = strconv.Atoi(tok); err != nil {
			return fmt.Errorf("token %q: %w", tok, err)
		}
	}
	for i := start; i < len(list); i++ {
		o := list[i]
		rec := o.batch()
		switch o.kind {
		case opWrite:
			err = wr.Write(ctx, rec)
		case opUpsert:
			err = wr.Upsert(ctx, rec)
		case opDelete:
			err = wr.Delete(ctx, rec)
		}
		rec.Release()
		if err == nil {
			err = wr.Checkpoint(ctx, strconv.Itoa(i+1))
		}
		if err == nil && o.flush {
			err = wr.Flush(ctx)
		}
		if err != nil {
			return fmt.Errorf("operation %d: %w", i, err)
		}
	}
	return wr.Close(ctx)
}

// TestStorageFaultsConverge runs the append, merge-on-read and copy-on-write workloads with 5% of the object
// store's requests failing (5xx, throttling, resets, truncated bodies, lost replies): each converges without a
// writer restart and the table reads back equal to the model. At 15% (with a few stalls: requests never
// answered, bodies stopping mid-way), each converges with at most one restart.
func TestStorageFaultsConverge(t *testing.T) {
	levels := []struct {
		rate        float64
		maxRestarts int
	}{{0.05, 0}, {0.15, 1}}
	nOps := 24
	seeds := []uint64{1}
	if soak() {
		nOps, seeds = 120, []uint64{1, 2, 3}
	}
	for _, s := range faultyServers(t) {
		// The servers run side by side: most of a run's time is retry backoff and stalls, not CPU.
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			for _, lv := range levels {
				for _, w := range workloads {
					for _, sd := range seeds {
						t.Run(fmt.Sprintf("%s/%.0fpct/seed=%d", w.name, lv.rate*100, sd), func(t *testing.T) {
							convergeUnderFaults(t, s, w, sd, lv.rate, lv.maxRestarts, nOps)
						})
					}
				}
			}
		})
	}
}

// convergeUnderFaults runs one workload with the given fault rate and checks the table against the model.
func convergeUnderFaults(t *testing.T, s faultyS3, w workload, sd uint64, rate float64, maxRestarts, nOps int) {
	cat, proxy := openFaulty(t, s, sd, "2s", nil)
	ident := newIdent("faults")
	list := ops(w, nOps, rand.New(rand.NewPCG(sd, uint64(w.v))))
	faults := faultproxy.Mix(rate)
	if maxRestarts > 0 {
		// A few stalls too (each costs a request timeout): a request never answered, and a body that stops
		// mid-way.
		faults = faultproxy.Mix(rate - 0.002)
		faults[faultproxy.Stall], faults[faultproxy.StallBody] = 0.001, 0.001
	}
	proxy.SetFaults(faults)
	start := time.Now()
	restarts := runWithRestarts(t, cat, ident, w, list, maxRestarts)
	took := time.Since(start)
	proxy.SetFaults(nil)
	counts, total := proxy.Counts()
	t.Logf("%d operations in %v, %d restarts; faults %v of %d requests", len(list), took.Round(time.Millisecond),
		restarts, counts, total)
	if counts[faultproxy.Truncate] == 0 && counts[faultproxy.Reset] == 0 {
		t.Errorf("no reset or truncated body was injected: the run tested little")
	}
	model := map[int64]float64{}
	apply(model, list)
	checkExactly(t, cat, ident, model)
}

// TestStalledStorage: the object store accepts every request and never answers. A writer reports the stall as
// ErrWriterFailed wrapping storage.ErrStalled after its request timeout (2s: two attempts of 1s, one retry), not
// after its caller's deadline, and a Close whose commit is stuck on the stalled store returns within its
// context plus a second.
func TestStalledStorage(t *testing.T) {
	for _, s := range faultyServers(t) {
		t.Run(s.name+"/reported", func(t *testing.T) {
			cat, proxy := openFaulty(t, s, 1, "2s", nil)
			ctx := context.Background()
			w, err := iceberg.NewWriter(ctx, cat, newIdent("stall"), iceberg.WithCreate(seed.Schema))
			if err != nil {
				t.Fatal(err)
			}
			defer w.Abort(ctx)
			g := seed.New(0, 1)
			write(t, w, g.Batch(1000))
			if err := w.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			proxy.StallAll(true)
			before := proxy.Tally()
			write(t, w, g.Batch(1000))
			fctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			start := time.Now()
			err = w.Flush(fctx)
			// Timed from the store's stall (the first request the proxy held), not from before the batch's
			// encoding, which a loaded machine stretches.
			took := time.Since(proxy.FirstStall())
			sent := proxy.Tally().Sub(before)
			t.Logf("stall reported after %v, %v after the store stalled (request timeout 2s; PUTs %d, retried %d): %v",
				time.Since(start).Round(time.Millisecond), took.Round(time.Millisecond), sent.Requests["PUT"], sent.Retries["PUT"], err)
			if !errors.Is(err, iceberg.ErrWriterFailed) || !errors.Is(err, storage.ErrStalled) {
				t.Fatalf("want ErrWriterFailed wrapping storage.ErrStalled, got %v", err)
			}
			// The writer's own waiting is the request timeout: the upload sent, retried once, each attempt given
			// up after its 1s share without a byte moving. Counted, these hold however loaded the machine is.
			if sent.Requests["PUT"] != 2 || sent.Retries["PUT"] != 1 || !strings.Contains(err.Error(), "no progress for 1s") {
				t.Errorf("%d PUTs (%d retries), error %v; want the upload sent twice, each given up after 1s", sent.Requests["PUT"], sent.Retries["PUT"], err)
			}
			// The time adds the CPU work after the attempts (masking and logging the error, under -race): 0.1s on
			// a quiet machine, 0.3-1.8s at load 5-10 on 2 cores, more at the load 15 CI sees. Three times the
			// request timeout still fails a writer that waits for anything else (its caller's minute, the 60s
			// default timeout); the counts above pin the waiting itself.
			if took > 6*time.Second {
				t.Errorf("the stall took %v to report; want it within three times the 2s request timeout", took)
			}
			if secret := testenv.S3Props("")["s3.secret-access-key"]; strings.Contains(err.Error(), secret) {
				t.Errorf("the error prints the secret key: %v", err)
			}
		})
		t.Run(s.name+"/close", func(t *testing.T) {
			// Only the table metadata stalls: the data file uploads, and the commit that follows hangs on its
			// manifest. The request timeout is the default, so Close's context must bound it.
			metadata := func(r *http.Request) bool { return strings.Contains(r.URL.Path, "/metadata/") }
			cat, proxy := openFaulty(t, s, 1, "60s", metadata)
			ctx := context.Background()
			w, err := iceberg.NewWriter(ctx, cat, newIdent("stallclose"), iceberg.WithCreate(seed.Schema),
				iceberg.WithCommitTimeout(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			write(t, w, seed.New(0, 2).Batch(1000))
			proxy.SetFaults(map[faultproxy.Kind]float64{faultproxy.Stall: 1})
			// Flush until the commit hangs on the store, so that Close finds it in flight however long the
			// batch took to encode and upload.
			limit, cancelLimit := context.WithTimeout(ctx, time.Minute)
			defer cancelLimit()
			fctx, fcancel := proxy.UntilStalled(limit)
			defer fcancel()
			err = w.Flush(fctx)
			select {
			case <-proxy.Stalled():
			default:
				t.Fatalf("Flush returned (%v) and no request reached the stalled store within a minute", err)
			}
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			start := time.Now()
			err = w.Close(cctx)
			took := time.Since(start)
			t.Logf("Close with a 5s context returned after %v: %v", took.Round(time.Millisecond), err)
			if took > 6*time.Second {
				t.Errorf("Close took %v; want at most its context (5s) plus 1s", took)
			}
			if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "still in flight") {
				t.Errorf("Close error %v; want the context's error and the commit still in flight", err)
			}
		})
	}
}

func write(t *testing.T, w *iceberg.Writer, rec arrow.RecordBatch) {
	t.Helper()
	defer rec.Release()
	if err := w.Write(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
}
