package iceberg_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
)

// TestConversionDoesNotHoldLiveFlushes: the maintainer's conversion of equality deletes is held after writing
// its delete files, before its commit, while the writer goes on committing: new rows, and on v3 upserts of rows
// in the very data file the pass gives a deletion vector (the writer's vectors replace the one the pass merged
// with, so the pass must plan again rather than commit over them). Each flush returns while the pass is held (a
// pass inside the commit loop would hold them until the flush's timeout). Released, the pass commits: no
// equality delete file is live, and the table reads back as the model.
func TestConversionDoesNotHoldLiveFlushes(t *testing.T) {
	t.Parallel() // see TestMain
	for _, version := range []int{2, 3} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			ctx := context.Background()
			cat := openCatalog(t)
			ident := table.Identifier{"convert", "live"}
			open := func(id string, opts ...iceberg.Option) *iceberg.Writer {
				w, err := iceberg.NewWriter(ctx, cat, ident, append([]iceberg.Option{
					iceberg.WithCreate(kvSchema, iceberg.IdentifierFields("id"), iceberg.FormatVersion(version)),
					iceberg.WithWriterID(id), iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompactionEvery(0)},
					opts...)...)
				if err != nil {
					t.Fatal(err)
				}
				return w
			}
			model := kvModel{}
			commit := func(w *iceberg.Writer, upsert bool, from, n, v int64) {
				t.Helper()
				ids, vs := make([]int64, n), make([]int64, n)
				for i := range ids {
					ids[i], vs[i] = from+int64(i), v
					if upsert {
						model.upsert(ids[i], v)
					} else {
						model.insert(ids[i], v)
					}
				}
				rec := kvBatch(ids, vs)
				defer rec.Release()
				write := w.Write
				if upsert {
					write = w.Upsert
				}
				if err := write(ctx, rec); err != nil {
					t.Fatal(err)
				}
				fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				if err := w.Flush(fctx); err != nil {
					t.Fatalf("flush of ids %d..%d: %v", from, from+n-1, err)
				}
			}
			// A writer without a key index leaves an equality delete on the rows 0..49 of its first data file.
			b := open("b", iceberg.WithKeyIndexBytes(0), iceberg.WithDeleteConversionEvery(0))
			commit(b, false, 0, 200, 1)
			commit(b, true, 0, 50, 2)
			if err := b.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if eq, _, _ := liveDeleteFiles(t, cat, ident); eq == 0 {
				t.Fatal("no equality delete file: the test converts nothing")
			}

			held, release := make(chan struct{}), make(chan struct{})
			var holdOnce, releaseOnce sync.Once
			hold := iceberg.WithHoldRewritesForTest(func() {
				holdOnce.Do(func() {
					close(held)
					<-release
				})
			})
			events := make(conversions, 8)
			a := open("a", iceberg.WithDeleteConversionEvery(2), iceberg.WithHooks(events), hold)
			defer a.Close(ctx)
			letGo := func() { releaseOnce.Do(func() { close(release) }) }
			defer letGo() // before Close: a failed test must not leave the pass held
			commit(a, false, 1000, 20, 3)
			commit(a, false, 1020, 20, 3) // the pass is due after this commit
			select {
			case <-held:
			case <-time.After(time.Minute):
				t.Fatal("no conversion pass after 2 commits")
			}
			for i := range int64(10) {
				commit(a, false, 2000+20*i, 20, 4)
				if version == 3 {
					commit(a, true, 60+10*i, 10, 5) // vectors on the file the pass gives one
				}
			}
			letGo()
			select {
			case ev := <-events:
				if ev.Err != nil || !ev.Automatic || ev.Result.SnapshotID == 0 || ev.Result.EqualityDeleteFiles != 1 {
					t.Fatalf("the conversion pass: %+v", ev)
				}
			case <-time.After(time.Minute):
				t.Fatal("no conversion committed after the pass was released")
			}
			<-iceberg.BackgroundPassDoneForTest(a)
			if eq, _, _ := liveDeleteFiles(t, cat, ident); eq != 0 {
				t.Fatalf("%d equality delete files live after the pass", eq)
			}
			compareKV(t, readKV(t, cat, ident), model)
		})
	}
}
