//go:build integration

package integration_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/faultproxy"
	"github.com/icewriter/iceberg/internal/seed"
	"github.com/icewriter/iceberg/internal/tabletest"
	"github.com/icewriter/iceberg/internal/testenv"
)

// TestMergeOnReadRowLineage: on a format-v3 table a merge-on-read upsert keeps the _row_id of the row it
// replaces (the encoder writes it with the batch), against each real backend: upserts committed one at a time
// and then upserts queued behind each other (several batches in flight, so a batch is encoded before the one
// ahead of it commits and the commit checks the ids it was written with). Read back with iceberg-go's scanner
// with row lineage: every updated key keeps its id, new keys get ids no row had, no two rows share one, and the
// values are the model's.
func TestMergeOnReadRowLineage(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		cat := b.open(t)
		ident := newIdent("lineage")
		w, err := iceberg.NewWriter(ctx, cat, ident,
			iceberg.WithCreate(seed.Schema, iceberg.FormatVersion(3), iceberg.IdentifierFields("id")),
			iceberg.WithFlushInterval(0), iceberg.WithFlushRows(1000), iceberg.WithMaxInFlight(4))
		if err != nil {
			t.Fatal(err)
		}
		model := map[int64]float64{}
		upsert := func(first int64, n int, sd uint64) {
			t.Helper()
			rec := seed.New(first, sd).Batch(n)
			defer rec.Release()
			addToModel(model, rec)
			if err := w.Upsert(ctx, rec); err != nil {
				t.Fatal(err)
			}
		}
		upsert(0, 1000, 1)
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		first := readRowIDs(t, cat, ident)
		upsert(900, 1000, 2) // 900..999 updated, 1000..1899 new
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		second := readRowIDs(t, cat, ident)
		// Queued: each 1,000-row call seals a batch, encoded while earlier ones commit.
		upsert(0, 1000, 3)    // 0..999 updated again
		upsert(1500, 1000, 4) // 1500..1899 updated, 1900..2499 new
		upsert(0, 100, 5)     // 0..99 updated a third time, right behind the batch that updated them
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		checkExactly(t, cat, ident, model)
		got := readRowIDs(t, cat, ident)
		seen := map[int64]bool{}
		for _, rid := range second {
			seen[rid] = true
		}
		owner := map[int64]int64{}
		for id, rid := range got {
			if other, dup := owner[rid]; dup {
				t.Fatalf("keys %d and %d share _row_id %d", id, other, rid)
			}
			owner[rid] = id
			var want int64
			switch {
			case id < 1000:
				want = first[id]
			case id < 1900:
				want = second[id]
			default:
				if seen[rid] {
					t.Errorf("new key %d has _row_id %d, an id the table gave before", id, rid)
				}
				continue
			}
			if rid != want {
				t.Errorf("key %d has _row_id %d, want %d (the replaced row's)", id, rid, want)
			}
		}
		for id := int64(900); id < 1000; id++ {
			if second[id] != first[id] {
				t.Fatalf("key %d: _row_id %d after the first update, want %d", id, second[id], first[id])
			}
		}
		t.Logf("stats: %+v", w.Stats())
	})
}

// readRowIDs loads the table and reads each id's _row_id with row lineage.
func readRowIDs(t testing.TB, cat icecatalog.Catalog, ident table.Identifier) map[int64]int64 {
	t.Helper()
	tbl := tabletest.Load(t, cat, ident)
	return tabletest.RowIDs(t, tbl)
}

// TestMergeOnReadRowLineageAfterLostReply: on the REST catalog, a v3 merge-on-read commit whose reply is lost
// after the catalog applied it (the writer proves it applied from a reloaded table) still teaches the key index
// the row ids of the rows it added: the next upsert of those keys keeps them.
func TestMergeOnReadRowLineageAfterLostReply(t *testing.T) {
	uri := testenv.Get(t, testenv.RESTURI)
	ctx := context.Background()
	p, err := faultproxy.Start(strings.TrimPrefix(uri, "rest://"), faultproxy.Config{
		Match: func(r *http.Request) bool { return r.Method == http.MethodPost && tableCommit.MatchString(r.URL.Path) }})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cat := openRESTVia(t, p.Addr())
	ident := newIdent("lineagelost")
	w, err := iceberg.NewWriter(ctx, cat, ident,
		iceberg.WithCreate(seed.Schema, iceberg.FormatVersion(3), iceberg.IdentifierFields("id")),
		iceberg.WithWriterID("a"), iceberg.WithFlushInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	upsert := func(first int64, n int, sd uint64) {
		t.Helper()
		rec := seed.New(first, sd).Batch(n)
		defer rec.Release()
		if err := w.Upsert(ctx, rec); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	upsert(0, 1000, 1)
	p.SetFaults(map[faultproxy.Kind]float64{faultproxy.LostReply: 1})
	upsert(900, 1000, 2) // applied, its reply lost
	p.SetFaults(nil)
	before := readRowIDs(t, cat, ident)
	upsert(950, 1000, 3) // 950..1899 updated
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if counts, _ := p.Counts(); counts[faultproxy.LostReply] != 1 {
		t.Fatalf("%d replies lost, want 1", counts[faultproxy.LostReply])
	}
	got := readRowIDs(t, cat, ident)
	for id := int64(950); id < 1900; id++ {
		if got[id] != before[id] {
			t.Fatalf("key %d has _row_id %d, want %d (the replaced row's)", id, got[id], before[id])
		}
	}
	t.Logf("stats: %+v", w.Stats())
}
