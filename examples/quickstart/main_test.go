package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/catalog"
	"github.com/icewriter/iceberg/internal/seed"
)

// TestQuickstartReplacesItsTable: a run removes the per-run tables earlier versions left, a second run replaces
// the first one's table and its files, and the progress line reads the writer's committed rows.
func TestQuickstartReplacesItsTable(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cat, err := catalog.Open(ctx, "sqlite://"+filepath.Join(dir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	old := table.Identifier{"quickstart", "events_1700000000"} // what an earlier version left
	w, err := iceberg.NewWriter(ctx, cat, old, iceberg.WithCreate(seed.Schema))
	if err != nil {
		t.Fatal(err)
	}
	rec := seed.New(0, 1).Batch(10)
	err = w.Write(ctx, rec)
	rec.Release()
	if err == nil {
		err = w.Close(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	oldTbl, err := cat.LoadTable(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	_ = cat.(icecatalog.Closer).Close()

	cfg := config{dir: dir, rows: 20_000, batch: 1000, interval: 10 * time.Millisecond, progressEvery: time.Millisecond}
	var out1, status1, out2, status2 bytes.Buffer
	if err := run(ctx, cfg, &out1, &status1); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out1.String(), "removed the table of an earlier run") {
		t.Errorf("first run:\n%s", out1.String())
	}
	if _, err := os.Stat(strings.TrimPrefix(oldTbl.Location(), "file://")); !os.IsNotExist(err) {
		t.Errorf("the earlier version's table folder is still there: %v", err)
	}
	first := metadataOf(t, out1.String())
	if err := run(ctx, cfg, &out2, &status2); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out2.String(), "replacing the table of the previous run") ||
		!strings.Contains(out2.String(), "read back 20000 rows") {
		t.Errorf("second run:\n%s", out2.String())
	}
	if _, err := os.Stat(first); !os.IsNotExist(err) {
		t.Errorf("the first run's metadata %s is still there: %v", first, err)
	}
	if !strings.Contains(status2.String(), "100%  20000 rows committed in ") {
		t.Errorf("progress:\n%s", status2.String())
	}
}

// metadataOf returns the metadata file a run's output names.
func metadataOf(t *testing.T, out string) string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if f, ok := strings.CutPrefix(strings.TrimSpace(line), "metadata   "); ok {
			return f
		}
	}
	t.Fatalf("no metadata file in:\n%s", out)
	return ""
}
