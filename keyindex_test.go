package iceberg_test

import (
	"context"
	"fmt"
	"testing"

	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
)

// deleteFileKinds counts the live delete files of the table: equality deletes and deletion vectors.
func deleteFileKinds(t *testing.T, cat icecatalog.Catalog, ident table.Identifier) (eq, dvs int) {
	t.Helper()
	tbl, err := cat.LoadTable(context.Background(), ident)
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := tbl.Scan().PlanFiles(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	seenEq, seenDV := map[string]bool{}, map[string]bool{}
	for _, task := range tasks {
		for _, f := range task.EqualityDeleteFiles {
			seenEq[f.FilePath()] = true
		}
		for _, f := range task.DeletionVectorFiles {
			var off int64
			if o := f.ContentOffset(); o != nil {
				off = *o
			}
			seenDV[fmt.Sprint(f.FilePath(), "@", off)] = true
		}
	}
	return len(seenEq), len(seenDV)
}

// TestKeyIndexAcrossRestarts: a merge-on-read writer reopening a v3 table it wrote with deletion vectors builds
// its key index from the table, so its upserts and deletes stay deletion vectors (merged with the vectors
// already there) instead of equality deletes; a table with equality deletes, or one over the index budget,
// falls back to equality deletes. Every case reads back as the model.
func TestKeyIndexAcrossRestarts(t *testing.T) {
	for _, c := range []struct {
		name        string
		first       []iceberg.Option // the first writer's options
		second      []iceberg.Option
		wantEqAfter bool
	}{
		{"vectors", nil, nil, false},
		{"first-wrote-equality-deletes", []iceberg.Option{iceberg.WithKeyIndexBytes(0)}, nil, true},
		{"over-budget", nil, []iceberg.Option{iceberg.WithKeyIndexBytes(10_000)}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			cat := openCatalog(t)
			ident := table.Identifier{"mor", "restart"}
			open := func(opts []iceberg.Option) *iceberg.Writer {
				w, err := iceberg.NewWriter(ctx, cat, ident, append([]iceberg.Option{
					iceberg.WithCreate(kvSchema, iceberg.IdentifierFields("id"), iceberg.FormatVersion(3)),
					iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompaction(0)}, opts...)...)
				if err != nil {
					t.Fatal(err)
				}
				return w
			}
			model := kvModel{}
			var ids []int64
			for id := int64(0); id < 1000; id++ {
				ids = append(ids, id)
				model.insert(id, id)
			}
			w := open(c.first)
			if err := w.Write(ctx, kvBatch(ids, ids)); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			up := []int64{3, 500, 999}
			for _, id := range up {
				model.upsert(id, -id)
			}
			if err := w.Upsert(ctx, kvBatch(up, []int64{-3, -500, -999})); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
			eq0, _ := deleteFileKinds(t, cat, ident)

			w = open(c.second)
			for _, id := range []int64{3, 4, 600} {
				model.upsert(id, 7)
			}
			if err := w.Upsert(ctx, kvBatch([]int64{3, 4, 600}, []int64{7, 7, 7})); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			for _, id := range []int64{5, 500} {
				model.del(id)
			}
			if err := w.Delete(ctx, keyBatch([]int64{5, 500})); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
			compareKV(t, readKV(t, cat, ident), model)
			eq, dvs := deleteFileKinds(t, cat, ident)
			if c.wantEqAfter && eq <= eq0 {
				t.Fatalf("%d equality delete files after the reopened writer (%d before): want it to fall back to them", eq, eq0)
			}
			if !c.wantEqAfter && (eq != 0 || dvs < 2) {
				t.Fatalf("%d equality delete files and %d deletion vectors: want vectors only, on both files the keys were in", eq, dvs)
			}
		})
	}
}
