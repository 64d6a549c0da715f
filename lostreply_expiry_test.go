package iceberg_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
)

// elsewhere is another writer at work while the first one cannot hear back from the catalog: it commits rows
// of its own (ids from 1,000,000, values 0, recorded in the model) and expires the table down to its newest
// snapshots. The expiry goes through iceberg-go directly, as any other tool would.
type elsewhere struct {
	cat   icecatalog.Catalog
	w     *iceberg.Writer
	ident table.Identifier
	model kvModel
	next  int64
}

func newElsewhere(t *testing.T, cat icecatalog.Catalog, ident table.Identifier, model kvModel) *elsewhere {
	t.Helper()
	w, err := iceberg.NewWriter(context.Background(), cat, ident, iceberg.WithWriterID("b"), iceberg.WithFlushInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	return &elsewhere{cat: cat, w: w, ident: ident, model: model, next: 1_000_000}
}

// expire commits one row and expires down to keep snapshots, deleting the expired snapshots' files.
func (e *elsewhere) expire(t *testing.T, keep int) { e.commitAndExpire(t, keep, true) }

// commitAndExpire commits one row and expires down to keep snapshots, deleting the expired snapshots' files
// or (deleteFiles false) keeping them, as an expiry that leaves file cleanup to a later orphan sweep does.
func (e *elsewhere) commitAndExpire(t *testing.T, keep int, deleteFiles bool) {
	ctx := context.Background()
	id := e.next
	e.next++
	rec := kvBatch([]int64{id}, []int64{0})
	defer rec.Release()
	if err := e.w.Write(ctx, rec); err != nil {
		t.Error(err)
		return
	}
	if err := e.w.Flush(ctx); err != nil {
		t.Error(err)
		return
	}
	e.model.insert(id, 0)
	tbl, err := e.cat.LoadTable(ctx, e.ident)
	if err != nil {
		t.Error(err)
		return
	}
	tx := tbl.NewTransaction()
	if err := tx.ExpireSnapshots(table.WithRetainLast(keep), table.WithOlderThan(0), table.WithPostCommit(deleteFiles)); err != nil {
		t.Error(err)
		return
	}
	if _, err := tx.Commit(ctx); err != nil {
		t.Error(err)
	}
}

// TestLostReplyWhileAnotherWriterExpires: a writer's commit applies, its reply is lost, and before the writer
// can look, another writer commits and expires the table down to 2 snapshots, taking the run's snapshot and
// its base with it. The retry must recognise the run as applied (the writer's commit record survives expiry):
// no row twice, no live file deleted, and the table reads back as the model says, in every mode.
func TestLostReplyWhileAnotherWriterExpires(t *testing.T) {
	t.Parallel() // see TestMain
	cases := []struct {
		name    string
		mode    iceberg.Mode
		keyed   bool
		version int
		deletes bool // rounds that only delete keys (copy-on-write: a commit that removes files and adds none)
	}{
		{"append/v2", iceberg.MergeOnRead, false, 2, false},
		{"merge-on-read/v2", iceberg.MergeOnRead, true, 2, false},
		{"merge-on-read/v3", iceberg.MergeOnRead, true, 3, false},
		{"copy-on-write/v2", iceberg.CopyOnWrite, true, 2, false},
		{"copy-on-write/v3", iceberg.CopyOnWrite, true, 3, false},
		{"copy-on-write-delete-only/v2", iceberg.CopyOnWrite, true, 2, true},
	}
	// 18 lost replies in all: each round is the whole scenario (lose the reply, expire the run and its base,
	// retry), so more rounds repeat it with other sizes, and the seed is new every run.
	const rounds = 3
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			base := openCatalog(t)
			cat := &slowCatalog{Catalog: base}
			ident := table.Identifier{"lost", "expired"}
			create := []iceberg.CreateOption{iceberg.FormatVersion(tc.version)}
			if tc.keyed {
				create = append(create, iceberg.IdentifierFields("id"))
			}
			w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(kvSchema, create...),
				iceberg.WithWriterID("a"), iceberg.WithMode(tc.mode), iceberg.WithFlushInterval(0), iceberg.WithQuickRetriesForTest())
			if err != nil {
				t.Fatal(err)
			}
			model := kvModel{}
			other := newElsewhere(t, base, ident, model)
			cat.afterLost = func() {
				for i := 0; i < 3; i++ { // the run's snapshot and its base fall out of the newest 2
					other.expire(t, 2)
				}
			}

			rng := rand.New(rand.NewPCG(runSeed(t), uint64(tc.version)))
			if tc.deletes {
				ids := make([]int64, 200)
				vs := make([]int64, 200)
				for i := range ids {
					ids[i], vs[i] = int64(i), 1
					model.upsert(int64(i), 1)
				}
				rec := kvBatch(ids, vs)
				if err := w.Upsert(ctx, rec); err != nil {
					t.Fatal(err)
				}
				rec.Release()
				if err := w.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
			nextID := int64(0)
			for round := 0; round < rounds; round++ {
				cat.mu.Lock()
				cat.loseReplies = 1
				cat.mu.Unlock()
				n := 1 + rng.IntN(20)
				ids := make([]int64, n)
				vs := make([]int64, n)
				for i := range ids {
					if tc.keyed {
						ids[i] = rng.Int64N(60) // keys repeat across rounds: upserts replace rows
						if tc.deletes {
							ids[i] = rng.Int64N(200)
						}
					} else {
						ids[i] = nextID
						nextID++
					}
					vs[i] = int64(round + 2)
				}
				rec := kvBatch(ids, vs)
				switch {
				case tc.deletes:
					keys := keyBatch(ids)
					err = w.Delete(ctx, keys)
					keys.Release()
					for _, id := range ids {
						model.del(id)
					}
				case tc.keyed:
					err = w.Upsert(ctx, rec)
					for i, id := range ids {
						model.upsert(id, vs[i])
					}
				default:
					err = w.Write(ctx, rec)
					for i, id := range ids {
						model.insert(id, vs[i])
					}
				}
				rec.Release()
				if err != nil {
					t.Fatal(err)
				}
				if tc.keyed {
					// Plain inserts next to the keyed changes: applied twice, they would show as duplicates.
					id := 10_000 + int64(round)
					ins := kvBatch([]int64{id}, []int64{1})
					err = w.Write(ctx, ins)
					ins.Release()
					if err != nil {
						t.Fatal(err)
					}
					model.insert(id, 1)
				}
				if err := w.Flush(ctx); err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				cat.mu.Lock()
				left := cat.loseReplies
				cat.mu.Unlock()
				if left != 0 {
					t.Fatalf("round %d: the commit's reply was not lost (the injection did not happen)", round)
				}
			}
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
			compareKV(t, readKV(t, base, ident), model)
			if st := w.Stats(); st.Retries < rounds {
				t.Fatalf("%d retries over %d lost replies", st.Retries, rounds)
			}
		})
	}
}

