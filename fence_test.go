package iceberg_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/seed"
)

// Fencing: a writer whose ID a newer process took over (WithWriterID) commits nothing more, on any path.

// TestFencing: a second process with the same writer ID fences the first, whose next commit fails with
// ErrFenced; the new writer continues the sequence numbers and loses nothing.
func TestFencing(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"fault", "fence"}
	old, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema), iceberg.WithWriterID("job"))
	if err != nil {
		t.Fatal(err)
	}
	g := seed.New(0, 1)
	writeSeed(t, old, g, 100)
	if err := old.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	seqBefore := old.Stats().LastCommittedSeq
	newer, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithWriterID("job"))
	if err != nil {
		t.Fatal(err)
	}
	if newer.Stats().Epoch <= old.Stats().Epoch {
		t.Fatalf("epoch did not grow: old %d new %d", old.Stats().Epoch, newer.Stats().Epoch)
	}
	if got := newer.Stats().LastCommittedSeq; got != seqBefore {
		t.Fatalf("new writer starts after seq %d, want %d", got, seqBefore)
	}
	writeSeed(t, old, g, 100) // ids 100..199 from the zombie: must not land
	if err := old.Flush(ctx); !errors.Is(err, iceberg.ErrFenced) {
		t.Fatalf("zombie Flush: got %v, want ErrFenced", err)
	}
	writeSeed(t, newer, seed.New(200, 2), 100)
	if err := newer.Close(ctx); err != nil {
		t.Fatal(err)
	}
	counts, _ := readRows(t, cat, ident)
	if len(counts) != 200 {
		t.Fatalf("table has %d ids, want 200", len(counts))
	}
	for id := range counts {
		if id >= 100 && id < 200 {
			t.Fatalf("zombie row %d landed", id)
		}
	}
}

// TestFenceStopsCompaction: a fenced writer's Compact returns ErrFenced and commits nothing, whether or not the
// table has anything to compact.
func TestFenceStopsCompaction(t *testing.T) {
	t.Parallel() // see TestMain
	for _, deletes := range []bool{false, true} {
		t.Run(fmt.Sprintf("deletes=%v", deletes), func(t *testing.T) {
			ctx := context.Background()
			cat := openCatalog(t)
			ident := table.Identifier{"fence", "compact"}
			a, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(kvSchema, iceberg.IdentifierFields("id")),
				iceberg.WithWriterID("x"), iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompactionEvery(0))
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close(ctx)
			model := kvModel{}
			step := func(op func(context.Context, arrow.RecordBatch) error, rec arrow.RecordBatch) {
				defer rec.Release()
				if err := op(ctx, rec); err != nil {
					t.Fatal(err)
				}
				if err := a.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
			step(a.Upsert, kvBatch([]int64{1, 2, 3, 4}, []int64{1, 2, 3, 4}))
			for id := int64(1); id <= 4; id++ {
				model.upsert(id, id)
			}
			if deletes { // equality deletes: work for Compact
				step(a.Upsert, kvBatch([]int64{1, 2}, []int64{10, 20}))
				step(a.Delete, keyBatch([]int64{3}))
				model.upsert(1, 10)
				model.upsert(2, 20)
				model.del(3)
			}
			takeOver(t, ctx, cat, ident, "x")
			before := metadataFile(t, cat, ident)
			if _, err := a.Compact(ctx); !errors.Is(err, iceberg.ErrFenced) {
				t.Fatalf("Compact of a fenced writer: %v, want ErrFenced", err)
			}
			if got := metadataFile(t, cat, ident); got != before {
				t.Fatalf("the fenced writer's compaction committed: metadata %s, want %s", got, before)
			}
			compareKV(t, readKV(t, cat, ident), model)
		})
	}
}

