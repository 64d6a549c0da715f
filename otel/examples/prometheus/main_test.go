package main

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	iceberg "github.com/icewriter/iceberg"
)

// TestMetricsServedForPrometheus: after rows are written and committed, a scrape of /metrics holds the writer's
// counters, histograms and gauges in Prometheus' text format, labelled with the table.
func TestMetricsServedForPrometheus(t *testing.T) {
	ctx := context.Background()
	commits := make(chan struct{}, 100)
	a, err := newApp(ctx, config{dir: t.TempDir(), partitions: 2, onCommit: func(iceberg.CommitInfo) { commits <- struct{}{} }})
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	for range 3 {
		if err := a.write(ctx, 1000); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Flush returns once the rows are committed; the hooks' events of those commits are delivered after it, on
	// the writer's callback goroutine: a commit's attempt and file events before its OnCommit callback, its
	// HookCommitted hooks after it. Wait for the callbacks.
	for range a.w.Stats().Commits {
		<-commits
	}
	if err := a.write(ctx, 10); err != nil { // positions waiting: a freshness and a lag to show
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	a.handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Result().Body)
	for _, want := range []string{
		`iceberg_writer_batches_total{iceberg_table="metrics.events"`,
		`iceberg_writer_commit_attempts_total{iceberg_commit_kind="run",iceberg_commit_outcome="applied",iceberg_table="metrics.events"`,
		`iceberg_writer_bytes_written_total{iceberg_file_content="data"`,
		`iceberg_writer_freshness_seconds{iceberg_table="metrics.events",iceberg_writer_id=`,
		`iceberg_writer_memory_held_bytes{`,
		`iceberg_writer_position_lag_seconds{iceberg_source_partition="p0",iceberg_table="metrics.events"`,
		`iceberg_writer_position_lag_offsets{iceberg_source_partition="p1",iceberg_table="metrics.events"`,
		`iceberg_writer_queue_batches{`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
}
