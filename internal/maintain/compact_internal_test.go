package maintain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"

	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// TestSmallFileTier: a small-file pass merges the lowest size tier (factor 8 from the smallest file under the
// limit) that holds smallFileTierFanIn files; files at or over the limit never count, and no such tier is none.
func TestSmallFileTier(t *testing.T) {
	task := func(i int, size int64) table.FileScanTask {
		b, err := ice.NewDataFileBuilder(*ice.UnpartitionedSpec, ice.EntryContentData, fmt.Sprintf("file:///t/%d", i),
			ice.ParquetFile, nil, nil, nil, 1, size)
		if err != nil {
			t.Fatal(err)
		}
		return table.FileScanTask{File: b.Build()}
	}
	sizes := func(tasks []table.FileScanTask) []int64 {
		var out []int64
		for _, t := range tasks {
			out = append(out, t.File.FileSizeBytes())
		}
		return out
	}
	var tasks []table.FileScanTask
	for i := range 3 {
		tasks = append(tasks, task(i, 10)) // tier 0: too few
	}
	for i := range smallFileTierFanIn {
		tasks = append(tasks, task(100+i, 100)) // tier 1 (80..639): enough
	}
	tasks = append(tasks, task(200, 5000)) // at the limit
	got := sizes(smallFileTier(tasks, 5000))
	if want := slices.Repeat([]int64{100}, smallFileTierFanIn); !slices.Equal(got, want) {
		t.Fatalf("tier %v, want %v", got, want)
	}
	if got := smallFileTier(tasks[:5], 5000); got != nil {
		t.Fatalf("no full tier: got %v", sizes(got))
	}
}

// TestUserPassesRefusedWhenUnusable: Compact and ConvertEqualityDeletes of a writer that takes no calls return
// why, without entering the commit queue.
func TestUserPassesRefusedWhenUnusable(t *testing.T) {
	closed := errors.New("closed")
	m := New(Env{
		Log:        slog.New(slog.DiscardHandler),
		Usable:     func() error { return closed },
		EnterQueue: func() func() { t.Fatal("entered the commit queue"); return nil },
	}, Config{})
	defer m.Stop()
	if _, err := m.Compact(context.Background()); !errors.Is(err, closed) {
		t.Fatalf("Compact: %v, want %v", err, closed)
	}
	if _, err := m.ConvertEqualityDeletes(context.Background()); !errors.Is(err, closed) {
		t.Fatalf("ConvertEqualityDeletes: %v, want %v", err, closed)
	}
}
