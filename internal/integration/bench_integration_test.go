//go:build integration

package integration_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	icecatalog "github.com/apache/iceberg-go/catalog"

	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/seed"
	"github.com/icewriter/iceberg/internal/tabletest"
)

const benchRows = 1_000_000

// benchFlushRows seals a batch every 100,000 rows, so that a 1,000,000-row run has ten batches and MaxInFlight
// matters (the default, 1,000,000, would make the whole run one batch).
const benchFlushRows = 100_000

// writeSeed writes benchRows seed events in calls of callRows into a fresh table and returns rows/s (Close
// included: every row committed) and the writer's stats.
func writeSeed(b *testing.B, cat icecatalog.Catalog, callRows, inFlight int) (float64, iceberg.Stats) {
	b.Helper()
	ctx := context.Background()
	w, err := iceberg.NewWriter(ctx, cat, newIdent("bench"), iceberg.WithCreate(seed.Schema),
		iceberg.WithFlushRows(benchFlushRows), iceberg.WithMaxInFlight(inFlight))
	if err != nil {
		b.Fatal(err)
	}
	g := seed.New(0, 1)
	start := time.Now()
	for written := 0; written < benchRows; written += callRows {
		rec := g.Batch(callRows)
		if err := w.Write(ctx, rec); err != nil {
			b.Fatal(err)
		}
		rec.Release()
	}
	if err := w.Close(ctx); err != nil {
		b.Fatal(err)
	}
	el := time.Since(start)
	st := w.Stats()
	if st.RowsCommitted != benchRows {
		b.Fatalf("committed %d rows, want %d", st.RowsCommitted, benchRows)
	}
	return float64(benchRows) / el.Seconds(), st
}

// openEmbedded opens a fresh embedded catalog in a temporary folder.
func openEmbedded(b *testing.B) icecatalog.Catalog {
	return tabletest.TempCatalog(b)
}

// BenchmarkRESTS3 writes 1,000,000 seed events into the SeaweedFS REST catalog and S3 and, in the same run
// and with the same settings, into the embedded catalog (SQLite and a local folder), at 1,000- and
// 10,000-row Write calls and MaxInFlight 1, 4 and 16. It reports rows/s for both and the ratio REST/embedded
// (goal: at least 0.5 at 10,000-row calls). Run it with
//
//	bash scripts/integration.sh bench
func BenchmarkRESTS3(b *testing.B) {
	rest := openREST(b)
	embedded := openEmbedded(b)
	type result struct {
		call, inFlight int
		emb, rest      float64
		restStats      iceberg.Stats
	}
	var results []result
	for _, call := range []int{1000, 10_000} {
		for _, inFlight := range []int{1, 4, 16} {
			r := result{call: call, inFlight: inFlight}
			b.Run(fmt.Sprintf("embedded/call=%d/inflight=%d", call, inFlight), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					r.emb, _ = writeSeed(b, embedded, call, inFlight)
				}
				b.ReportMetric(r.emb, "rows/s")
			})
			b.Run(fmt.Sprintf("rest-s3/call=%d/inflight=%d", call, inFlight), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					r.rest, r.restStats = writeSeed(b, rest, call, inFlight)
				}
				b.ReportMetric(r.rest, "rows/s")
				if r.emb > 0 {
					b.ReportMetric(r.rest/r.emb, "x-embedded")
				}
			})
			results = append(results, r)
		}
	}
	// Printed, not logged: a parent benchmark's log is dropped when its sub-benchmarks pass.
	fmt.Printf("\n%-10s %-9s %14s %14s %8s %8s\n", "call rows", "inflight", "embedded r/s", "rest+s3 r/s", "ratio", "commits")
	for _, r := range results {
		ratio := 0.0
		if r.emb > 0 {
			ratio = r.rest / r.emb
		}
		fmt.Printf("%-10d %-9d %14.0f %14.0f %8.2f %8d\n", r.call, r.inFlight, r.emb, r.rest, ratio, r.restStats.Commits)
	}
}
