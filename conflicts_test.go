package iceberg_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/collide"
	"github.com/icewriter/iceberg/internal/seed"
	"github.com/icewriter/iceberg/internal/tabletest"
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

// TestWritersTakeTurnsAfterConflicts: two writer IDs committing continuously on one table both progress. Once a
// commit of one lost a conflict, the other's next commits wait for its retry, so no commit meets more than a
// few conflicts and neither writer commits many times in a row while the other waits: counted on the table's
// history, not timed. (Racing at the catalog alone, a writer's backoff grew after each loss while the other
// committed dozens of times.)
func TestWritersTakeTurnsAfterConflicts(t *testing.T) {
	ctx := context.Background()
	const commits, rows = 20, 10
	cat := openCatalog(t)
	ident := table.Identifier{"conflicts", "turns"}
	createTable(t, ctx, cat, ident, seed.Schema)
	var mu sync.Mutex
	maxConflicts := map[string]int{}
	var wg sync.WaitGroup
	for i, id := range []string{"a", "b"} {
		w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithWriterID(id), iceberg.WithFlushInterval(0),
			iceberg.WithKeepSnapshots(0), iceberg.WithSmallFileCompaction(0), iceberg.WithOnCommit(func(c iceberg.CommitInfo) {
				mu.Lock()
				defer mu.Unlock()
				maxConflicts[id] = max(maxConflicts[id], c.Conflicts)
			}))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := seed.New(int64(i*commits*rows), 1)
			for range commits {
				if err := seedCommit(ctx, w, g, rows); err != nil {
					t.Error(err)
					break
				}
			}
			if err := w.Close(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	counts, _ := readRows(t, cat, ident)
	assertIDs(t, counts, 0, 2*commits*rows)
	// The writers' commits in table order, oldest first, from each one's first to the end of the one that
	// finished first: the longest run of one writer's commits in that span.
	tbl := tabletest.Load(t, cat, ident)
	var order []string
	for s := tbl.CurrentSnapshot(); s != nil; {
		if s.Summary != nil && s.Summary.Operation == table.OpAppend {
			order = append(order, s.Summary.Properties["icewriter.writer-id"])
		}
		if s.ParentSnapshotID == nil {
			break
		}
		s = tbl.SnapshotByID(*s.ParentSnapshotID)
	}
	slices.Reverse(order)
	longest, run, seen := 0, 0, map[string]int{}
	for i, id := range order {
		seen[id]++
		if seen["a"] == commits || seen["b"] == commits {
			break // the other writer has no commit left to wait for
		}
		if i > 0 && order[i-1] == id {
			run++
		} else {
			run = 1
		}
		if len(seen) == 2 {
			longest = max(longest, run)
		}
	}
	t.Logf("commits in table order %v; most conflicts in one commit %v", order, maxConflicts)
	if longest > 8 {
		t.Errorf("a writer committed %d times in a row while the other waited to commit, want at most 8", longest)
	}
	for id, n := range maxConflicts {
		if n > 4 {
			t.Errorf("a commit of writer %s met %d conflicts, want at most 4", id, n)
		}
	}
}
