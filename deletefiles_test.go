package iceberg_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
)

// TestDeleteFilesNoEqualityDeletes: with WithDeleteFiles(NoEqualityDeletes) a merge-on-read writer never adds an
// equality delete file: while its key index covers the table its upserts and deletes are position deletes
// (v2) or deletion vectors (v3); with the index off (WithKeyIndexBytes(0)), and for a commit after another
// writer changed the table (the index no longer covers it), they rewrite the files holding the keys. Every
// step reads back as the model.
func TestDeleteFilesNoEqualityDeletes(t *testing.T) {
	t.Parallel() // see TestMain
	for _, version := range []int{2, 3} {
		for _, indexOff := range []bool{false, true} {
			t.Run(fmt.Sprintf("v%d/index-off=%v", version, indexOff), func(t *testing.T) {
				ctx := context.Background()
				cat := openCatalog(t)
				ident := table.Identifier{"mor", "noeq"}
				opts := []iceberg.Option{iceberg.WithCreate(kvSchema, iceberg.IdentifierFields("id"),
					iceberg.FormatVersion(version)), iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompactionEvery(0),
					iceberg.WithDeleteFiles(iceberg.NoEqualityDeletes)}
				if indexOff {
					opts = append(opts, iceberg.WithKeyIndexBytes(0))
				}
				w, err := iceberg.NewWriter(ctx, cat, ident, opts...)
				if err != nil {
					t.Fatal(err)
				}
				model := commitIDs(t, ctx, w, 100)
				must(t, w.Upsert(ctx, kvBatch([]int64{1, 2}, []int64{-1, -2})))
				model.upsert(1, -1)
				model.upsert(2, -2)
				must(t, w.Flush(ctx))
				compareKV(t, readKV(t, cat, ident), model)
				// Another writer adds rows: the first writer's index no longer covers the table.
				x, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompactionEvery(0),
					iceberg.WithKeyIndexBytes(0))
				if err != nil {
					t.Fatal(err)
				}
				must(t, x.Write(ctx, kvBatch([]int64{500, 501}, []int64{500, 501})))
				model.insert(500, 500)
				model.insert(501, 501)
				must(t, x.Close(ctx))
				must(t, w.Upsert(ctx, kvBatch([]int64{500, 1, 3}, []int64{-500, -100, -3})))
				model.upsert(500, -500)
				model.upsert(1, -100)
				model.upsert(3, -3)
				must(t, w.Delete(ctx, keyBatch([]int64{501, 4})))
				model.del(501)
				model.del(4)
				must(t, w.Flush(ctx))
				// Later commits (the index is off by now) stay free of equality deletes too.
				must(t, w.Upsert(ctx, kvBatch([]int64{5, 500}, []int64{-5, 5000})))
				model.upsert(5, -5)
				model.upsert(500, 5000)
				must(t, w.Close(ctx))
				compareKV(t, readKV(t, cat, ident), model)
				if live := liveDeletes(t, cat, ident); live.Eq != 0 {
					t.Fatalf("%d equality delete files; want none", live.Eq)
				}
			})
		}
	}
}

