package iceberg_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/collide"
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
	logs := make([]*logRecords, writers)
	for i := range logs {
		logs[i] = &logRecords{}
	}
	stats, err := collide.Writers(ctx, collide.NewCatalog(base, writers), ident, writers, commits, rows, func(i int) []iceberg.Option {
		return []iceberg.Option{iceberg.WithQuickRetriesForTest(), iceberg.WithLogger(slog.New(logs[i]))}
	})
	if err != nil {
		t.Fatal(err)
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
