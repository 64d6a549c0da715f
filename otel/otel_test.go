package iceotel_test

import (
	"context"
	"log/slog"
	"os"
	"testing"

	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/collide"
	"github.com/icewriter/iceberg/internal/seed"
	"github.com/icewriter/iceberg/internal/tabletest"
	iceotel "github.com/icewriter/iceberg/otel"
)

// TestMain keeps the writers' Info lines (one per commit) out of the output of tests and benchmarks.
func TestMain(m *testing.M) {
	slog.SetLogLoggerLevel(slog.LevelWarn)
	os.Exit(m.Run())
}

// telemetry is an SDK that keeps what it gets: metrics read on demand, spans ended.
type telemetry struct {
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	hooks  *iceotel.Hooks
}

func newTelemetry(t *testing.T) *telemetry {
	t.Helper()
	tel := &telemetry{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(tel.reader))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tel.spans))
	t.Cleanup(func() {
		_ = mp.Shutdown(context.Background())
		_ = tp.Shutdown(context.Background())
	})
	var err error
	if tel.hooks, err = iceotel.New(iceotel.WithMeterProvider(mp), iceotel.WithTracerProvider(tp)); err != nil {
		t.Fatal(err)
	}
	return tel
}

// metrics is one collection, by metric name.
type metrics map[string]metricdata.Aggregation

func (tel *telemetry) collect(t *testing.T) metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tel.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

// matches reports whether set holds every attribute of want.
func matches(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// sum adds up a counter's points (or a histogram's counts) that carry the attributes want.
func (m metrics) sum(name string, want ...attribute.KeyValue) int64 {
	var n int64
	switch d := m[name].(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			if matches(p.Attributes, want) {
				n += p.Value
			}
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			if matches(p.Attributes, want) {
				n += int64(p.Count)
			}
		}
	case metricdata.Histogram[int64]:
		for _, p := range d.DataPoints {
			if matches(p.Attributes, want) {
				n += p.Sum
			}
		}
	}
	return n
}

// gauge returns a gauge's value with the attributes want, and whether there is one.
func (m metrics) gauge(name string, want ...attribute.KeyValue) (float64, bool) {
	switch d := m[name].(type) {
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			if matches(p.Attributes, want) {
				return float64(p.Value), true
			}
		}
	case metricdata.Gauge[float64]:
		for _, p := range d.DataPoints {
			if matches(p.Attributes, want) {
				return p.Value, true
			}
		}
	}
	return 0, false
}

// openCatalog opens a fresh embedded catalog in a temporary folder.
func openCatalog(t *testing.T) icecatalog.Catalog {
	t.Helper()
	return tabletest.TempCatalog(t)
}

