package iceberg_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/collide"
	"github.com/icewriter/iceberg/internal/seed"
)

// quickRetries is the option list collide.Writers adds to every writer: retries that cost no wall time.
func quickRetries(int) []iceberg.Option { return []iceberg.Option{iceberg.WithQuickRetriesForTest()} }

// TestStatsConflictsCountEveryRejectedAttempt: with several writers on one SQLite table, Stats.Conflicts counts
// every attempt the catalog rejected because the table moved, whichever way the catalog words it (iceberg-go's
// SQL catalog answers a moved branch with "requirement failed: branch main has changed", which wraps no
// sentinel, and a lost compare-and-swap with table.ErrCommitFailed). Every rejected attempt is retried, so the
// writers' Retries add up to the same count.
func TestStatsConflictsCountEveryRejectedAttempt(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	const writers, commits, rows = 4, 5, 200
	base := openCatalog(t)
	ident := table.Identifier{"conflicts", "events"}
	createTable(t, ctx, base, ident, seed.Schema)
	cat := collide.NewCatalog(base, writers)
	stats, err := collide.Writers(ctx, cat, ident, writers, commits, rows, quickRetries)
	if err != nil {
		t.Fatal(err)
	}
	var conflicts, retries int64
	for _, st := range stats {
		conflicts += st.Conflicts
		retries += st.Retries
	}
	rejected := cat.Rejected()
	worded := 0 // rejections that wrap no sentinel: only their wording says the table moved
	for _, err := range rejected {
		if !errors.Is(err, table.ErrCommitFailed) {
			worded++
			if !strings.Contains(strings.ToLower(err.Error()), "requirement failed") {
				t.Errorf("a rejection that is no conflict: %v", err)
			}
		}
	}
	t.Logf("%d attempts rejected (%d by a requirement's wording), %d conflicts, %d retries", len(rejected), worded, conflicts, retries)
	if len(rejected) < writers-1 || worded == 0 {
		t.Fatalf("%d attempts rejected, %d of them by a requirement: the first round makes %d", len(rejected), worded, writers-1)
	}
	if conflicts != int64(len(rejected)) || retries != int64(len(rejected)) {
		t.Errorf("Stats: %d conflicts and %d retries, want %d each (the attempts the catalog rejected)", conflicts, retries, len(rejected))
	}
	counts, _ := readRows(t, base, ident)
	assertIDs(t, counts, 0, writers*commits*rows)
}