// TestLostReplyExpiredRandomID: a writer without WithWriterID keeps no commit record, so when another writer
// expired everything since the lost attempt's base the outcome cannot be established: the writer stops with
// ErrCommitStateUnknown instead of committing the run again, and the table holds the run once.
func TestLostReplyExpiredRandomID(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	base := openCatalog(t)
	cat := &slowCatalog{Catalog: base}
	ident := table.Identifier{"lost", "random"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(kvSchema), iceberg.WithFlushInterval(0),
		iceberg.WithQuickRetriesForTest())
	if err != nil {
		t.Fatal(err)
	}
	model := kvModel{}
	other := newElsewhere(t, base, ident, model)
	cat.afterLost = func() {
		for i := 0; i < 3; i++ {
			other.expire(t, 2)
		}
	}
	rec := kvBatch([]int64{1, 2, 3}, []int64{7, 7, 7})
	defer rec.Release()
	if err := w.Write(ctx, rec); err != nil {
		t.Fatal(err)
	}
	cat.mu.Lock()
	cat.loseReplies = 1
	cat.mu.Unlock()
	err = w.Flush(ctx)
	if !errors.Is(err, iceberg.ErrCommitStateUnknown) || !errors.Is(err, iceberg.ErrWriterFailed) {
		t.Fatalf("Flush: got %v, want ErrWriterFailed wrapping ErrCommitStateUnknown", err)
	}
	_ = w.Close(ctx)
	for _, id := range []int64{1, 2, 3} {
		model.insert(id, 7) // the lost attempt applied, once
	}
	compareKV(t, readKV(t, base, ident), model)
}

