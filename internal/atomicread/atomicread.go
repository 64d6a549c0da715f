// Package atomicread is the reader of the multi-table commit tests: it loads several tables one right after the
// other, in both orders, again and again, and fails when a table loaded later holds fewer rows than one loaded
// before it, which a commit that landed in one table before another would cause. The tests write the same
// number of rows into every table per step, so equal counts are what an atomic commit leaves.
package atomicread

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
)

// Reader reads the tables on a goroutine of its own until Stop.
type Reader struct {
	reads  atomic.Int64
	signal chan struct{} // a read ended
	stop   chan struct{}
	done   chan error // the reader's failure; closed when it returns
	seen   map[int64]bool
}

// Start starts reading idents from cat.
func Start(ctx context.Context, cat icecatalog.Catalog, idents []table.Identifier) *Reader {
	r := &Reader{signal: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan error, 1),
		seen: map[int64]bool{}}
	go func() {
		defer close(r.done)
		if err := r.loop(ctx, cat, idents); err != nil {
			r.done <- err
		}
	}()
	return r
}

func (r *Reader) loop(ctx context.Context, cat icecatalog.Catalog, idents []table.Identifier) error {
	for i := 0; ; i++ {
		select {
		case <-r.stop:
			return nil
		default:
		}
		order := slices.Clone(idents)
		if i%2 == 1 {
			slices.Reverse(order)
		}
		// Load them one right after the other, then scan what was loaded: the loads are what a reader sees.
		tbls := make([]*table.Table, len(order))
		for j, ident := range order {
			var err error
			if tbls[j], err = cat.LoadTable(ctx, ident); err != nil {
				return err
			}
		}
		last := int64(-1)
		for j, tbl := range tbls {
			n, err := Count(ctx, tbl)
			if err != nil {
				return err
			}
			r.seen[n] = true
			if n < last {
				return fmt.Errorf("table %v loaded after another holds %d rows, the other %d", order[j], n, last)
			}
			last = n
		}
		r.reads.Add(1)
		select {
		case r.signal <- struct{}{}:
		default:
		}
	}
}

// Between waits until a read that started after the call has ended: a read between two commits. A failure of
// the reader fails t.
func (r *Reader) Between(t testing.TB) {
	t.Helper()
	for n := r.reads.Load(); r.reads.Load() < n+2; {
		select {
		case <-r.signal:
		case err, ok := <-r.done:
			if !ok {
				t.Fatal("the reader stopped")
			}
			t.Fatal(err)
		}
	}
}

// Stop ends the reader and fails t if it failed. It returns the reads done and the distinct row counts seen.
func (r *Reader) Stop(t testing.TB) (reads int64, counts int) {
	t.Helper()
	close(r.stop)
	if err := <-r.done; err != nil {
		t.Fatal(err)
	}
	return r.reads.Load(), len(r.seen)
}

// Count scans a loaded table with iceberg-go's scanner and returns its rows.
func Count(ctx context.Context, tbl *table.Table) (int64, error) {
	if tbl.CurrentSnapshot() == nil {
		return 0, nil
	}
	_, it, err := tbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		return 0, err
	}
	var n int64
	for rec, err := range it {
		if err != nil {
			return 0, err
		}
		n += rec.NumRows()
		rec.Release()
	}
	return n, nil
}
