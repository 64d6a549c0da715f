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
