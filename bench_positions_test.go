package iceberg_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/seed"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// BenchmarkPositionsMetadataGrowth records 10,000 source positions across 100 commits (100 new partitions per
// commit, 10 rows each) and compares how much the table's metadata JSON grows with what 100 commits of the same
// rows without positions add, in the same run (goal: less than 2x). It also reports the side file's size at
// the end (the whole merged map: it scales with the partitions, the metadata must not). Snapshot expiry and
// compaction are off, so every commit stays in the metadata.
func BenchmarkPositionsMetadataGrowth(b *testing.B) {
	const commits, perCommit = 100, 100
	for i := 0; i < b.N; i++ {
		without, _ := positionsMetadataGrowth(b, commits, 0)
		with, side := positionsMetadataGrowth(b, commits, perCommit)
		b.ReportMetric(float64(without)/commits, "metadata-B/commit-without")
		b.ReportMetric(float64(with)/commits, "metadata-B/commit-with")
		b.ReportMetric(float64(with)/float64(without), "growth-with/without")
		b.ReportMetric(float64(side)/1024, "side-file-KiB")
	}
}

// positionsMetadataGrowth makes commits commits of 10 seed rows, each recording perCommit new partitions'
// positions, and returns by how many bytes the metadata file grew and the size of the last side file.
func positionsMetadataGrowth(b *testing.B, commits, perCommit int) (growth, side int64) {
	ctx := context.Background()
	cat := openCatalog(b)
	ident := table.Identifier{"bench", "positions"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema), iceberg.WithWriterID("connector-0"),
		iceberg.WithFlushInterval(0), iceberg.WithKeepSnapshots(0), iceberg.WithSmallFileCompactionEvery(0))
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close(ctx)
	start := metadataSize(b, cat, ident)
	g := seed.New(0, 1)
	for c := 0; c < commits; c++ {
		rec := g.Batch(10)
		err := w.Write(ctx, rec)
		rec.Release()
		if err != nil {
			b.Fatal(err)
		}
		if perCommit > 0 {
			pos := make(map[string]string, perCommit)
			for p := 0; p < perCommit; p++ {
				pos[fmt.Sprintf("orders-topic/%d", c*perCommit+p)] = strconv.Itoa(1_000_000 + c*1000 + p)
			}
			if err := w.CheckpointPositions(context.Background(), pos); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Flush(ctx); err != nil {
			b.Fatal(err)
		}
	}
	growth = metadataSize(b, cat, ident) - start
	if perCommit > 0 {
		got, err := iceberg.Positions(ctx, cat, ident)
		if err != nil || len(got) != commits*perCommit {
			b.Fatalf("%d positions read back (%v), want %d", len(got), err, commits*perCommit)
		}
		tbl := tabletest.Load(b, cat, ident)
		st, err := os.Stat(localDir(b, tbl.CurrentSnapshot().Summary.Properties["icewriter.positions"]))
		if err != nil {
			b.Fatal(err)
		}
		side = st.Size()
	}
	return growth, side
}

// metadataSize is the size of the table's current metadata file (local tables).
func metadataSize(b *testing.B, cat interface {
	LoadTable(context.Context, table.Identifier) (*table.Table, error)
}, ident table.Identifier) int64 {
	tbl := tabletest.Load(b, cat, ident)
	st, err := os.Stat(localDir(b, tbl.MetadataLocation()))
	if err != nil {
		b.Fatal(err)
	}
	return st.Size()
}
