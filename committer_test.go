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

// TestCoordinatorCommitter: writers hand their runs, serialized, to one coordinator committing through the
// catalog; the table holds every row once, partition values included.
func TestCoordinatorCommitter(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"coord", "events"}
	setup, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema, iceberg.PartitionBy("bucket(4, user_id)")))
	if err != nil {
		t.Fatal(err)
	}
	_ = setup.Close(ctx)
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

// TestCoordinatorKeyed: upserts and deletes in both modes go through the serialized run (equality delete files
// as a delete manifest, copy-on-write keys as Arrow IPC) and land as the model says.
func TestCoordinatorKeyed(t *testing.T) {
	for _, mode := range []iceberg.Mode{iceberg.MergeOnRead, iceberg.CopyOnWrite} {
		t.Run(mode.String(), func(t *testing.T) {
			ctx := context.Background()
			cat := openCatalog(t)
			ident := table.Identifier{"coord", "kv"}
			var mu sync.Mutex
			runs := 0
			w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(kvSchema, iceberg.IdentifierFields("id")),
				iceberg.WithMode(mode), iceberg.WithCommitter(forwarder{coord: iceberg.NewCatalogCommitter(cat, time.Minute), mu: &mu, runs: &runs}))
			if err != nil {
				t.Fatal(err)
			}
			model := kvModel{}
			ids := []int64{1, 2, 3, 4}
			for _, id := range ids {
				model.insert(id, id)
			}
			if err := w.Write(ctx, kvBatch(ids, ids)); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			model.upsert(2, 20)
			model.del(3)
			if err := w.Upsert(ctx, kvBatch([]int64{2}, []int64{20})); err != nil {
				t.Fatal(err)
			}
			if err := w.Delete(ctx, keyBatch([]int64{3})); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
			compareKV(t, readKV(t, cat, ident), model)
		})
	}
}
