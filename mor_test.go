package iceberg_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// TestKeyedInputErrors: missing key columns and null keys are ColumnErrors; a partitioned table whose
// partition source is not in the key is refused at NewWriter when WithKeys names the key.
func TestKeyedInputErrors(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"mor", "errs"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(kvSchema, iceberg.IdentifierFields("id")))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	sc := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewRecordBuilder(memory.NewGoAllocator(), sc)
	b.Field(0).(*array.Int64Builder).Append(1)
	noKey := b.NewRecordBatch()
	var ce *iceberg.ColumnError
	if err := w.Delete(ctx, noKey); !errors.As(err, &ce) || ce.Column != "id" {
		t.Fatalf("Delete without key column: %v", err)
	}
	if err := w.Upsert(ctx, noKey); !errors.As(err, &ce) || ce.Column != "id" {
		t.Fatalf("Upsert without key column: %v", err)
	}
	nb := array.NewRecordBuilder(memory.NewGoAllocator(), arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil))
	nb.Field(0).(*array.Int64Builder).AppendNull()
	nullKey := nb.NewRecordBatch()
	if err := w.Delete(ctx, nullKey); !errors.As(err, &ce) || ce.Column != "id" || !errors.Is(err, iceberg.ErrNullInRequired) {
		t.Fatalf("Delete with a null key: %v", err)
	}

	_, err = iceberg.NewWriter(ctx, cat, table.Identifier{"mor", "parts"},
		iceberg.WithCreate(kvSchema, iceberg.PartitionBy("bucket(2, v)")), iceberg.WithKeys("id"))
	if !errors.As(err, &ce) || ce.Column != "v" {
		t.Fatalf("partition source outside the key: %v", err)
	}
	plain, err := iceberg.NewWriter(ctx, cat, table.Identifier{"mor", "nokeys"}, iceberg.WithCreate(kvSchema))
	if err != nil {
		t.Fatal(err)
	}
	if err := plain.Upsert(ctx, kvBatch([]int64{1}, []int64{1})); !errors.Is(err, iceberg.ErrNoKeys) {
		t.Fatalf("Upsert without keys: %v", err)
	}
	_ = plain.Close(ctx)
}

// TestCompact: after upserts and deletes, Compact rewrites the data files the deletes apply to and expunges the
// delete files; the table reads back the same, and upserts after it still apply to the rewritten rows.
func TestCompact(t *testing.T) {
	t.Parallel() // see TestMain
	for _, version := range []int{2, 3} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			ctx := context.Background()
			cat := openCatalog(t)
			ident := table.Identifier{"mor", "compact"}
			w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(kvSchema, iceberg.IdentifierFields("id"),
				iceberg.FormatVersion(version)))
			if err != nil {
				t.Fatal(err)
			}
			model := kvModel{}
			rng := rand.New(rand.NewPCG(1, 2))
			v := int64(0)
			for round := 0; round < 6; round++ {
				ids := make([]int64, 50)
				vs := make([]int64, 50)
				for i := range ids {
					ids[i], v = rng.Int64N(80), v+1
					vs[i] = v
					model.upsert(ids[i], vs[i])
				}
				if err := w.Upsert(ctx, kvBatch(ids, vs)); err != nil {
					t.Fatal(err)
				}
				dels := []int64{rng.Int64N(80), rng.Int64N(80)}
				for _, d := range dels {
					model.del(d)
				}
				if err := w.Delete(ctx, keyBatch(dels)); err != nil {
					t.Fatal(err)
				}
				if err := w.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
			res, err := w.Compact(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if res.RewrittenDataFiles == 0 || res.RemovedDeleteFiles == 0 || res.DeleteFilesRemaining != 0 {
				t.Fatalf("compaction result %+v", res)
			}
			compareKV(t, readKV(t, cat, ident), model)
			// Upserts after the rewrite still replace the rewritten rows.
			ids := []int64{1, 2, 3, 4, 5}
			vs := []int64{1001, 1002, 1003, 1004, 1005}
			for i := range ids {
				model.upsert(ids[i], vs[i])
			}
			if err := w.Upsert(ctx, kvBatch(ids, vs)); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
			compareKV(t, readKV(t, cat, ident), model)
		})
	}
}