// TestFenceStopsSchemaEvolution: a fenced writer's Write that needs a new column returns ErrFenced and leaves
// the table as it was: no column added, no row.
func TestFenceStopsSchemaEvolution(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"fence", "evolve"}
	a := newEvolvingWriter(t, cat, ident, arrow.NewSchema([]arrow.Field{fID, fName}, nil), iceberg.WithWriterID("x"))
	defer a.Close(ctx)
	writeMaps(t, a, []arrow.Field{fID, fName}, map[string]any{"id": 1, "name": "a"})
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	takeOver(t, ctx, cat, ident, "x")
	before := metadataFile(t, cat, ident)
	fScore := arrow.Field{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true}
	rec := mapsBatch(t, []arrow.Field{fID, fScore, fName}, map[string]any{"id": 2, "name": "b", "score": 1.5})
	defer rec.Release()
	if err := a.Write(ctx, rec); !errors.Is(err, iceberg.ErrFenced) {
		t.Fatalf("Write of a new column by a fenced writer: %v, want ErrFenced", err)
	}
	if err := a.Flush(ctx); !errors.Is(err, iceberg.ErrFenced) {
		t.Fatalf("Flush after it: %v, want ErrFenced", err)
	}
	if got := metadataFile(t, cat, ident); got != before {
		t.Fatalf("the fenced writer's schema change committed: metadata %s, want %s", got, before)
	}
	if _, ok := loadSchema(t, cat, ident).FindFieldByName("score"); ok {
		t.Fatal("the fenced writer added a column")
	}
	if counts, _ := readRows(t, cat, ident); len(counts) != 1 || counts[1] != 1 {
		t.Fatalf("table holds ids %v, want only 1", counts)
	}
}

// TestFenceStopsMaintenance: a writer's commit applies and its reply is lost; before the writer looks, a newer
// process with the same ID takes over. The run is reported committed (it applied before the takeover), but
// the snapshot expiry due after it must not run for the fenced writer: it logs ErrFenced, the writer stops, and
// the table stays as the takeover left it.
func TestFenceStopsMaintenance(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	base := openCatalog(t)
	cat := &slowCatalog{Catalog: base}
	ident := table.Identifier{"fence", "maintain"}
	logs := &logRecords{}
	// Expiry is due once the table holds more than 1 + 10 snapshots (the kept count plus WithKeepSnapshots' slack).
	a, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(kvSchema), iceberg.WithWriterID("x"),
		iceberg.WithFlushInterval(0), iceberg.WithKeepSnapshots(1), iceberg.WithRewriteManifestsEvery(0),
		iceberg.WithSmallFileCompactionEvery(0), iceberg.WithLogger(slog.New(logs)))
	if err != nil {
		t.Fatal(err)
	}
	model := kvModel{}
	put := func(id int64) {
		rec := kvBatch([]int64{id}, []int64{id})
		defer rec.Release()
		if err := a.Write(ctx, rec); err != nil {
			t.Fatal(err)
		}
		if err := a.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		model.insert(id, id)
	}
	for id := int64(0); id < 10; id++ {
		put(id) // with the fence snapshot: 11, no expiry yet
	}
	var taken string // the metadata the takeover left
	cat.afterLost = func() {
		newer, err := iceberg.NewWriter(ctx, base, ident, iceberg.WithWriterID("x"), iceberg.WithFlushInterval(0))
		if err != nil {
			t.Error(err)
			return
		}
		taken = newer.Table().MetadataLocation()
		_ = newer.Close(ctx)
	}
	cat.mu.Lock()
	cat.loseReplies = 1
	cat.mu.Unlock()
	put(10) // applied before the takeover: 12 snapshots, 13 with the takeover's, so expiry is due after it
	if taken == "" {
		t.Fatal("the takeover did not happen")
	}
	_ = a.Close(ctx) // waits for the maintenance after the commit
	if got := metadataFile(t, base, ident); got != taken {
		t.Fatalf("the fenced writer committed after the takeover: metadata %s, want %s", got, taken)
	}
	fenced := false
	for _, err := range logs.errs("iceberg: writer stopped") {
		fenced = fenced || (errors.Is(err, iceberg.ErrFenced) && strings.Contains(err.Error(), "expire snapshots"))
	}
	if !fenced {
		t.Fatalf("no ErrFenced from snapshot expiry in the writer's log: %v", logs.errs("iceberg: writer stopped"))
	}
	compareKV(t, readKV(t, base, ident), model)
}