// TestDeleteFilesNoEqualityDeletesOrFail: with WithDeleteFiles(NoEqualityDeletesOrFail), Upsert and Delete
// refuse with ErrEqualityDeletesRefused while the key index is off (the writer stays usable: a Write still
// commits), and a commit the index no longer covers (another writer changed the table) fails with it: the
// writer stops and nothing of that commit lands.
func TestDeleteFilesNoEqualityDeletesOrFail(t *testing.T) {
	t.Parallel() // see TestMain
	for _, version := range []int{2, 3} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			ctx := context.Background()
			cat := openCatalog(t)
			ident := table.Identifier{"mor", "noeqfail"}
			open := func(extra ...iceberg.Option) *iceberg.Writer {
				w, err := iceberg.NewWriter(ctx, cat, ident, append([]iceberg.Option{iceberg.WithCreate(kvSchema,
					iceberg.IdentifierFields("id"), iceberg.FormatVersion(version)), iceberg.WithFlushInterval(0),
					iceberg.WithSmallFileCompactionEvery(0), iceberg.WithDeleteFiles(iceberg.NoEqualityDeletesOrFail)}, extra...)...)
				if err != nil {
					t.Fatal(err)
				}
				return w
			}
			model := kvModel{}
			off := open(iceberg.WithKeyIndexBytes(0))
			if err := off.Upsert(ctx, kvBatch([]int64{1}, []int64{1})); !errors.Is(err, iceberg.ErrEqualityDeletesRefused) {
				t.Fatalf("Upsert with the index off: %v, want ErrEqualityDeletesRefused", err)
			}
			if err := off.Delete(ctx, keyBatch([]int64{1})); !errors.Is(err, iceberg.ErrEqualityDeletesRefused) {
				t.Fatalf("Delete with the index off: %v, want ErrEqualityDeletesRefused", err)
			}
			must(t, off.Write(ctx, kvBatch([]int64{1, 2}, []int64{1, 2})))
			model.insert(1, 1)
			model.insert(2, 2)
			must(t, off.Close(ctx))

			w := open()
			must(t, w.Upsert(ctx, kvBatch([]int64{1}, []int64{-1})))
			model.upsert(1, -1)
			must(t, w.Flush(ctx))
			x := open(iceberg.WithKeyIndexBytes(0))
			must(t, x.Write(ctx, kvBatch([]int64{3}, []int64{3})))
			model.insert(3, 3)
			must(t, x.Close(ctx))
			must(t, w.Upsert(ctx, kvBatch([]int64{2}, []int64{-2}))) // accepted: the index was on
			err := w.Flush(ctx)
			if !errors.Is(err, iceberg.ErrEqualityDeletesRefused) || !errors.Is(err, iceberg.ErrWriterFailed) {
				t.Fatalf("Flush of a commit the index no longer covers: %v, want ErrWriterFailed wrapping ErrEqualityDeletesRefused", err)
			}
			_ = w.Close(ctx)
			compareKV(t, readKV(t, cat, ident), model)
			if live := liveDeletes(t, cat, ident); live.Eq != 0 {
				t.Fatalf("%d equality delete files; want none", live.Eq)
			}
		})
	}
}

// TestDeleteFilesNone: with WithDeleteFiles(NoDeleteFiles), deprecated, a writer on a merge-on-read table (its
// default mode) rewrites the files holding the keys it upserts and deletes, as WithMode(CopyOnWrite) does: the
// table never holds a delete file, reads back as the model, and both rewrite the same number of files.
func TestDeleteFilesNone(t *testing.T) {
	t.Parallel() // see TestMain
	for _, version := range []int{2, 3} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			rewritten := map[string]int64{}
			for name, opt := range map[string]iceberg.Option{
				"NoDeleteFiles": iceberg.WithDeleteFiles(iceberg.NoDeleteFiles),
				"CopyOnWrite":   iceberg.WithMode(iceberg.CopyOnWrite),
			} {
				ctx := context.Background()
				cat := openCatalog(t)
				ident := table.Identifier{"mor", "nodeletes"}
				w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(kvSchema, iceberg.IdentifierFields("id"),
					iceberg.FormatVersion(version)), iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompactionEvery(0), opt)
				if err != nil {
					t.Fatal(err)
				}
				model := commitIDs(t, ctx, w, 50)
				for round := int64(0); round < 3; round++ {
					must(t, w.Upsert(ctx, kvBatch([]int64{round, 10 + round}, []int64{-round, -10 - round})))
					model.upsert(round, -round)
					model.upsert(10+round, -10-round)
					must(t, w.Delete(ctx, keyBatch([]int64{20 + round})))
					model.del(20 + round)
					must(t, w.Flush(ctx))
				}
				rewritten[name] = w.Stats().FilesRewritten
				must(t, w.Close(ctx))
				compareKV(t, readKV(t, cat, ident), model)
				if live := liveDeletes(t, cat, ident); live.Eq+live.Pos+live.DVs != 0 {
					t.Fatalf("%s: %+v: want no delete file", name, live)
				}
			}
			if rewritten["NoDeleteFiles"] != rewritten["CopyOnWrite"] || rewritten["CopyOnWrite"] == 0 {
				t.Fatalf("files rewritten: %v, want the same, not 0", rewritten)
			}
		})
	}
}

// TestDeleteFilesOptionValue: an unknown WithDeleteFiles value is refused by NewWriter, naming the option.
func TestDeleteFilesOptionValue(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	_, err := iceberg.NewWriter(ctx, cat, table.Identifier{"mor", "badopt"}, iceberg.WithCreate(kvSchema,
		iceberg.IdentifierFields("id")), iceberg.WithDeleteFiles(iceberg.DeleteFiles(42)))
	if !errors.Is(err, iceberg.ErrInvalidOption) || !strings.Contains(err.Error(), "WithDeleteFiles") {
		t.Fatalf("NewWriter: %v, want ErrInvalidOption naming WithDeleteFiles", err)
	}
}