// TestCompactReadsEachFileInOneRequest: a compaction reads every column of its input files, so it reads each
// (data file and delete file) whole in one request, where iceberg-go's scanner opened it and fetched each column
// chunk in a request of its own (7 GETs a file of the seed events on S3). The only other read of an input is the
// footer of the largest data file, which sets the rewrite's write batch (rewriteBatchRows).
func TestCompactReadsEachFileInOneRequest(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat, _ := tabletest.CountedCatalog(t)
	ident := table.Identifier{"mor", "reads"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(kvSchema, iceberg.IdentifierFields("id")),
		iceberg.WithSmallFileCompactionEvery(0))
	if err != nil {
		t.Fatal(err)
	}
	model := kvModel{}
	for round := int64(0); round < 3; round++ { // three files, the later two updating keys of the first
		ids := []int64{round * 10, round*10 + 1, round*10 + 2, 0, 1}
		vs := []int64{round, round, round, round, round}
		for i := range ids {
			model.upsert(ids[i], vs[i])
		}
		must(t, w.Upsert(ctx, kvBatch(ids, vs)))
		must(t, w.Flush(ctx))
	}
	_, tasks := liveDataFiles(t, cat, ident)
	type reads struct{ opens, whole int64 }
	before := map[string]reads{}
	var deletes int
	for _, task := range tasks {
		paths := []string{task.File.FilePath()}
		for _, f := range task.DeleteFiles {
			paths = append(paths, f.FilePath())
			deletes++
		}
		for _, p := range paths {
			o, wh := tabletest.FileReads(p)
			before[p] = reads{o, wh}
		}
	}
	if len(tasks) != 3 || deletes == 0 {
		t.Fatalf("%d data files, %d position delete files planned; want 3 and some", len(tasks), deletes)
	}
	res, err := w.Compact(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.RewrittenDataFiles != 3 {
		t.Fatalf("compaction result %+v, want 3 data files rewritten", res)
	}
	footers := 0
	for p, b := range before {
		o, wh := tabletest.FileReads(p)
		if wh-b.whole != 1 {
			t.Errorf("%s read whole %d times by the compaction, want 1", p, wh-b.whole)
		}
		switch o - b.opens {
		case 0:
		case 1: // the largest data file's footer
			footers++
		default:
			t.Errorf("%s opened %d times by the compaction, want at most 1 (its footer)", p, o-b.opens)
		}
	}
	if footers > 1 {
		t.Errorf("%d input files opened for their footer, want at most 1", footers)
	}
	must(t, w.Close(ctx))
	compareKV(t, readKV(t, cat, ident), model)
}

// TestCompactLostReplyThenUpsert: on a v3 table, a compaction whose reply is lost has applied, and its retry
// finds nothing left to do. An upsert after it still replaces the row the compaction moved to its new file:
// id 10 holds only the upserted value, and every id 0..99 holds exactly one row.
func TestCompactLostReplyThenUpsert(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := &slowCatalog{Catalog: openCatalog(t)}
	ident := table.Identifier{"mor", "compactlost"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(kvSchema, iceberg.IdentifierFields("id"),
		iceberg.FormatVersion(3)), iceberg.WithFlushInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	ids := func(from, to int64) ([]int64, []int64) {
		var a, b []int64
		for i := from; i < to; i++ {
			a = append(a, i)
			b = append(b, 0)
		}
		return a, b
	}
	upsert := func(from, to, v int64) {
		a, b := ids(from, to)
		for i := range b {
			b[i] = v
		}
		rec := kvBatch(a, b)
		defer rec.Release()
		if err := w.Upsert(ctx, rec); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	upsert(0, 100, 1)
	upsert(0, 50, 2)
	cat.mu.Lock()
	cat.loseReplies = 1
	cat.mu.Unlock()
	res, err := w.Compact(ctx)
	t.Logf("compact: %+v err=%v", res, err)
	upsert(10, 11, 3)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got := readKV(t, cat, ident)
	if len(got[10]) != 1 || got[10][0] != 3 {
		t.Fatalf("id 10 has values %v, want [3]", got[10])
	}
	for id := int64(0); id < 100; id++ {
		if len(got[id]) != 1 {
			t.Fatalf("id %d has %d rows: %v", id, len(got[id]), got[id])
		}
	}
}

// TestConcurrentUpserts: two writers upsert overlapping keys at the same time. Commits serialize in catalog
// order, so every key ends with exactly one row, holding the last value one of the two writers gave it.
func TestConcurrentUpserts(t *testing.T) {
	t.Parallel() // a long test that mostly waits: see TestMain
	for _, v := range []int{2, 3} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) { concurrentUpserts(t, v) })
	}
}

// concurrentUpserts: on v3 both writers start with a key index (deletion vectors) and must fall back to
// equality deletes as soon as the other one commits.
func concurrentUpserts(t *testing.T, version int) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"mor", "race"}
	createTable(t, ctx, cat, ident, kvSchema, iceberg.IdentifierFields("id"), iceberg.FormatVersion(version))
	last := [2]map[int64]int64{{}, {}}
	errs := make(chan error, 2)
	for wi := 0; wi < 2; wi++ {
		go func(wi int) {
			w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithWriterID(fmt.Sprintf("w%d", wi)),
				iceberg.WithFlushRows(40))
			if err != nil {
				errs <- err
				return
			}
			rng := rand.New(rand.NewPCG(uint64(wi), 3))
			for round := 0; round < 15; round++ { // about 8 commits each, interleaved with the other writer's
				ids := make([]int64, 20)
				vs := make([]int64, 20)
				for i := range ids {
					ids[i] = rng.Int64N(60)
					vs[i] = int64(wi)*1_000_000 + int64(round*100+i)
					last[wi][ids[i]] = vs[i]
				}
				if err := w.Upsert(ctx, kvBatch(ids, vs)); err != nil {
					errs <- err
					return
				}
				if round%5 == 0 {
					if err := w.Flush(ctx); err != nil {
						errs <- err
						return
					}
				}
			}
			errs <- w.Close(ctx)
		}(wi)
	}
	for i := 0; i < 2; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	got := readKV(t, cat, ident)
	for id := int64(0); id < 60; id++ {
		a, inA := last[0][id]
		b, inB := last[1][id]
		if !inA && !inB {
			if len(got[id]) != 0 {
				t.Fatalf("id %d never written, table has %v", id, got[id])
			}
			continue
		}
		if len(got[id]) != 1 || !((inA && got[id][0] == a) || (inB && got[id][0] == b)) {
			t.Fatalf("id %d: table has %v, want one row with %d or %d", id, got[id], a, b)
		}
	}
}
