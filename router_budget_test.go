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
// 1,000 rows but not of both. The first table's index fits in memory; the second's takes the shared budget past
// its limit and spills its keys to local disk, which Stats says; both stay on within the shared budget
// (RouterStats), nothing is logged as a fallback, and upserts on both tables are deletion vectors, never equality
// deletes, and read back as the model says.
func TestRouterKeyIndexSharesBudget(t *testing.T) {
	t.Parallel() // see TestMain
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
	var on, spilled []string
	var used int64
	for _, ts := range st.Tables {
		if ts.Stats.KeyIndexBytes > 0 {
			on = append(on, strings.Join(ts.Table, "."))
		}
		if ts.Stats.KeyIndexSpilledBytes > 0 {
			spilled = append(spilled, strings.Join(ts.Table, "."))
		}
		used += ts.Stats.KeyIndexBytes
	}
	if len(on) != 2 || len(spilled) != 1 || spilled[0] != "db.b" || st.KeyIndexUsed != used ||
		st.KeyIndexUsed > 64<<10 || st.KeyIndexBudget != 64<<10 {
		t.Fatalf("key index on for %v, spilled for %v; router: %d of %d bytes", on, spilled, st.KeyIndexUsed, st.KeyIndexBudget)
	}
	if loggedFallback(logs, "router's key index budget") {
		t.Fatal("the second table's index fell back past the router's budget instead of spilling")
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
		if l := liveDeletes(t, cat, ident); l.Eq != 0 || l.DVs == 0 {
			t.Fatalf("%v: %d equality delete files, %d deletion vectors", ident, l.Eq, l.DVs)
		}
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
