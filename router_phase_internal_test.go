package iceberg

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go/table"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// TestRouterBulkThenLive loads two keyed format-v3 tables with the same 200-row calls, one in its bulk phase and
// one live (a batch every 1,000 rows), under commit rounds every 5 ms and one Flush halfway: the bulk table gets
// two files (one per Flush: timed rounds leave its batch open) without key bloom filters, the live one a file
// per 1,000 rows, each with one; an upsert is refused during the bulk phase. Both with commit rounds and table by
// table (the writers' interval timers then seal the live table). Once the bulk table goes
// live, its key index covers the bulk file: upserts and deletes of bulk rows become deletion vectors, never
// equality deletes, and the table read back holds what the model says.
func TestRouterBulkThenLive(t *testing.T) {
	t.Parallel() // see TestMain
	t.Run("rounds", func(t *testing.T) { bulkThenLive(t) })
	t.Run("per-table", func(t *testing.T) { bulkThenLive(t, WithPerTableCommits()) })
}

func bulkThenLive(t *testing.T, opts ...RouterOption) {
	ctx := context.Background()
	cat := tabletest.TempCatalog(t)
	bulk, live := table.Identifier{"db", "bulk"}, table.Identifier{"db", "live"}
	r, err := NewRouter(cat, append(opts, WithWriterOptions(WithFlushInterval(5*time.Millisecond), WithFlushRows(1000), WithSmallFileCompactionEvery(0)),
		WithTableConfig(func(_ context.Context, ident table.Identifier, _ *arrow.Schema) (TableConfig, error) {
			cfg := TableConfig{Create: []CreateOption{IdentifierFields("id"), FormatVersion(3)}}
			if ident[1] == "bulk" {
				cfg.Phase = PhaseBulk
			}
			return cfg, nil
		}))...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	const rows, call = 20_000, 200
	model := map[int64][]string{}
	for from := 0; from < rows; from += call {
		for _, ident := range []table.Identifier{bulk, live} {
			rec := idNameRows(from, call)
			if err := r.Write(ctx, ident, rec); err != nil {
				t.Fatal(err)
			}
			rec.Release()
		}
		for i := from; i < from+call; i++ {
			model[int64(i)] = []string{"n" + strings.Repeat("x", i%7)}
		}
		if from == rows/2 {
			if err := r.Flush(ctx); err != nil { // a cut of every table, the bulk one included
				t.Fatal(err)
			}
		}
	}
	up := namedRows([]int64{1}, "u")
	if err := r.Upsert(ctx, bulk, up); !errors.Is(err, ErrBulkPhase) {
		t.Fatalf("Upsert during the bulk phase: %v", err)
	}
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	wb, _ := r.Writer(bulk)
	wl, _ := r.Writer(live)
	bulkFiles, liveFiles := tabletest.LiveDataFiles(t, wb.Table()), tabletest.LiveDataFiles(t, wl.Table())
	if len(bulkFiles) != 2 || len(liveFiles) < rows/1000 {
		t.Fatalf("bulk phase: %d files, live: %d", len(bulkFiles), len(liveFiles))
	}
	for _, f := range bulkFiles {
		if columnBloom(t, wb.Table(), f.File.FilePath(), "id") != nil {
			t.Fatalf("bulk file %s has a key bloom filter", f.File.FilePath())
		}
	}
	if columnBloom(t, wl.Table(), liveFiles[0].File.FilePath(), "id") == nil {
		t.Fatal("a live file has no key bloom filter")
	}
	if wb.keys.indexed() {
		t.Fatal("key index on during the bulk phase")
	}
	t.Logf("%d rows: %d bulk files, %d live files", rows, len(bulkFiles), len(liveFiles))

	if err := r.SetPhase(ctx, bulk, PhaseLive); err != nil {
		t.Fatal(err)
	}
	if p, _ := r.Phase(bulk); p != PhaseLive || !wb.keys.indexed() {
		t.Fatalf("after SetPhase: phase %v, key index on %v", p, wb.keys.indexed())
	}
	ups := []int64{1, 5000, 19_999, 20_001}
	if err := r.Upsert(ctx, bulk, up); err != nil {
		t.Fatal(err)
	}
	rec := namedRows(ups, "up")
	if err := r.Upsert(ctx, bulk, rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	dels := []int64{2, 3, 17_000}
	if err := r.Delete(ctx, bulk, namedRows(dels, "")); err != nil {
		t.Fatal(err)
	}
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range ups {
		model[id] = []string{"up"}
	}
	for _, id := range dels {
		delete(model, id)
	}
	requireIndexedModel(t, wb.Table(), model)
}

// TestRouterBulkWithCheckpointsThenLive: a bulk load under WithCheckpoints (a source's snapshot: rows, then a
// position that covers them) ends with a flush that seals a closer for the open bulk file; the closer holds no
// rows, so it must commit with the covered rows rather than stay queued, which SetPhase(PhaseLive) would read as
// rows encoded without the key index. The index then covers the bulk file: upserts after it become deletion
// vectors, never equality deletes, and the table holds what the model says.
func TestRouterBulkWithCheckpointsThenLive(t *testing.T) {
	ctx := context.Background()
	cat := tabletest.TempCatalog(t)
	ident := table.Identifier{"db", "snap"}
	r, err := NewRouter(cat, WithWriterOptions(WithCheckpoints(), WithSmallFileCompactionEvery(0)),
		WithTableConfig(func(context.Context, table.Identifier, *arrow.Schema) (TableConfig, error) {
			return TableConfig{Create: []CreateOption{IdentifierFields("id"), FormatVersion(3)}, Phase: PhaseBulk}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	// The router opens the table on its first write (an empty one, as the postgres source does).
	rec := idNameRows(0, 0)
	err = r.Write(ctx, ident, rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	w, _ := r.Writer(ident)
	const rows, call = 1000, 100
	model := map[int64][]string{}
	for from := 0; from < rows; from += call {
		rec := idNameRows(from, call)
		err := w.Source("snapshot").Write(ctx, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		for i := from; i < from+call; i++ {
			model[int64(i)] = []string{"n" + strings.Repeat("x", i%7)}
		}
	}
	if err := w.CheckpointPositions(ctx, map[string]string{"snapshot": "done"}); err != nil {
		t.Fatal(err)
	}
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.SetPhase(ctx, ident, PhaseLive); err != nil {
		t.Fatal(err)
	}
	if !w.keys.indexed() {
		t.Fatal("key index off after a bulk phase whose rows were all checkpointed and flushed")
	}
	ups := []int64{0, 500, 999}
	rec = namedRows(ups, "up")
	err = w.Source("live").Upsert(ctx, rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.CheckpointPositions(ctx, map[string]string{"live": "1"}); err != nil {
		t.Fatal(err)
	}
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range ups {
		model[id] = []string{"up"}
	}
	requireIndexedModel(t, w.Table(), model)
}
