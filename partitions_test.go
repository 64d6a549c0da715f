package iceberg_test

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/seed"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// A table partitioned by identity on a high-cardinality column, written under a small memory limit: two batches
// of 300 rows over about 130 of 150 partitions each, in Writes of 100 rows, each batch in chunks of 50 partitions and,
// its files' metadata far over the share of the 256 KiB the limit leaves for rows that one commit may take, cut
// into commits of a few partitions each. Every row reads back as written, each data file holds the rows of one
// partition (its partition value is its user_id's lower and upper bound), a batch writes one file per partition
// it touches, and the fan-out is reported once, naming the partitioning and the count.
func TestHighCardinalityPartitions(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"db", "fanout"}
	logs := &logRecords{}
	const batchRows, batches, users = 300, 2, 150
	w, err := iceberg.NewWriter(ctx, cat, ident,
		iceberg.WithCreate(seed.Schema, iceberg.PartitionBy("identity(user_id)")),
		iceberg.WithMemoryLimit(1<<20), iceberg.WithFlushRows(batchRows), iceberg.WithFlushInterval(0),
		iceberg.WithLogger(slog.New(logs)), iceberg.WithFanoutForTest(50, 100),
		// Each batch is cut into commits of a few partitions' files: compaction would merge their files.
		iceberg.WithSmallFileCompactionEvery(0))
	if err != nil {
		t.Fatal(err)
	}
	g := seed.New(0, 3)
	rng := rand.New(rand.NewPCG(3, 4))
	want := map[int64]map[string]any{}
	wantFiles := 0
	for range batches {
		inBatch := map[int64]bool{}
		for range batchRows / 100 {
			rec := g.Batch(100)
			userIDs := rec.Column(1).(*array.Int64).Int64Values()
			for r := range userIDs {
				userIDs[r] = rng.Int64N(users)
				inBatch[userIDs[r]] = true
				want[rec.Column(0).(*array.Int64).Value(r)] = rowOf(rec, r)
			}
			if err := w.Write(ctx, rec); err != nil {
				t.Fatal(err)
			}
			rec.Release()
		}
		wantFiles += len(inBatch)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	seedModel(want).check(t, cat, ident)
	tbl := tabletest.Load(t, cat, ident)
	userField := fieldOf(t, tbl.Schema(), "user_id").ID
	spec := tbl.Spec()
	partField := spec.Field(0).FieldID
	tasks := tabletest.LiveDataFiles(t, tbl)
	if len(tasks) != wantFiles {
		t.Errorf("%d data files, want one per partition per batch: %d", len(tasks), wantFiles)
	}
	for _, task := range tasks {
		f := task.File
		part, ok := f.Partition()[partField].(int64)
		lo, hi := f.LowerBoundValues()[userField], f.UpperBoundValues()[userField]
		if !ok || len(lo) != 8 || string(lo) != string(hi) || int64(leUint64(lo)) != part {
			t.Fatalf("%s: partition %v, user_id bounds %x..%x: not the file's one user_id", f.FilePath(), f.Partition(), lo, hi)
		}
	}
	var warned []slog.Record
	logs.mu.Lock()
	for _, r := range logs.recs {
		if r.Level == slog.LevelWarn && strings.Contains(r.Message, "fans out") {
			warned = append(warned, r)
		}
	}
	logs.mu.Unlock()
	if len(warned) != 1 {
		t.Fatalf("%d fan-out warnings, want 1", len(warned))
	}
	attrs := map[string]string{}
	warned[0].Attrs(func(a slog.Attr) bool {
		attrs[a.Key] = a.Value.String()
		return true
	})
	if attrs["partition_by"] != "identity(user_id)" || attrs["partitions"] == "" || attrs["rows"] != "300" {
		t.Fatalf("fan-out warning attributes %v", attrs)
	}
}

// rowOf is row r of rec as readRows returns it.
func rowOf(rec arrow.RecordBatch, r int) map[string]any {
	row := map[string]any{}
	for c, f := range rec.Schema().Fields() {
		row[f.Name] = cellValue(rec.Column(c), r)
	}
	return row
}

func leUint64(b []byte) uint64 {
	var v uint64
	for i := 7; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}
