package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
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

// runFake runs the command with -fake (an in-process cluster, no Kafka) and args until the table demo.orders
// holds the n seeded records, then reads it back: per record, what id reads of it.
func runFake(t *testing.T, n int, args []string, id func(rec arrow.RecordBatch, sc *arrow.Schema, r int) int64) map[int64]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	uri := "sqlite://" + filepath.Join(t.TempDir(), "catalog.db")
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	err := run(runCtx, append([]string{"-fake", "-fake-records", fmt.Sprint(n), "-catalog", uri, "-table", "demo.orders",
		"-session-timeout", "10s", "-group", "demo"}, args...), &committedRows{n: int64(n), done: stop})
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
		for r := range int(rec.NumRows()) {
			seen[id(rec, sc, r)]++
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
	return seen
}

// TestFakeModeWritesTheSeededRecords: -fake's records into the JSON decoder's table, every record once.
func TestFakeModeWritesTheSeededRecords(t *testing.T) {
	runFake(t, 300, nil, func(rec arrow.RecordBatch, sc *arrow.Schema, r int) int64 {
		return rec.Column(sc.FieldIndices("id")[0]).(*array.Int64).Value(r)
	})
}

// TestFakeModeVariantDecoder: -decoder variant puts each whole record into the variant column of a v3 table;
// each reads back as its JSON object.
func TestFakeModeVariantDecoder(t *testing.T) {
	runFake(t, 200, []string{"-decoder", "variant"}, func(rec arrow.RecordBatch, sc *arrow.Schema, r int) int64 {
		v := tabletest.Variant(t, rec.Column(sc.FieldIndices("value")[0]), r).(map[string]any)
		var id int64
		fmt.Sscanf(v["id"].(string), "number %d", &id)
		if v["payload"] != fmt.Sprintf("record %d", id) || len(v) != 2 {
			t.Errorf("record %d reads %v", id, v)
		}
		return id
	})
}
