package iceberg_test

import (
	"context"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/seed"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// compactions is a HookCompaction that hands each compaction to a channel.
type compactions chan iceberg.Compaction

func (c compactions) OnCompaction(ev iceberg.Compaction) { c <- ev }

// TestCompactionDoesNotHoldLiveFlushes: a small-file compaction pass of the writer's maintenance is held after
// writing its files, before its commit. Meanwhile the writer goes on committing: flushes of new rows and of
// upserts of rows inside the very files the pass rewrites (equality deletes committed after the pass's
// snapshot, which the maintainer converts into position deletes on those files) each return while the pass is
// held. Released, the pass commits its rewrite, and the table holds every row once with its newest values: the
// rewritten files kept the pass snapshot's sequence number, so the upserts' equality deletes still apply to
// them, and the converted position deletes were moved onto the new files.
func TestCompactionDoesNotHoldLiveFlushes(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"compact", "live"}
	hold, held, letGo := holdFirstPass()
	events := make(compactions, 4)
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema), iceberg.WithKeys("id"),
		iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompactionEvery(8), iceberg.WithHooks(events), hold)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	defer letGo()
	g := seed.New(0, 1)
	rows := int64(0)
	// Eight commits of 50 rows: the pass after the eighth merges them.
	commitSeed(t, w, g, 8, 50)
	rows += 8 * 50
	select {
	case <-held:
	case <-time.After(time.Minute):
		t.Fatal("no compaction pass after 8 commits")
	}
	// While the pass is held: commits of new rows and of upserts of the rows it rewrites. Each flush must
	// return while the pass waits (a pass inside the commit loop would hold them until the timeout).
	upserts := seed.New(0, 99)
	want := map[int64]map[string]any{}
	for i := 0; i < 10; i++ {
		writeSeed(t, w, g, 20)
		rows += 20
		rec := upserts.Batch(30) // ids 30i..30i+29, in the held pass's files
		if err := w.Upsert(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := w.Flush(fctx)
		cancel()
		if err != nil {
			t.Fatalf("flush %d while a compaction pass is held: %v", i, err)
		}
	}
	_, model := readRows(t, cat, ident) // every upsert committed: the model the compaction must keep
	for id := int64(0); id < 300; id++ {
		want[id] = model[id]
	}
	letGo()
	ev := <-events
	if ev.Err != nil || ev.Result.SnapshotID == 0 || ev.Result.RewrittenDataFiles < 8 {
		t.Fatalf("compaction after the held commits: %+v", ev)
	}
	counts, got := readRows(t, cat, ident)
	assertIDs(t, counts, 0, rows)
	for id, row := range want {
		if got[id]["value"] != row["value"] || got[id]["info"] != row["info"] {
			t.Fatalf("id %d after the compaction: %v, want %v", id, got[id], row)
		}
	}
	tbl := tabletest.Load(t, cat, ident)
	if n := len(tabletest.LiveDataFiles(t, tbl)); n > 12 {
		t.Fatalf("%d data files after the compaction, want the 8 first ones merged", n)
	}
}

