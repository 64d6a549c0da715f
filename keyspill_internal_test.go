package iceberg

import (
	"testing"
	"time"

	"github.com/icewriter/iceberg/internal/keyindex"
)

// BenchmarkKeyIndexLoadSpilled loads the key index of a format-v2 table of 200,000 int64 keys in 8 data files,
// two files read at once: within the default budget (in memory) and with a 1 MiB budget (about a tenth of
// the keys' memory: spilled while it loads, runs merged by tier), alternately in the same iterations, and
// reports x-memory: the spilled load's time over the in-memory one's (the price of opening a table past the
// budget; lower is better), and the spilled index's memory and disk.
func BenchmarkKeyIndexLoadSpilled(b *testing.B) {
	w := idNameWriter(b, 8, 25_000, WithCreate(idNameSchema, IdentifierFields("id")))
	ctx, tbl, k := b.Context(), w.Table(), w.keys
	load := func(limit int64) *keyindex.Index {
		idx := keyindex.New(keyindex.Config{Columns: k.spec.columns(), Limit: limit, Dir: b.TempDir()}, nil)
		if reason, err := idx.Load(ctx, tbl, k.branch, 2); err != nil || reason != "" {
			b.Fatal(reason, err)
		}
		return idx
	}
	var memTime, spillTime time.Duration
	var held, spilled int64
	for b.Loop() {
		start := time.Now()
		idx := load(DefaultKeyIndexBytes)
		memTime += time.Since(start)
		if idx.Store().SpilledBytes() != 0 {
			b.Fatal("the in-memory load spilled")
		}
		idx.Close()
		start = time.Now()
		idx = load(1 << 20)
		spillTime += time.Since(start)
		if idx.Store().SpilledBytes() == 0 || idx.Bytes() > 1<<20 {
			b.Fatalf("the spilled load holds %d bytes, %d spilled", idx.Bytes(), idx.Store().SpilledBytes())
		}
		held, spilled = idx.Bytes(), idx.Store().SpilledBytes()
		idx.Close()
	}
	b.ReportMetric(spillTime.Seconds()/memTime.Seconds(), "x-memory")
	b.ReportMetric(float64(held), "spilled-index-B")
	b.ReportMetric(float64(spilled), "disk-B")
}
