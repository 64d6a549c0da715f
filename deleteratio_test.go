package iceberg_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/seed"
)

// TestBackgroundPassRewritesDeletedFiles: on v2 (position delete files) and v3 (deletion vectors), a background
// small-file pass also rewrites a right-sized data file whose rows were 40% upserted away (past
// WithDeleteRewriteRatio's 0.3) and leaves alone one with 10% deleted and one with none. Upserts of rows of
// both files land while the pass is held after writing its files: the pass's commit moves those on the
// rewritten file onto its new file. The table read back holds every row once with its newest values.
func TestBackgroundPassRewritesDeletedFiles(t *testing.T) {
	t.Parallel() // see TestMain
	for _, version := range []int{2, 3} {
		t.Run(map[int]string{2: "v2", 3: "v3"}[version], func(t *testing.T) {
			ctx := context.Background()
			cat := openCatalog(t)
			ident := table.Identifier{"compact", "ratio"}
			hold, held, letGo := holdFirstPass()
			events := make(compactions, 16)
			// 200 seed rows encode to about 20 KB: right-sized for a 64 KB target (small is under 8 KB), so
			// only the delete share can pick a file.
			w, err := iceberg.NewWriter(ctx, cat, ident,
				iceberg.WithCreate(seed.Schema, iceberg.FormatVersion(version)), iceberg.WithKeys("id"),
				iceberg.WithFlushInterval(0), iceberg.WithTargetFileSize(64<<10), iceberg.WithSmallFileCompactionEvery(4),
				iceberg.WithDeleteConversionEvery(0), iceberg.WithDeleteRewriteRatio(0.3), iceberg.WithHooks(events), hold)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close(ctx)
			defer letGo()
			model := seedModel{}
			commit := func(upsert bool, recs ...arrow.RecordBatch) {
				t.Helper()
				for _, rec := range recs {
					if upsert {
						must(t, w.Upsert(ctx, rec))
					} else {
						must(t, w.Write(ctx, rec))
					}
					model.put(rec)
					rec.Release()
				}
				fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				must(t, w.Flush(fctx))
			}
			// newFile commits 200 new rows from id first and returns the path of the one data file it added.
			newFile := func(first int64) string {
				t.Helper()
				_, before := liveDataFiles(t, cat, ident)
				seen := map[string]bool{}
				for _, task := range before {
					seen[task.File.FilePath()] = true
				}
				commit(false, seed.New(first, uint64(first)+1).Batch(200))
				_, tasks := liveDataFiles(t, cat, ident)
				var added []table.FileScanTask
				for _, task := range tasks {
					if !seen[task.File.FilePath()] {
						added = append(added, task)
					}
				}
				if len(added) != 1 || added[0].File.Count() != 200 || added[0].File.FileSizeBytes() < (64<<10)/8 {
					t.Fatalf("commit of ids %d..: want one right-sized file of 200 rows, got %d files", first, len(added))
				}
				return added[0].File.FilePath()
			}
			fileA, fileB := newFile(0), newFile(200) // ids 0..199, 200..399
			// 40% of A (ids 0..79) and 10% of B (ids 200..219) upserted; then new rows: the pass is due after the
			// fourth commit.
			commit(true, seed.New(0, 3).Batch(80), seed.New(200, 4).Batch(20))
			newFile(400)
			select {
			case <-held:
			case <-time.After(time.Minute):
				t.Fatal("no background pass after 4 commits")
			}
			// While the pass is held: upserts of rows of A (the file it rewrites) and of B (one it leaves).
			commit(true, seed.New(80, 6).Batch(10), seed.New(220, 7).Batch(10))
			letGo()
			var ev iceberg.Compaction
			select {
			case ev = <-events:
			case <-time.After(time.Minute):
				t.Fatal("the held pass never ended")
			}
			if ev.Err != nil || ev.Result.SnapshotID == 0 || ev.Result.RewrittenDataFiles != 1 {
				t.Fatalf("the pass, want A rewritten alone: %+v", ev)
			}
			model.check(t, cat, ident)
			_, tasks := liveDataFiles(t, cat, ident)
			live := map[string]bool{}
			for _, task := range tasks {
				live[task.File.FilePath()] = true
			}
			if live[fileA] || !live[fileB] {
				t.Fatalf("after the pass: file A live %v (want false, 45%% deleted), file B live %v (want true, 15%%)",
					live[fileA], live[fileB])
			}
			// A row the pass moved, upserted again, replaces the moved row.
			commit(true, seed.New(100, 8).Batch(5))
			model.check(t, cat, ident)
		})
	}
}

// TestDeleteRewriteRatioOutOfRange: a share outside [0, 1] is refused, naming the option.
func TestDeleteRewriteRatioOutOfRange(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	for _, r := range []float64{-0.1, 1.5} {
		_, err := iceberg.NewWriter(ctx, cat, table.Identifier{"compact", "bad"}, iceberg.WithCreate(seed.Schema),
			iceberg.WithDeleteRewriteRatio(r))
		if !errors.Is(err, iceberg.ErrInvalidOption) || !strings.Contains(err.Error(), "WithDeleteRewriteRatio") {
			t.Fatalf("WithDeleteRewriteRatio(%g): %v, want an option error naming it", r, err)
		}
	}
}