// TestCompactionRebasesConcurrentDeletes: a small-file compaction pass is held after writing its files while
// the writer upserts rows inside the very files it rewrites, on a format-v3 table (the key index writes each
// upsert as a deletion vector on the file holding the old row) and on a v2 one (the upserts' equality deletes
// are converted into position deletes on those files). Released, the pass moves those deletes onto its new
// files and commits: it is not given up, the table read back holds every row once with its newest values, it
// holds fewer data files, and later upserts of rows the pass moved still replace them.
func TestCompactionRebasesConcurrentDeletes(t *testing.T) {
	t.Parallel() // see TestMain
	for _, tc := range []struct {
		name    string
		version int
		opts    []iceberg.Option
	}{
		{"v3 deletion vectors", 3, nil},
		{"v2 converted position deletes", 2, []iceberg.Option{iceberg.WithDeleteConversionEvery(1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			cat := openCatalog(t)
			ident := table.Identifier{"compact", "rebase"}
			hold, held, letGo := holdFirstPass()
			events := make(compactions, 64)
			opts := append([]iceberg.Option{
				iceberg.WithCreate(seed.Schema, iceberg.FormatVersion(tc.version)), iceberg.WithKeys("id"),
				iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompactionEvery(8), iceberg.WithHooks(events), hold,
			}, tc.opts...)
			w, err := iceberg.NewWriter(ctx, cat, ident, opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close(ctx)
			defer letGo()
			model := seedModel{}
			flush := func(recs ...arrow.RecordBatch) {
				t.Helper()
				for _, rec := range recs {
					model.put(rec)
				}
				fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				if err := w.Flush(fctx); err != nil {
					t.Fatal(err)
				}
			}
			g := seed.New(0, 1)
			for i := 0; i < 8; i++ { // ids 0..399 in eight files: the pass after the eighth commit merges them
				rec := g.Batch(50)
				if err := w.Write(ctx, rec); err != nil {
					t.Fatal(err)
				}
				flush(rec)
				rec.Release()
			}
			select {
			case <-held:
			case <-time.After(time.Minute):
				t.Fatal("no compaction pass after 8 commits")
			}
			// While the pass is held: new rows, and upserts of ids 0..299, all in the files it rewrites.
			upserts := seed.New(0, 99)
			for i := 0; i < 10; i++ {
				rec, up := g.Batch(20), upserts.Batch(30)
				if err := w.Write(ctx, rec); err != nil {
					t.Fatal(err)
				}
				if err := w.Upsert(ctx, up); err != nil {
					t.Fatal(err)
				}
				flush(rec, up)
				rec.Release()
				up.Release()
			}
			_, tasks := liveDataFiles(t, cat, ident)
			if !tabletest.HasPositionDeletes(tasks) {
				t.Fatal("no position delete or deletion vector on the held pass's files: the test tests nothing")
			}
			filesBefore := len(tasks)
			letGo()
			ev := <-events
			if ev.Err != nil || ev.Result.SnapshotID == 0 || ev.Result.RewrittenDataFiles < 8 {
				t.Fatalf("the held pass did not commit: %+v", ev)
			}
			model.check(t, cat, ident)
			_, tasks = liveDataFiles(t, cat, ident)
			if len(tasks) >= filesBefore {
				t.Fatalf("%d live data files after the compaction, %d before", len(tasks), filesBefore)
			}
			// Rows the pass moved: ones whose old copy it deleted in its new files (0..9), and untouched ones
			// (350..359). Each upsert must replace the row, not add a second one.
			for _, first := range []int64{0, 350} {
				up := seed.New(first, 7).Batch(10)
				if err := w.Upsert(ctx, up); err != nil {
					t.Fatal(err)
				}
				flush(up)
				up.Release()
			}
			model.check(t, cat, ident)
		})
	}
}

// TestManifestsRewrittenAfterCompactionPass: on a keyed v2 table, a background small-file compaction that
// commits leaves its merged manifests holding an entry for every file it removed, which each scan decodes; the
// commit after the pass rewrites the data manifests (maintainer.rewriteDue), so the table the reader plans has
// one data manifest per commit since and none listing removed files, and holds every upserted row once with its
// newest value.
func TestManifestsRewrittenAfterCompactionPass(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"compact", "manifests"}
	events := make(compactions, 4)
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(kvSchema, iceberg.IdentifierFields("id"),
		iceberg.FormatVersion(2)), iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompactionEvery(8),
		iceberg.WithHooks(events))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	model := kvModel{}
	v := int64(0)
	upsert := func(ids []int64) {
		t.Helper()
		vs := make([]int64, len(ids))
		for i, id := range ids {
			v++
			vs[i] = v
			model.upsert(id, v)
		}
		rec := kvBatch(ids, vs)
		defer rec.Release()
		must(t, w.Upsert(ctx, rec))
		must(t, w.Flush(ctx))
	}
	// Eight commits of 20 new keys, each also updating a key of every earlier commit (position deletes on
	// their files): the pass after the eighth merges the eight files with their deletes.
	for c := int64(0); c < 8; c++ {
		ids := make([]int64, 0, 20+c)
		for k := int64(0); k < 20; k++ {
			ids = append(ids, c*20+k)
		}
		for e := int64(0); e < c; e++ {
			ids = append(ids, e*20+c)
		}
		upsert(ids)
	}
	select {
	case ev := <-events:
		if ev.Err != nil || ev.Result.SnapshotID == 0 {
			t.Fatalf("background compaction after 8 commits: %+v", ev)
		}
	case <-time.After(time.Minute):
		t.Fatal("no background compaction after 8 commits")
	}
	// The next commit rewrites the manifests after itself; two more add a data and a delete manifest each.
	for c := int64(8); c < 11; c++ {
		upsert([]int64{c*20 + 1, c, 2*c + 1})
	}
	tbl := tabletest.Load(t, cat, ident)
	fs, err := tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mans, err := tbl.CurrentSnapshot().Manifests(fs)
	if err != nil {
		t.Fatal(err)
	}
	data, removed := 0, 0
	for _, m := range mans {
		if m.ManifestContent() == ice.ManifestContentData {
			data++
			removed += int(m.DeletedDataFiles())
		}
	}
	// iceberg-go's manifest rewrite merges data manifests only (delete manifests stay as they are).
	if data > 3 || removed > 0 {
		t.Errorf("%d data manifests listing %d removed files two commits after the rewrite that follows a compaction pass, want at most 3 listing none",
			data, removed)
	}
	compareKV(t, readKV(t, cat, ident), model)
}
