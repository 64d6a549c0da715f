package iceberg

import (
	"context"
	"testing"
)

// reviewCheckBloomSizes fails when a data file's key-column bloom filter is more than twice the size its own
// rows need: the README promises a filter "sized for the file's rows". Files in skip are not checked; it
// returns how many were.
func reviewCheckBloomSizes(t *testing.T, w *Writer, wantFiles func(n int) bool, skip map[string]bool) int {
	t.Helper()
	tasks := dataFiles(t, w.Table())
	if !wantFiles(len(tasks)) {
		t.Fatalf("setup: %d data files", len(tasks))
	}
	checked := 0
	for _, task := range tasks {
		if skip[task.File.FilePath()] {
			continue
		}
		checked++
		bf := columnBloom(t, w.Table(), task.File.FilePath(), "id")
		if bf == nil {
			t.Fatalf("%s: no bloom filter on the key column", task.File.FilePath())
		}
		if limit := 2 * bloomBytes(task.File.Count()); bf.Size() > limit {
			t.Fatalf("file of %d rows and %d B has a %d B bloom filter on its key column; its rows need %d B",
				task.File.Count(), task.File.FileSizeBytes(), bf.Size(), bloomBytes(task.File.Count()))
		}
	}
	return checked
}

// TestReviewBloomSizedForPartitionFile: a batch spread over 16 bucket partitions writes 16 files of about 1,000
// rows each; every file's filter fits its rows (sized from the largest partition's share of a sample of the
// batch), the first batch's as well as the second's.
func TestReviewBloomSizedForPartitionFile(t *testing.T) {
	ctx := context.Background()
	w := bloomWriter(t, 1, 16_000, WithCreate(bloomSchema, IdentifierFields("id"), PartitionBy("bucket(16, id)")))
	if err := w.Write(ctx, bloomRows(16_000, 16_000)); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	checked := reviewCheckBloomSizes(t, w, func(n int) bool { return n == 32 }, nil)
	if checked != 32 {
		t.Fatalf("the second batch wrote %d files, want 16", checked)
	}
}

// TestReviewBloomSizedForCompactedFile: compacting 20 files of 100 rows writes one file of 2,000 rows, but
// compactOnce sizes its filter for a full row group (131,072 rows: 256 KiB), many times the file's data.
func TestReviewBloomSizedForCompactedFile(t *testing.T) {
	w := bloomWriter(t, 20, 100, WithCreate(bloomSchema, IdentifierFields("id")))
	if _, err := w.Compact(context.Background()); err != nil {
		t.Fatal(err)
	}
	reviewCheckBloomSizes(t, w, func(n int) bool { return n == 1 }, nil)
}
