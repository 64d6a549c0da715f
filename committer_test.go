package iceberg_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/seed"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// forwarder is a Committer that sends each run, encoded, to a coordinator that commits for several writers.
type forwarder struct {
	coord iceberg.Committer
	mu    *sync.Mutex // the coordinator commits one run at a time
	runs  *int
}

func (f forwarder) Commit(ctx context.Context, run *iceberg.Run) (*iceberg.CommitResult, error) {
	wire, err := run.MarshalBinary()
	if err != nil {
		return nil, err
	}
	var got iceberg.Run
	if err := got.UnmarshalBinary(wire); err != nil {
		return nil, err
	}
	if len(got.Segments) != len(run.Segments) || got.LastSeq != run.LastSeq || got.Token != run.Token {
		return nil, fmt.Errorf("run changed on the wire: %+v", got)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	*f.runs++
	return f.coord.Commit(ctx, &got)
}

// TestCatalogCommitterDefaultTimeout: NewCatalogCommitter with no timeout gets the default, so a run built on a
// table the writer's own small-file compaction moved since reloads and commits (with no time to retry, the
// writer stopped at its first run after a compaction with ErrCommitStateUnknown).
func TestCatalogCommitterDefaultTimeout(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"coord", "compacted"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema),
		iceberg.WithCommitter(iceberg.NewCatalogCommitter(cat, 0)), iceberg.WithSmallFileCompactionEvery(4))
	if err != nil {
		t.Fatal(err)
	}
	const commits = 12
	commitSeed(t, w, seed.New(0, 1), commits, 10)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	tbl := tabletest.Load(t, cat, ident)
	compactions := 0
	for _, s := range tbl.Metadata().Snapshots() {
		if s.Summary != nil && s.Summary.Operation == table.OpReplace {
			compactions++
		}
	}
	if compactions == 0 {
		t.Fatal("no small-file compaction committed between the runs")
	}
	counts, _ := readRows(t, cat, ident)
	assertIDs(t, counts, 0, commits*10)
}

// TestCoordinatorCommitter: writers hand their runs, serialized, to one coordinator committing through the
// catalog; the table holds every row once, partition values included.
func TestCoordinatorCommitter(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"coord", "events"}
	createTable(t, ctx, cat, ident, seed.Schema, iceberg.PartitionBy("bucket(4, user_id)"))
	coord := iceberg.NewCatalogCommitter(cat, time.Minute)
	var mu sync.Mutex
	runs := 0
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithWriterID(fmt.Sprintf("proc-%d", i)),
				iceberg.WithCommitter(forwarder{coord: coord, mu: &mu, runs: &runs}), iceberg.WithFlushRows(500))
			if err != nil {
				t.Error(err)
				return
			}
			g := seed.New(int64(i*3000), uint64(i))
			for n := 0; n < 3000; n += 250 {
				rec := g.Batch(250)
				if err := w.Write(ctx, rec); err != nil {
					t.Error(err)
				}
				rec.Release()
			}
			if err := w.Close(ctx); err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	counts, _ := readRows(t, cat, ident)
	assertIDs(t, counts, 0, 9000)
	if runs == 0 {
		t.Fatal("no run went through the coordinator")
	}
}

// TestCoordinatorConcurrentCommits: one NewCatalogCommitter commits, at the same time, the runs of writers on
// three tables and of two writers sharing a table, in every mode (copy-on-write on v3 carries row ids, the
// attempt state that concurrent calls must not share). Each writer's own loop keeps its runs in sequence
// order; the coordinator serializes nothing.
func TestCoordinatorConcurrentCommits(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := openCatalog(t)
	coord := iceberg.NewCatalogCommitter(cat, time.Minute)
	type job struct {
		table string
		mode  iceberg.Mode
		id    string
	}
	jobs := []job{
		{"cow", iceberg.CopyOnWrite, "a"}, {"mor", iceberg.MergeOnRead, "b"},
		{"shared", iceberg.CopyOnWrite, "c"}, {"shared", iceberg.CopyOnWrite, "d"},
	}
	for _, name := range []string{"cow", "mor", "shared"} {
		w, err := iceberg.NewWriter(ctx, cat, table.Identifier{"coord", name},
			iceberg.WithCreate(kvSchema, iceberg.IdentifierFields("id"), iceberg.FormatVersion(3)))
		if err != nil {
			t.Fatal(err)
		}
		_ = w.Close(ctx)
	}
	models := map[string]kvModel{"cow": {}, "mor": {}, "shared": {}}
	var modelMu sync.Mutex
	var wg sync.WaitGroup
	for j, jb := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runs := 0
			w, err := iceberg.NewWriter(ctx, cat, table.Identifier{"coord", jb.table}, iceberg.WithWriterID(jb.id),
				iceberg.WithMode(jb.mode), iceberg.WithFlushRows(20),
				iceberg.WithCommitter(forwarder{coord: coord, mu: &sync.Mutex{}, runs: &runs}))
			if err != nil {
				t.Error(err)
				return
			}
			// Keys of one writer are its own (j*1000 + k), so the model of a shared table is the union.
			for round := 0; round < 15; round++ {
				ids := []int64{int64(j*1000 + round%7), int64(j*1000 + 100 + round)}
				vs := []int64{int64(round), int64(round)}
				rec := kvBatch(ids, vs)
				err := w.Upsert(ctx, rec)
				rec.Release()
				if err != nil {
					t.Error(err)
					return
				}
				modelMu.Lock()
				for i, id := range ids {
					models[jb.table].upsert(id, vs[i])
				}
				modelMu.Unlock()
				if round%5 == 4 {
					if err := w.Flush(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			}
			if err := w.Close(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for name, model := range models {
		compareKV(t, readKV(t, cat, table.Identifier{"coord", name}), model)
	}
}
