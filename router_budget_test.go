package iceberg_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
)

// TestRouterKeyIndexSharesBudget: two keyed format-v3 tables behind one router whose key index budget
// (WithKeyIndexBytes, 64 KiB; an index holds about 45 KB for 1,000 int64 keys) holds the keys of one table's
// 1,000 rows but not of both. The first table's index fits and stays on; the second's takes the shared budget
// past its limit and falls back to equality deletes, which Stats and the log say; RouterStats counts the one
// index left. Upserts on both tables read back as the model says.
func TestRouterKeyIndexSharesBudget(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	logs := &logRecords{}
	r, err := iceberg.NewRouter(cat,
		iceberg.WithWriterOptions(iceberg.WithKeyIndexBytes(64<<10), iceberg.WithFlushInterval(0),
			iceberg.WithLogger(slog.New(logs))),
		iceberg.WithTableConfig(func(context.Context, table.Identifier, *arrow.Schema) (iceberg.TableConfig, error) {
			return iceberg.TableConfig{Create: []iceberg.CreateOption{iceberg.IdentifierFields("id"), iceberg.FormatVersion(3)}}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	a, b := table.Identifier{"db", "a"}, table.Identifier{"db", "b"}
	models := map[string]kvModel{}
	ids := make([]int64, 1000)
	for i := range ids {
		ids[i] = int64(i)
	}
	for _, ident := range []table.Identifier{a, b} {
		rec := kvBatch(ids, ids)
		if err := r.Write(ctx, ident, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		if err := r.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		m := kvModel{}
		for _, id := range ids {
			m.insert(id, id)
		}
		models[strings.Join(ident, ".")] = m
	}
	st := r.Stats()
	var on, off []string
	for _, ts := range st.Tables {
		if ts.Stats.KeyIndexBytes > 0 {
			on = append(on, strings.Join(ts.Table, "."))
		} else {
			off = append(off, strings.Join(ts.Table, "."))
		}
	}
	if len(on) != 1 || on[0] != "db.a" || len(off) != 1 || st.KeyIndexUsed != st.Tables[0].Stats.KeyIndexBytes ||
		st.KeyIndexBudget != 64<<10 {
		t.Fatalf("key index on for %v, off for %v; router: %d of %d bytes", on, off, st.KeyIndexUsed, st.KeyIndexBudget)
	}
	if !loggedFallback(logs, "router's key index budget") {
		t.Fatal("no log line says the second table's index went past the router's budget")
	}
	for _, ident := range []table.Identifier{a, b} {
		rec := kvBatch([]int64{1, 500, 999, 1000}, []int64{-1, -2, -3, -4})
		if err := r.Upsert(ctx, ident, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		for i, id := range []int64{1, 500, 999, 1000} {
			models[strings.Join(ident, ".")].upsert(id, int64(-1-i))
		}
	}
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, ident := range []table.Identifier{a, b} {
		compareKV(t, readKV(t, cat, ident), models[strings.Join(ident, ".")])
	}
}

// loggedFallback reports whether a "key index off" line gave a reason containing s.
func loggedFallback(l *logRecords, s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.recs {
		if !strings.HasPrefix(r.Message, "iceberg: key index off") {
			continue
		}
		found := false
		r.Attrs(func(a slog.Attr) bool {
			found = found || (a.Key == "reason" && strings.Contains(a.Value.String(), s))
			return !found
		})
		if found {
			return true
		}
	}
	return false
}