// writeAt writes n rows of g through the partition and checkpoints its position.
func writeAt(t *testing.T, s *iceberg.Source, g *seed.Generator, n int, pos string) {
	t.Helper()
	rec := g.Batch(n)
	defer rec.Release()
	if err := s.Write(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(context.Background(), pos); err != nil {
		t.Fatal(err)
	}
}

// TestMetricsOfARealWrite: after rows written to a SQLite table, the metrics say what Stats says: rows, files,
// bytes, commits and their attempts and latency; the gauges show rows and positions waiting (freshness, position
// lag, memory held) until a commit catches the table up, and a closed writer's gauges are gone. Each commit is a
// span with a child span per attempt.
func TestMetricsOfARealWrite(t *testing.T) {
	ctx := context.Background()
	tel := newTelemetry(t)
	ident := table.Identifier{"otel", "events"}
	w, err := iceberg.NewWriter(ctx, openCatalog(t), ident, iceberg.WithCreate(seed.Schema),
		iceberg.WithFlushInterval(0), iceberg.WithHooks(tel.hooks))
	if err != nil {
		t.Fatal(err)
	}
	tbl, writer := iceotel.AttrTable.String("otel.events"), iceotel.AttrWriter.String(w.ID())
	part := iceotel.AttrPartition.String("p0")
	src, g := w.Source("p0"), seed.New(0, 1)

	writeAt(t, src, g, 100, "100")
	m := tel.collect(t)
	if v, ok := m.gauge("iceberg.writer.freshness", tbl, writer); !ok || v <= 0 {
		t.Errorf("freshness with rows waiting: %v (%v)", v, ok)
	}
	if v, ok := m.gauge("iceberg.writer.position.lag", tbl, writer, part); !ok || v <= 0 {
		t.Errorf("position lag with a checkpoint waiting: %v (%v)", v, ok)
	}
	if _, ok := m.gauge("iceberg.writer.position.lag.offsets", part); ok {
		t.Error("an offset lag before any position was committed")
	}
	if v, _ := m.gauge("iceberg.writer.buffered.rows", writer); v != 100 {
		t.Errorf("buffered rows: %v, want 100", v)
	}
	if v, _ := m.gauge("iceberg.writer.memory.held", writer); v <= 0 {
		t.Errorf("memory held with rows buffered: %v", v)
	}

	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	writeAt(t, src, g, 50, "150")
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	writeAt(t, src, g, 25, "175") // accepted, not committed: 25 positions behind
	// Gauges are read from Stats when collected; counters come from events, checked once Close delivered them.
	m = tel.collect(t)
	if v, ok := m.gauge("iceberg.writer.position.lag.offsets", writer, part); !ok || v != 25 {
		t.Errorf("offset lag: %v (%v), want 25", v, ok)
	}
	if v, _ := m.gauge("iceberg.writer.last_commit.age", writer); v <= 0 {
		t.Errorf("last commit age: %v", v)
	}

	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	st := w.Stats()
	m = tel.collect(t) // Close waits for the hooks: every event is in
	for name, want := range map[string]int64{
		"iceberg.writer.rows.committed":             st.RowsCommitted,
		"iceberg.writer.rows.sealed":                st.RowsAccepted,
		"iceberg.writer.batches":                    st.Batches,
		"iceberg.writer.commits":                    st.Commits,
		"iceberg.writer.files":                      st.FilesWritten,
		"iceberg.writer.bytes.written":              st.BytesWritten,
		"iceberg.writer.commit.duration":            st.Commits, // a histogram: its count
		"iceberg.writer.commit.attempts.per_commit": st.Commits, // its sum: one attempt each
		"iceberg.writer.conflicts":                  0,
	} {
		if got := m.sum(name, tbl); got != want {
			t.Errorf("%s: %d, Stats says %d", name, got, want)
		}
	}
	if st.RowsCommitted != 175 || st.Commits != 3 {
		t.Errorf("Stats: %+v", st)
	}
	applied := m.sum("iceberg.writer.commit.attempts", tbl, iceotel.AttrKind.String("run"),
		iceotel.AttrOutcome.String(iceotel.OutcomeApplied))
	if applied != st.Commits {
		t.Errorf("%d applied attempts for %d commits", applied, st.Commits)
	}
	if _, ok := m.gauge("iceberg.writer.freshness", writer); ok {
		t.Error("a closed writer's gauges are still reported")
	}

	commits := 0
	for _, s := range tel.spans.Ended() {
		if s.Name() != "iceberg.commit" {
			continue
		}
		commits++
		var children int
		for _, c := range tel.spans.Ended() {
			if c.Parent().SpanID() == s.SpanContext().SpanID() {
				children++
				if c.Name() != "iceberg.commit.attempt" || c.Status().Code == codes.Error ||
					c.StartTime().Before(s.StartTime()) || c.EndTime().After(s.EndTime()) {
					t.Errorf("attempt span %s: %v..%v, status %v; commit %v..%v", c.Name(), c.StartTime(),
						c.EndTime(), c.Status(), s.StartTime(), s.EndTime())
				}
			}
		}
		if children != 1 {
			t.Errorf("commit span with %d attempt spans", children)
		}
	}
	if int64(commits) != st.Commits {
		t.Errorf("%d commit spans, %d commits", commits, st.Commits)
	}
}

// TestConflictsByCause: writers sharing one Hooks collide on a table; the conflicts, retries and attempts the
// metrics count by cause and outcome add up to the writers' Stats, and each conflicting attempt is a failed
// child span of its commit's span.
func TestConflictsByCause(t *testing.T) {
	ctx := context.Background()
	const writers = 3
	tel := newTelemetry(t)
	base := openCatalog(t)
	ident := table.Identifier{"otel", "conflicts"}
	setup, err := iceberg.NewWriter(ctx, base, ident, iceberg.WithCreate(seed.Schema))
	if err != nil {
		t.Fatal(err)
	}
	_ = setup.Close(ctx)
	stats, err := collide.Writers(ctx, collide.NewCatalog(base, writers), ident, writers, 3, 50, func(int) []iceberg.Option {
		return []iceberg.Option{iceberg.WithHooks(tel.hooks)}
	})
	if err != nil {
		t.Fatal(err)
	}
	var conflicts, retries, nCommits int64
	for _, st := range stats {
		conflicts += st.Conflicts
		retries += st.Retries
		nCommits += st.Commits
	}
	tbl := iceotel.AttrTable.String("otel.conflicts")
	m := tel.collect(t)
	if got := m.sum("iceberg.writer.conflicts", tbl); got != conflicts || got < writers-1 {
		t.Errorf("conflicts: %d counted, Stats: %d", got, conflicts)
	}
	if got := m.sum("iceberg.writer.conflicts", tbl, iceotel.AttrCause.String(string(iceberg.ConflictBranch))); got == 0 {
		t.Error("no conflict counted with cause branch: the first round's rejections say the branch moved")
	}
	if got := m.sum("iceberg.writer.retries", tbl); got != retries {
		t.Errorf("retries: %d counted, Stats: %d", got, retries)
	}
	run := iceotel.AttrKind.String("run")
	if got := m.sum("iceberg.writer.commit.attempts", tbl, run, iceotel.AttrOutcome.String(iceotel.OutcomeConflict)); got != conflicts {
		t.Errorf("attempts with outcome conflict: %d, Stats: %d conflicts", got, conflicts)
	}
	if got := m.sum("iceberg.writer.commit.attempts", tbl, run); got != nCommits+retries {
		t.Errorf("attempts: %d, Stats: %d commits and %d retries", got, nCommits, retries)
	}

	var attemptSpans, failedSpans int64
	for _, s := range tel.spans.Ended() {
		if s.Name() != "iceberg.commit.attempt" {
			continue
		}
		attemptSpans++
		if s.Status().Code == codes.Error {
			failedSpans++
			if set := attribute.NewSet(s.Attributes()...); !set.HasValue(iceotel.AttrCause) {
				t.Errorf("a failed attempt's span names no cause: %v", s.Attributes())
			}
		}
	}
	if attemptSpans != nCommits+retries || failedSpans != conflicts {
		t.Errorf("%d attempt spans (%d failed), Stats: %d commits, %d retries, %d conflicts", attemptSpans,
			failedSpans, nCommits, retries, conflicts)
	}
}