// TestCopyOnWriteBusyExpirer: copy-on-write next to a writer that commits and expires down to 2 snapshots
// every time the first one loads the table, so each plan reads manifest lists the expiry just deleted, more
// times in a row than a plan that fails on one table may be retried. A failed plan on a table that moved since
// is a fresh try: the writer must re-plan until the other writer pauses, and lose nothing.
func TestCopyOnWriteBusyExpirer(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	base := openCatalog(t)
	cat := &slowCatalog{Catalog: base}
	ident := table.Identifier{"cow", "busy"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(kvSchema, iceberg.IdentifierFields("id")),
		iceberg.WithWriterID("a"), iceberg.WithMode(iceberg.CopyOnWrite), iceberg.WithFlushInterval(0),
		iceberg.WithQuickRetriesForTest())
	if err != nil {
		t.Fatal(err)
	}
	model := kvModel{}
	other := newElsewhere(t, base, ident, model)
	busy := func() {
		for i := 0; i < 3; i++ { // the loaded head falls out of the newest 2
			other.expire(t, 2)
		}
	}
	cat.afterLoad = busy
	for round := 0; round < 2; round++ {
		ids := []int64{int64(round % 4), int64(round%4 + 4), int64(100 + round)}
		vs := []int64{int64(round), int64(round), int64(round)}
		rec := kvBatch(ids, vs)
		if err := w.Upsert(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		for i, id := range ids {
			model.upsert(id, vs[i])
		}
		busy() // the writer's own view of the table is stale before its first attempt too
		cat.mu.Lock()
		cat.loadHooks = 6
		cat.mu.Unlock()
		if err := w.Flush(ctx); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	compareKV(t, readKV(t, base, ident), model)
}

// TestRandomIDNextToExpiringWriter: a writer without WithWriterID commits next to another writer that commits
// and expires down to 2 snapshots (keeping the files, so that plans still build on the stale table) between
// every two of its commits, so the table the writer last saw is always expired. No reply is lost: every Flush
// must succeed, and the rows read back once.
func TestRandomIDNextToExpiringWriter(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"expiry", "random"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(kvSchema), iceberg.WithFlushInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	model := kvModel{}
	other := newElsewhere(t, cat, ident, model)
	for round := int64(0); round < 3; round++ {
		rec := kvBatch([]int64{round}, []int64{7})
		if err := w.Write(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		model.insert(round, 7)
		if err := w.Flush(ctx); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for i := 0; i < 3; i++ {
			other.commitAndExpire(t, 2, false)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	compareKV(t, readKV(t, cat, ident), model)
}

// TestLostReplyThenTakeover: a writer's commit applies and its reply is lost; before it looks, a newer process
// with the same writer ID takes over and commits. The commit record then speaks of the newer process's runs,
// and the marker still shows the run applied: Flush reports it committed (the Committer contract: an error
// means not committed), and the old writer's next commit is fenced.
func TestLostReplyThenTakeover(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	base := openCatalog(t)
	cat := &slowCatalog{Catalog: base}
	ident := table.Identifier{"lost", "takeover"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(kvSchema), iceberg.WithWriterID("a"),
		iceberg.WithFlushInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	model := kvModel{}
	var newer *iceberg.Writer
	cat.afterLost = func() {
		var err error
		if newer, err = iceberg.NewWriter(ctx, base, ident, iceberg.WithWriterID("a"), iceberg.WithFlushInterval(0)); err != nil {
			t.Error(err)
			return
		}
		rec := kvBatch([]int64{100}, []int64{1})
		defer rec.Release()
		if err := newer.Write(ctx, rec); err != nil {
			t.Error(err)
		}
		if err := newer.Flush(ctx); err != nil {
			t.Error(err)
		}
		model.insert(100, 1)
	}
	rec := kvBatch([]int64{1, 2, 3}, []int64{7, 7, 7})
	defer rec.Release()
	if err := w.Write(ctx, rec); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{1, 2, 3} {
		model.insert(id, 7)
	}
	cat.mu.Lock()
	cat.loseReplies = 1
	cat.mu.Unlock()
	if err := w.Flush(ctx); err != nil {
		t.Fatalf("Flush of a run that applied before the takeover: %v", err)
	}
	if newer == nil {
		t.Fatal("the takeover did not happen")
	}
	defer newer.Close(ctx)
	next := kvBatch([]int64{4}, []int64{7})
	defer next.Release()
	if err := w.Write(ctx, next); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); !errors.Is(err, iceberg.ErrFenced) {
		t.Fatalf("the old writer's next commit: %v, want ErrFenced", err)
	}
	compareKV(t, readKV(t, base, ident), model)
}
