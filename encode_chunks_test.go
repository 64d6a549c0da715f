package iceberg_test

import (
	"runtime"
	"testing"

	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
)

// TestAwaitedKeyedBatchChunks applies 51,000 changes (40,000 keys inserted, 10,000 of them updated, 1,000
// deleted) in one batch, in both modes. Sealed by the Flush that waits for it, the batch is written as one data
// file per encode slot (2 by default), each of at least 16,384 rows; sealed by the flush policy, it is one
// file. Either way the table holds what the model says.
func TestAwaitedKeyedBatchChunks(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("a batch is written in chunks only on 2 or more procs")
	}
	calls := func() [][]kvChange {
		var out [][]kvChange
		call := func(from, to int64, op string, v int64) {
			var chs []kvChange
			for id := from; id < to; id++ {
				chs = append(chs, kvChange{op: op, id: id, v: v, before: -1})
			}
			out = append(out, chs)
		}
		for from := int64(0); from < 40_000; from += 1000 {
			call(from, from+1000, "c", 1)
		}
		for from := int64(0); from < 10_000; from += 1000 {
			call(from, from+1000, "u", 2)
		}
		call(30_000, 31_000, "d", 0)
		return out
	}()
	for _, c := range []applyCase{{iceberg.MergeOnRead, 2}, {iceberg.CopyOnWrite, 2}} {
		for _, policy := range []bool{false, true} {
			name := c.String() + "/flush"
			var opts []iceberg.Option
			if policy {
				name = c.String() + "/policy"
				opts = append(opts, iceberg.WithFlushRows(51_000)) // the last call seals the batch
			}
			t.Run(name, func(t *testing.T) {
				cat, ident := openCatalog(t), table.Identifier{"apply", "chunks"}
				w := openApplyWriter(t, cat, ident, c, kvSchema, opts...)
				model := kvModel{}
				for _, chs := range calls {
					applyChanges(t, w, chs, changeColumns{})
					model.applyChanges(chs, nil)
				}
				flush(t, w)
				compareKV(t, readKV(t, cat, ident), model)
				files := dataFileRows(t, cat, ident)
				want := 2
				if policy {
					want = 1
				}
				if len(files) != want {
					t.Fatalf("%d data files of %v rows, want %d", len(files), files, want)
				}
				for _, n := range files {
					if n < 16_384 {
						t.Fatalf("data files of %v rows: one below 16,384", files)
					}
				}
			})
		}
	}
}

// dataFileRows returns the row count of each data file of the table's current snapshot.
func dataFileRows(t *testing.T, cat icecatalog.Catalog, ident table.Identifier) []int64 {
	t.Helper()
	_, tasks := liveDataFiles(t, cat, ident)
	var rows []int64
	for _, task := range tasks {
		rows = append(rows, task.File.Count())
	}
	return rows
}
