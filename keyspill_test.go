package iceberg_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
)

// TestKeyIndexSpillsPastBudget: a merge-on-read writer whose key index budget (WithKeyIndexBytes, 64 KiB) holds
// about 1,400 int64 keys writes 8,000 rows, so the index spills its keys to local disk (Stats says how much) and
// merges its runs, then upserts and deletes keys it spilled, new keys and keys already upserted, over several
// commits with small-file compactions moving rows between files (the index forgets the rewritten files' rows in
// its runs). The index stays on: the table holds no equality delete file (format version 2: position delete
// files, 3: deletion vectors), and reads back as the model says.
func TestKeyIndexSpillsPastBudget(t *testing.T) {
	t.Parallel()
	for _, version := range []int{2, 3} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			cat := openCatalog(t)
			ident := table.Identifier{"mor", "spill"}
			const budget = 64 << 10
			w, err := iceberg.NewWriter(ctx, cat, ident,
				iceberg.WithCreate(kvSchema, iceberg.IdentifierFields("id"), iceberg.FormatVersion(version)),
				iceberg.WithKeyIndexBytes(budget), iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompaction(3),
				iceberg.WithDeleteConversion(0))
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close(ctx)
			model := kvModel{}
			for f := range 8 {
				ids := make([]int64, 1000)
				for i := range ids {
					ids[i] = int64(f*1000 + i)
					model.insert(ids[i], ids[i])
				}
				if err := w.Write(ctx, kvBatch(ids, ids)); err != nil {
					t.Fatal(err)
				}
				if err := w.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
			st := w.Stats()
			if st.KeyIndexBytes == 0 || st.KeyIndexBytes > budget || st.KeyIndexSpilledBytes == 0 {
				t.Fatalf("after 8,000 rows: key index holds %d bytes (budget %d), %d spilled", st.KeyIndexBytes, budget, st.KeyIndexSpilledBytes)
			}
			rng := rand.New(rand.NewPCG(18, uint64(version)))
			for round := range 6 {
				seen := map[int64]bool{}
				var up, vs []int64
				for len(up) < 300 {
					id := rng.Int64N(8500) // a few keys past the last written: new rows
					if !seen[id] {
						seen[id] = true
						up = append(up, id)
						vs = append(vs, int64(-round*10_000)-id)
						model.upsert(id, vs[len(vs)-1])
					}
				}
				if err := w.Upsert(ctx, kvBatch(up, vs)); err != nil {
					t.Fatal(err)
				}
				var del []int64
				for len(del) < 50 {
					id := rng.Int64N(8500)
					if !seen[id] {
						seen[id] = true
						del = append(del, id)
						model.del(id)
					}
				}
				if err := w.Delete(ctx, keyBatch(del)); err != nil {
					t.Fatal(err)
				}
				if err := w.Flush(ctx); err != nil {
					t.Fatal(err)
				}
				if st := w.Stats(); st.KeyIndexBytes == 0 {
					t.Fatalf("round %d: the key index went off", round)
				}
			}
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
			compareKV(t, readKV(t, cat, ident), model)
			l := liveDeletes(t, cat, ident)
			if l.eq != 0 || (version == 2 && l.pos == 0) || (version == 3 && l.dvs == 0) {
				t.Fatalf("live delete files: %d equality, %d position, %d deletion vectors", l.eq, l.pos, l.dvs)
			}
		})
	}
}
