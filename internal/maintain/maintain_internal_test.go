package maintain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/icewriter/iceberg/internal/commit"
)

// scheduled runs a maintainer over commits with the given delete-file counts and returns what it ran, by
// commit: "expire snapshots", "rewrite manifests" (the transactions it commits), "compact", "small files".
// A transaction named in fail returns that error.
func scheduled(m *Maintainer, deleteFiles []int, fail map[string]error) []string {
	var ran []string
	m.env.Log = slog.New(slog.DiscardHandler)
	m.env.OnExpiry = func(time.Time, commit.Result, int, bool, error) {}
	m.env.Commit = func(_ context.Context, op *commit.Op) (commit.Result, error) {
		ran = append(ran, fmt.Sprintf("%d %s", m.commits, op.What))
		return commit.Result{}, fail[op.What]
	}
	m.compact = func(smallOnly bool) bool {
		what := "compact"
		if smallOnly {
			what = "small files"
		}
		ran = append(ran, fmt.Sprintf("%d %s", m.commits, what))
		return true
	}
	m.env.Table = func() *table.Table { return nil } // only expiry by count reads it
	for _, n := range deleteFiles {
		m.AfterCommit(context.Background(), n)
	}
	return ran
}

// TestMaintainerSchedule: manifest rewrites every rewriteEvery commits; at most one compaction per commit, the
// automatic one after autoCompact commits with delete files winning over the small-file one.
func TestMaintainerSchedule(t *testing.T) {
	m := &Maintainer{cfg: Config{RewriteEvery: 4, AutoCompact: 2, SmallFiles: 3}}
	got := scheduled(m, []int{1, 0, 1, 0, 0, 1, 1, 0, 0}, nil)
	want := []string{"3 compact", "4 rewrite manifests", "6 small files", "7 compact", "8 rewrite manifests",
		"9 small files"}
	if !slices.Equal(got, want) {
		t.Fatalf("ran %q, want %q", got, want)
	}
}

// TestMaintainerExpiryByAge: with an age limit, snapshot expiry runs every 50 commits.
func TestMaintainerExpiryByAge(t *testing.T) {
	m := &Maintainer{cfg: Config{ExpireAge: time.Hour}}
	got := scheduled(m, make([]int, 120), nil)
	if want := []string{"50 expire snapshots", "100 expire snapshots"}; !slices.Equal(got, want) {
		t.Fatalf("ran %q, want %q", got, want)
	}
}

// TestMaintainerStopsWhenFenced: a step that finds the writer fenced ends the maintenance after that commit
// (the writer stopped); any other failure does not.
func TestMaintainerStopsWhenFenced(t *testing.T) {
	m := &Maintainer{cfg: Config{RewriteEvery: 1, SmallFiles: 1}}
	got := scheduled(m, []int{0}, map[string]error{"rewrite manifests": fmt.Errorf("wrapped: %w", commit.ErrFenced)})
	if want := []string{"1 rewrite manifests"}; !slices.Equal(got, want) {
		t.Fatalf("fenced: ran %q, want %q", got, want)
	}
	m = &Maintainer{cfg: Config{RewriteEvery: 1, SmallFiles: 1}}
	got = scheduled(m, []int{0}, map[string]error{"rewrite manifests": errors.New("injected: maintenance failed")})
	if want := []string{"1 rewrite manifests", "1 small files"}; !slices.Equal(got, want) {
		t.Fatalf("failed: ran %q, want %q", got, want)
	}
}

// TestMaintainerPassesWait: a background pass due while another runs waits and starts after the first later
// commit that finds the runner free; a due automatic compaction covers a waiting small-file one, and a pass due
// again while it waits is not queued twice.
func TestMaintainerPassesWait(t *testing.T) {
	busy := map[int64]bool{2: true, 3: true, 4: true, 6: true}
	var ran []string
	m := &Maintainer{cfg: Config{AutoCompact: 3, SmallFiles: 2}, env: Env{Log: slog.New(slog.DiscardHandler)}}
	m.env.Table = func() *table.Table { return nil }
	m.compact = func(smallOnly bool) bool {
		if busy[m.commits] {
			return false
		}
		what := "compact"
		if smallOnly {
			what = "small files"
		}
		ran = append(ran, fmt.Sprintf("%d %s", m.commits, what))
		return true
	}
	// Commit 2: small files due, busy; 3: automatic compaction due (3 commits with deletes), covers it; 4: small
	// files due again, busy; 5: the compaction starts; 6: small files due, busy; 7: it starts.
	for _, n := range []int{1, 1, 1, 0, 0, 0, 0} {
		m.AfterCommit(context.Background(), n)
	}
	if want := []string{"5 compact", "7 small files"}; !slices.Equal(ran, want) {
		t.Fatalf("ran %q, want %q", ran, want)
	}
}
