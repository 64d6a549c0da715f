package main

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"

	"github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/catalog"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// committedRows calls done once the commits it hears of hold n rows.
type committedRows struct {
	mu   sync.Mutex
	rows int64
	n    int64
	done func()
}

func (c *committedRows) OnCommitted(ci iceberg.CommitInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rows += ci.Rows; c.rows >= c.n {
		c.done()
	}
}

// TestFakeModeWritesTheSeededRecords runs the command with -fake (an in-process cluster, no Kafka) until the
// table holds the seeded records, then reads the table back: every record once.
func TestFakeModeWritesTheSeededRecords(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const n = 300
	uri := "sqlite://" + filepath.Join(t.TempDir(), "catalog.db")
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	err := run(runCtx, []string{"-fake", "-fake-records", "300", "-catalog", uri, "-table", "demo.orders",
		"-session-timeout", "10s", "-group", "demo"}, &committedRows{n: n, done: stop})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the table never held the seeded records")
	}
	cat, err := catalog.Open(ctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	sc, it := tabletest.Records(t, tabletest.Load(t, cat, table.Identifier{"demo", "orders"}))
	seen := map[int64]int{}
	for rec := range it {
		ids := rec.Column(sc.FieldIndices("id")[0]).(*array.Int64)
		for r := range int(rec.NumRows()) {
			seen[ids.Value(r)]++
		}
	}
	for id := range int64(n) {
		if seen[id] != 1 {
			t.Errorf("record %d is %d times in the table", id, seen[id])
		}
	}
	if len(seen) != n {
		t.Errorf("the table holds %d ids, want %d", len(seen), n)
	}
}
