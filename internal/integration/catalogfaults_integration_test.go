//go:build integration

package integration_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"

	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/faultproxy"
	"github.com/icewriter/iceberg/internal/seed"
	"github.com/icewriter/iceberg/internal/testenv"
)

// tableCommit matches a REST catalog's commit of one table (POST .../namespaces/{ns}/tables/{table}).
var tableCommit = regexp.MustCompile(`/namespaces/[^/]+/tables/[^/]+$`)

// TestRESTLostRepliesWhileAnotherWriterExpires: a proxy in front of the real REST catalog applies a writer's
// commit and drops the reply; before the writer can look, another writer commits three times and expires the
// table down to 2 snapshots (the lost commit's snapshot and its base with them). In every mode the table must
// hold each row once with the model's values, and stay readable. 20 lost replies per mode (ICEWRITER_SOAK=1:
// 100).
func TestRESTLostRepliesWhileAnotherWriterExpires(t *testing.T) {
	uri := testenv.Get(t, testenv.RESTURI)
	rounds := 20
	if soak() {
		rounds = 100
	}
	cases := []struct {
		name    string
		mode    iceberg.Mode
		keyed   bool
		version int
	}{
		{"append-v2", iceberg.MergeOnRead, false, 2},
		{"merge-on-read-v2", iceberg.MergeOnRead, true, 2},
		{"merge-on-read-v3", iceberg.MergeOnRead, true, 3},
		{"copy-on-write-v2", iceberg.CopyOnWrite, true, 2},
		{"copy-on-write-v3", iceberg.CopyOnWrite, true, 3},
	}
	for ci, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			p, err := faultproxy.Start(strings.TrimPrefix(uri, "rest://"), faultproxy.Config{Seed: uint64(ci),
				Match: func(r *http.Request) bool { return r.Method == http.MethodPost && tableCommit.MatchString(r.URL.Path) }})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			direct := openREST(t)
			cat := openRESTVia(t, p.Addr())
			ident := newIdent("lostexp")
			create := []iceberg.CreateOption{iceberg.FormatVersion(tc.version)}
			if tc.keyed {
				create = append(create, iceberg.IdentifierFields("id"))
			}
			w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema, create...),
				iceberg.WithWriterID("a"), iceberg.WithMode(tc.mode), iceberg.WithFlushInterval(0))
			if err != nil {
				t.Fatal(err)
			}
			other, err := iceberg.NewWriter(ctx, direct, ident, iceberg.WithWriterID("b"), iceberg.WithFlushInterval(0))
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close(ctx)
			model := map[int64]float64{}
			var mu sync.Mutex // the model: the proxy's handler runs the other writer
			nextOther := int64(10_000_000)
			var hookErr error // set by the hook, on the proxy's handler goroutine: under mu
			p.OnLost(func() {
				p.SetFaults(nil) // one lost reply per round
				for i := 0; i < 3; i++ {
					rec := seed.New(nextOther, uint64(nextOther)).Batch(1)
					mu.Lock()
					addToModel(model, rec)
					mu.Unlock()
					nextOther++
					err := other.Write(ctx, rec)
					rec.Release()
					if err == nil {
						err = other.Flush(ctx)
					}
					if err == nil {
						err = expireTo(ctx, direct, ident, 2)
					}
					mu.Lock()
					if err != nil && hookErr == nil {
						hookErr = err
					}
					mu.Unlock()
				}
			})
			rng := rand.New(rand.NewPCG(uint64(ci), 11))
			for round := 0; round < rounds; round++ {
				p.SetFaults(map[faultproxy.Kind]float64{faultproxy.LostReply: 1})
				rec := seed.New(int64(100_000+round), uint64(round)).Batch(1) // a fresh id: twice would show
				mu.Lock()
				addToModel(model, rec)
				mu.Unlock()
				write(t, w, rec)
				rec.Release()
				if tc.keyed {
					first := rng.Int64N(40)
					up := seed.New(first, uint64(1000+round)).Batch(1 + rng.IntN(5)) // keys repeat across rounds
					mu.Lock()
					addToModel(model, up)
					mu.Unlock()
					if err := w.Upsert(ctx, up); err != nil {
						t.Fatal(err)
					}
					up.Release()
				}
				if err := w.Flush(ctx); err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				mu.Lock()
				herr := hookErr
				mu.Unlock()
				if herr != nil {
					t.Fatalf("round %d: the other writer: %v", round, herr)
				}
			}
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
			counts, _ := p.Counts()
			if counts[faultproxy.LostReply] < int64(rounds) {
				t.Fatalf("%d replies lost, want %d", counts[faultproxy.LostReply], rounds)
			}
			checkExactly(t, direct, ident, model)
			t.Logf("%s: %d lost replies, retries %d", tc.name, counts[faultproxy.LostReply], w.Stats().Retries)
		})
	}
}

// expireTo expires the table down to its newest keep snapshots, as any other tool would.
func expireTo(ctx context.Context, cat icecatalog.Catalog, ident table.Identifier, keep int) error {
	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		return err
	}
	tx := tbl.NewTransaction()
	if err := tx.ExpireSnapshots(table.WithRetainLast(keep), table.WithOlderThan(0)); err != nil {
		return err
	}
	if _, err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("expire: %w", err)
	}
	return nil
}
