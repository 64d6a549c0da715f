package iceberg_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/seed"
)

// TestLogsOneLinePerCommitAndPerRetry: each commit logs one Info line with its snapshot, rows, files, duration
// and attempts; each retry one Warn line with its cause and error. Writers that collide make both.
func TestLogsOneLinePerCommitAndPerRetry(t *testing.T) {
	ctx := context.Background()
	const writers, commits, rows = 2, 3, 50
	base := openCatalog(t)
	ident := table.Identifier{"logs", "events"}
	createTable(t, ctx, base, ident, seed.Schema)
	cat := newConflictRound(base, writers)
	logs := make([]*logRecords, writers)
	stats := make([]iceberg.Stats, writers)
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		logs[i] = &logRecords{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithFlushInterval(0), iceberg.WithQuickRetriesForTest(),
				iceberg.WithLogger(slog.New(logs[i])))
			if err == nil {
				err = commitRows(ctx, w, seed.New(int64(i*commits*rows), uint64(i)), commits, rows)
				if cerr := w.Close(ctx); err == nil {
					err = cerr
				}
				stats[i] = w.Stats()
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var retries int64
	for i, l := range logs {
		var commitLines, retryLines int64
		l.mu.Lock()
		recs := l.recs
		l.mu.Unlock()
		for _, r := range recs {
			attrs := map[string]slog.Value{}
			r.Attrs(func(a slog.Attr) bool {
				attrs[a.Key] = a.Value
				return true
			})
			switch r.Message {
			case "iceberg: committed":
				commitLines++
				if r.Level != slog.LevelInfo || attrs["rows"].Int64() != rows || attrs["files"].Int64() != 1 ||
					attrs["snapshot"].Int64() == 0 || attrs["duration"].Duration() <= 0 || attrs["attempts"].Int64() < 1 {
					t.Errorf("writer %d: commit line %v %v", i, r.Level, attrs)
				}
			case "iceberg: commit attempt failed; retrying":
				retryLines++
				if r.Level != slog.LevelWarn || attrs["cause"].String() == "" || attrs["err"].Any() == nil {
					t.Errorf("writer %d: retry line %v %v", i, r.Level, attrs)
				}
			}
		}
		if commitLines != stats[i].Commits || retryLines != stats[i].Retries {
			t.Errorf("writer %d: %d commit and %d retry lines, Stats: %d commits, %d retries", i, commitLines, retryLines,
				stats[i].Commits, stats[i].Retries)
		}
		retries += retryLines
	}
	if retries == 0 {
		t.Error("no retry logged: the writers' first commits collide")
	}
}
