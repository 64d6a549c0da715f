package iceberg_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
)

// TestKeyIndexSpillsPastBudget: a merge-on-read writer whose key index budget (WithKeyIndexBytes, 192 KiB) holds
// its files' metadata (about 5 KiB a file with its vector) and a few thousand int64 keys writes 32,000 rows, so
// the index spills its keys to local disk (Stats says how much) and
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
			const budget = 192 << 10
			w, err := iceberg.NewWriter(ctx, cat, ident,
				iceberg.WithCreate(kvSchema, iceberg.IdentifierFields("id"), iceberg.FormatVersion(version)),
				iceberg.WithKeyIndexBytes(budget), iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompactionEvery(3),
				iceberg.WithDeleteConversionEvery(0))
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close(ctx)
			model := kvModel{}
			writeIDFiles(t, ctx, w, model, 8, 4000)
			st := w.Stats()
			if st.KeyIndexBytes == 0 || st.KeyIndexBytes > budget || st.KeyIndexSpilledBytes == 0 {
				t.Fatalf("after 32,000 rows: key index holds %d bytes (budget %d), %d spilled", st.KeyIndexBytes, budget, st.KeyIndexSpilledBytes)
			}
			rng := rand.New(rand.NewPCG(18, uint64(version)))
			for round := range 6 {
				// A few keys past the last written: new rows.
				upsertDeleteRound(t, w, model, rng, nil, 32_500, 300, 50, int64(-round*100_000))
			}
			must(t, w.Close(ctx))
			compareKV(t, readKV(t, cat, ident), model)
			assertPositionDeletesOnly(t, cat, ident, version)
		})
	}
}

// TestKeyIndexLoadSpillsPastBudget: a writer reopening a table of 16,000 rows (written under the default budget,
// with deletes already on it) with a key index budget of 96 KiB, about a tenth of what its keys take in memory,
// spills the keys while NewWriter reads them (Stats says so before any write) instead of leaving the index off;
// its upserts and deletes of keys written before the restart, of keys the first writer upserted and of new keys
// stay position deletes: the table holds no equality delete file (format version 2: position delete files, 3:
// deletion vectors) and reads back as the model says.
func TestKeyIndexLoadSpillsPastBudget(t *testing.T) {
	t.Parallel()
	ident := table.Identifier{"mor", "loadspill"}
	for _, version := range []int{2, 3} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			t.Parallel()
			ctx, cat := t.Context(), openCatalog(t)
			open := func(opts ...iceberg.Option) *iceberg.Writer {
				w, err := iceberg.NewWriter(ctx, cat, ident, append([]iceberg.Option{
					iceberg.WithCreate(kvSchema, iceberg.IdentifierFields("id"), iceberg.FormatVersion(version)),
					iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompactionEvery(0), iceberg.WithDeleteConversionEvery(0)},
					opts...)...)
				if err != nil {
					t.Fatal(err)
				}
				return w
			}
			model := kvModel{}
			w := open()
			writeIDFiles(t, ctx, w, model, 4, 4000)
			up := []int64{10, 6000, 15999}
			for _, id := range up {
				model.upsert(id, -id)
			}
			must(t, w.Upsert(ctx, kvBatch(up, []int64{-10, -6000, -15999})))
			must(t, w.Close(ctx))

			const budget = 96 << 10
			w = open(iceberg.WithKeyIndexBytes(budget))
			defer w.Close(ctx)
			if st := w.Stats(); st.KeyIndexBytes == 0 || st.KeyIndexBytes > budget || st.KeyIndexSpilledBytes == 0 {
				t.Fatalf("reopened: key index holds %d bytes (budget %d), %d spilled", st.KeyIndexBytes, budget, st.KeyIndexSpilledBytes)
			}
			rng := rand.New(rand.NewPCG(18, uint64(version)))
			for round := range 3 { // keys upserted before the restart, a new one, and random ones written before it
				upsertDeleteRound(t, w, model, rng, []int64{10, 6000, int64(16_000 + round)}, 16_000, 200, 30, int64(-(round+1)*100_000))
			}
			must(t, w.Close(ctx))
			compareKV(t, readKV(t, cat, ident), model)
			assertPositionDeletesOnly(t, cat, ident, version)
		})
	}
}

// TestKeyIndexSpillDir: NewWriter refuses a spill directory it cannot create files in (missing, or a file),
// naming WithKeyIndexSpillDir and the directory; a writer spills into the directory it was given: with the
// directory removed after NewWriter, the first spill fails, the index goes off (logged with the directory's
// error) and the writer falls back to equality deletes, and the table reads back as the model says.
func TestKeyIndexSpillDir(t *testing.T) {
	t.Parallel()
	ctx, cat := t.Context(), openCatalog(t)
	ident := table.Identifier{"mor", "spilldir"}
	create := iceberg.WithCreate(kvSchema, iceberg.IdentifierFields("id"), iceberg.FormatVersion(2))
	file := filepath.Join(t.TempDir(), "file")
	must(t, os.WriteFile(file, nil, 0o600))
	for _, dir := range []string{filepath.Join(t.TempDir(), "missing"), file} {
		_, err := iceberg.NewWriter(ctx, cat, ident, create, iceberg.WithKeyIndexSpillDir(dir))
		if !errors.Is(err, iceberg.ErrInvalidOption) || !strings.Contains(err.Error(), "WithKeyIndexSpillDir") ||
			!strings.Contains(err.Error(), dir) {
			t.Fatalf("spill dir %s: NewWriter returned %v, want ErrInvalidOption naming the option and the directory", dir, err)
		}
	}
	dir := filepath.Join(t.TempDir(), "spill")
	must(t, os.Mkdir(dir, 0o700))
	logs := &logRecords{}
	w, err := iceberg.NewWriter(ctx, cat, ident, create, iceberg.WithKeyIndexBytes(64<<10),
		iceberg.WithKeyIndexSpillDir(dir), iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompactionEvery(0),
		iceberg.WithLogger(slog.New(logs)))
	must(t, err)
	defer w.Close(ctx)
	model := kvModel{}
	writeIDFiles(t, ctx, w, model, 1, 500) // fits the budget: nothing spilled yet
	if st := w.Stats(); st.KeyIndexBytes == 0 || st.KeyIndexSpilledBytes != 0 {
		t.Fatalf("under the budget: key index holds %d bytes, %d spilled", st.KeyIndexBytes, st.KeyIndexSpilledBytes)
	}
	must(t, os.Remove(dir))
	ids := make([]int64, 3000)
	for i := range ids {
		ids[i] = int64(500 + i)
		model.insert(ids[i], ids[i])
	}
	must(t, w.Write(ctx, kvBatch(ids, ids)))
	must(t, w.Flush(ctx))
	if st := w.Stats(); st.KeyIndexBytes != 0 {
		t.Fatalf("spill directory gone: the key index holds %d bytes, want it off", st.KeyIndexBytes)
	}
	errs := logs.errs("iceberg: key index off; upserts and deletes use equality deletes from now on")
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), dir) {
		t.Fatalf("logged %v, want the spill's error naming %s", errs, dir)
	}
	model.upsert(7, -7)
	must(t, w.Upsert(ctx, kvBatch([]int64{7}, []int64{-7})))
	must(t, w.Close(ctx))
	compareKV(t, readKV(t, cat, ident), model)
}
