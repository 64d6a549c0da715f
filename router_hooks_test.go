package iceberg_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
)

// routerHook records the commits and commit rounds a router's hook hears.
type routerHook struct {
	mu      sync.Mutex
	commits map[string]int64 // rows committed, by table
	rounds  []iceberg.RoundCommit
}

func (h *routerHook) OnCommitted(ci iceberg.CommitInfo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.commits[strings.Join(ci.Table, ".")] += ci.Rows
}

func (h *routerHook) OnRoundCommitted(rc iceberg.RoundCommit) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rounds = append(h.rounds, rc)
}

// TestRouterHooksSeeEveryTable: one hook given to WithRouterHooks hears the commits of three tables, each named,
// and the commit round that carried them, with the three tables in it, sent as one multi-table commit (the
// embedded SQLite catalog commits several tables in one database transaction). The events are all delivered by
// the time Close returns.
func TestRouterHooksSeeEveryTable(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	h := &routerHook{commits: map[string]int64{}}
	r, err := iceberg.NewRouter(cat, iceberg.WithRouterHooks(h), iceberg.WithWriterOptions(iceberg.WithFlushInterval(0)))
	if err != nil {
		t.Fatal(err)
	}
	idents := []table.Identifier{{"db", "a"}, {"db", "b"}, {"db", "c"}}
	for i, ident := range idents {
		rec := kvBatch([]int64{1, 2, int64(3 + i)}, []int64{1, 2, 3})
		if err := r.Write(ctx, ident, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ident := range idents {
		if n := h.commits[strings.Join(ident, ".")]; n != 3 {
			t.Fatalf("hook heard %d rows committed to %v, want 3 (commits: %v)", n, ident, h.commits)
		}
	}
	var found bool
	for _, rc := range h.rounds {
		if rc.Err != nil {
			t.Fatalf("round commit failed: %v", rc.Err)
		}
		found = found || (rc.Atomic && slices.EqualFunc(rc.Tables, idents, slices.Equal))
	}
	if !found {
		t.Fatalf("no round commit of %v as one multi-table commit: %+v", idents, h.rounds)
	}
}
