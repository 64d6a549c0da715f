package iceberg_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/seed"
)

// BenchmarkWriterSmallCalls writes the seed events through Write calls of 1, 10 and 1,000 rows (Close
// included), as sources that deliver one record at a time do. Goal (issue 13): 1-row calls at least 250,000
// rows/s; 10-row calls at least half the 1,000-row rate.
func BenchmarkWriterSmallCalls(b *testing.B) {
	const rows = 50_000
	for _, per := range []int{1, 10, 1000} {
		b.Run(fmt.Sprintf("rows=%d", per), func(b *testing.B) {
			ctx := context.Background()
			g := seed.New(0, 7)
			big := g.Batch(rows)
			defer big.Release()
			cat := openCatalog(b)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				w, err := iceberg.NewWriter(ctx, cat, table.Identifier{"bench", fmt.Sprintf("s%d", i)}, iceberg.WithCreate(seed.Schema))
				if err != nil {
					b.Fatal(err)
				}
				for off := int64(0); off < rows; off += int64(per) {
					r := big.NewSlice(off, off+int64(per))
					if err := w.Write(ctx, r); err != nil {
						b.Fatal(err)
					}
					r.Release()
				}
				if err := w.Close(ctx); err != nil {
					b.Fatal(err)
				}
			}
			reportRows(b, rows)
		})
	}
}
