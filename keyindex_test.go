package iceberg_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// deleteFileKinds counts the live delete files of the table: equality deletes and deletion vectors.
func deleteFileKinds(t *testing.T, cat icecatalog.Catalog, ident table.Identifier) (eq, dvs int) {
	t.Helper()
	l := liveDeletes(t, cat, ident)
	return l.Eq, l.DVs
}

// TestKeyIndexAcrossRestarts: a merge-on-read writer reopening a v3 table it wrote with deletion vectors, or with
// equality deletes, builds its key index from the table (the equality deletes applied while loading), so its
// upserts and deletes stay deletion vectors (merged with the vectors already there) instead of adding equality
// deletes; a table over the index budget spills its keys to local disk while loading and keeps the vectors,
// unless even the spilled index exceeds the budget: then it falls back to equality deletes. Every case reads back
// as the model.
func TestKeyIndexAcrossRestarts(t *testing.T) {
	t.Parallel() // see TestMain
	for _, c := range []struct {
		name        string
		first       []iceberg.Option // the first writer's options
		second      []iceberg.Option
		wantEqAfter bool
	}{
		{"vectors", nil, nil, false},
		{"first-wrote-equality-deletes", []iceberg.Option{iceberg.WithKeyIndexBytes(0)}, nil, false},
		{"over-budget-spills", nil, []iceberg.Option{iceberg.WithKeyIndexBytes(32_000)}, false},
		{"over-budget-even-spilled", nil, []iceberg.Option{iceberg.WithKeyIndexBytes(100)}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			cat := openCatalog(t)
			ident := table.Identifier{"mor", "restart"}
			open := func(opts []iceberg.Option) *iceberg.Writer {
				w, err := iceberg.NewWriter(ctx, cat, ident, append([]iceberg.Option{
					iceberg.WithCreate(kvSchema, iceberg.IdentifierFields("id"), iceberg.FormatVersion(3)),
					iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompactionEvery(0), iceberg.WithDeleteConversionEvery(0)}, opts...)...)
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
			if !c.wantEqAfter && (eq != eq0 || dvs < 2) {
				t.Fatalf("%d equality delete files (%d before) and %d deletion vectors: want no new equality deletes, vectors on both files the keys were in", eq, eq0, dvs)
			}
		})
	}
}

// TestKeyIndexRestartModel: writer A writes a v3 merge-on-read table with deletion vectors and closes;
// writers B and C reopen it in turn (rebuilding the key index from the live files minus their vectors) and
// upsert and delete keys A wrote, upserted and deleted. Each phase reads back as the sequential model, and the
// table never holds an equality delete file: every upsert and delete stays a deletion vector across restarts,
// with files of many row groups, partitioned or not, with stable or random writer ids.
func TestKeyIndexRestartModel(t *testing.T) {
	t.Parallel() // a long test that mostly waits: see TestMain
	// Trials 1, 2, 4 and 5 cover each pairing of partitioned (odd) and random writer ids (trial%3 == 2).
	for _, trial := range []int{1, 2, 4, 5} {
		t.Run(fmt.Sprintf("trial=%d", trial), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(runSeed(t), uint64(trial)))
			ctx := context.Background()
			cat := openCatalog(t)
			ident := table.Identifier{"mor", "restartmodel"}
			create := []iceberg.CreateOption{iceberg.IdentifierFields("id"), iceberg.FormatVersion(3)}
			if trial%2 == 1 {
				create = append(create, iceberg.PartitionBy("bucket(4, id)"))
			}
			open := func(phase int) *iceberg.Writer {
				opts := []iceberg.Option{iceberg.WithCreate(kvSchema, create...), iceberg.WithMode(iceberg.MergeOnRead),
					iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompactionEvery(0),
					iceberg.WithFlushRows(1 + rng.IntN(300)), iceberg.WithMaxInFlight(1 + rng.IntN(3)),
					iceberg.WithRowGroupRowsForTest(16 + rng.IntN(64))}
				if trial%3 == 2 {
					opts = append(opts, iceberg.WithWriterID("same"))
				}
				w, err := iceberg.NewWriter(ctx, cat, ident, opts...)
				if err != nil {
					t.Fatalf("phase %d: %v", phase, err)
				}
				return w
			}
			model := kvModel{}
			// A's 1000 rows in row groups of 16 to 80 and a key space half again as large: most operations
			// touch A's keys. Twenty operations a phase (seed new every run) upsert and delete across files.
			ops := &kvOps{rng: rng, keySpace: 1500, maxRows: 40, writes: 2, next: 1_000_000}
			for phase := 0; phase < 3; phase++ {
				w := open(phase)
				if phase == 0 {
					ids := make([]int64, 1000)
					vs := make([]int64, 1000)
					for i := range ids {
						ids[i], vs[i] = int64(i), int64(i)
						model.insert(ids[i], vs[i])
					}
					if err := w.Write(ctx, kvBatch(ids, vs)); err != nil {
						t.Fatal(err)
					}
					if err := w.Flush(ctx); err != nil {
						t.Fatal(err)
					}
				}
				for op := 0; op < 20; op++ {
					ops.apply(t, ctx, w, model)
					if rng.IntN(10) == 0 {
						if err := w.Flush(ctx); err != nil {
							t.Fatal(err)
						}
					}
				}
				if err := w.Close(ctx); err != nil {
					t.Fatal(err)
				}
				compareKV(t, readKV(t, cat, ident), model)
				if eq, _ := deleteFileKinds(t, cat, ident); eq != 0 {
					t.Fatalf("phase %d: %d equality delete files; want deletion vectors only", phase, eq)
				}
				if phase == 0 && maxRowGroups(t, cat, ident) < 2 {
					t.Fatal("no data file has several row groups")
				}
			}
		})
	}
}

// maxRowGroups returns the largest row-group count of the table's live data files.
func maxRowGroups(t *testing.T, cat icecatalog.Catalog, ident table.Identifier) int {
	t.Helper()
	tbl, tasks := liveDataFiles(t, cat, ident)
	fs, err := tbl.FS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	most := 0
	for _, task := range tasks {
		f, err := fs.Open(task.File.FilePath())
		if err != nil {
			t.Fatal(err)
		}
		pr, err := file.NewParquetReader(f)
		if err != nil {
			t.Fatal(err)
		}
		most = max(most, pr.NumRowGroups())
		pr.Close()
		f.Close()
	}
	return most
}

// TestKeyIndexForeignCommitAfterLoad: a writer that rebuilt its key index on open must not trust it once
// another writer committed after the index's snapshot and before the first commit of its own: the other
// writer's rows of the keys it upserts and deletes must go too.
func TestKeyIndexForeignCommitAfterLoad(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"mor", "foreign"}
	open := func() *iceberg.Writer {
		w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(kvSchema, iceberg.IdentifierFields("id"),
			iceberg.FormatVersion(3)), iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompactionEvery(0))
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	model := kvModel{}
	a := open()
	var ids []int64
	for id := int64(0); id < 100; id++ {
		ids = append(ids, id)
		model.insert(id, id)
	}
	if err := a.Write(ctx, kvBatch(ids, ids)); err != nil {
		t.Fatal(err)
	}
	if err := a.Upsert(ctx, kvBatch([]int64{1, 2}, []int64{-1, -2})); err != nil {
		t.Fatal(err)
	}
	model.upsert(1, -1)
	model.upsert(2, -2)
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	b := open() // index rebuilt here
	x := open()
	if err := x.Write(ctx, kvBatch([]int64{500, 3}, []int64{500, 33})); err != nil {
		t.Fatal(err)
	}
	model.insert(500, 500)
	model.insert(3, 33)
	if err := x.Upsert(ctx, kvBatch([]int64{1, 4}, []int64{11, 44})); err != nil {
		t.Fatal(err)
	}
	model.upsert(1, 11)
	model.upsert(4, 44)
	if err := x.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Upsert(ctx, kvBatch([]int64{500, 3, 1}, []int64{-500, -3, -100})); err != nil {
		t.Fatal(err)
	}
	model.upsert(500, -500)
	model.upsert(3, -3)
	model.upsert(1, -100)
	if err := b.Delete(ctx, keyBatch([]int64{4, 2})); err != nil {
		t.Fatal(err)
	}
	model.del(4)
	model.del(2)
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	compareKV(t, readKV(t, cat, ident), model)
	c := open()
	if err := c.Upsert(ctx, kvBatch([]int64{3, 5}, []int64{300, 500})); err != nil {
		t.Fatal(err)
	}
	model.upsert(3, 300)
	model.upsert(5, 500)
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	compareKV(t, readKV(t, cat, ident), model)
}

// TestKeyIndexAfterRenames: Iceberg columns are identified by field id, not name. After the key column and
// another column swap names (v -> tmp, id -> v, tmp -> id), the files written before still carry the old
// Parquet names; a reopened writer's upsert of key 5 replaces key 5's row and no other: every key 0..99 holds
// exactly its own row (reading keys by their new names from the old files would put them on the wrong rows).
func TestKeyIndexAfterRenames(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"mor", "rename"}
	a, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(kvSchema, iceberg.IdentifierFields("id"),
		iceberg.FormatVersion(3)), iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompactionEvery(0))
	if err != nil {
		t.Fatal(err)
	}
	// field 1 (the key) = i, field 2 = (i+1)%100
	var keys, others []int64
	for i := int64(0); i < 100; i++ {
		keys = append(keys, i)
		others = append(others, (i+1)%100)
	}
	if err := a.Write(ctx, kvBatch(keys, others)); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]string{{"v", "tmp"}, {"id", "v"}, {"tmp", "id"}} {
		tbl := tabletest.Load(t, cat, ident)
		tx := tbl.NewTransaction()
		if err := tx.UpdateSchema(true, false).RenameColumn([]string{r[0]}, r[1]).Commit(); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Now the key (field 1) is named "v" and field 2 is named "id". In kvBatch(ids, vs), vs is the key.
	b, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompactionEvery(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Upsert(ctx, kvBatch([]int64{-5}, []int64{5})); err != nil { // key 5, other -5
		t.Fatal(err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	rows := readPairs(t, cat, ident, "v", "id") // key -> other values
	for k := int64(0); k < 100; k++ {
		want := []int64{(k + 1) % 100}
		if k == 5 {
			want = []int64{-5}
		}
		if fmt.Sprint(rows[k]) != fmt.Sprint(want) {
			t.Errorf("key %d: rows with other=%v, want %v", k, rows[k], want)
		}
	}
	if len(rows) != 100 {
		t.Errorf("%d keys, want 100", len(rows))
	}
}

// TestKeyIndexSanitizedKeyName: iceberg-go writes Parquet column names sanitized the way Java Iceberg
// sanitizes Avro names ("user-id" is stored as "user_x2Did"), while the table schema keeps the name. The key
// index reads the key columns of the files it writes back: a v3 merge-on-read writer keyed on such a column
// writes, upserts and reopens, the table reads back as written and upserted, and holds no equality delete file.
func TestKeyIndexSanitizedKeyName(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"mor", "sanitized"}
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "user-id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	batch := func(ids, vs []int64) arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.NewGoAllocator(), sc)
		defer b.Release()
		b.Field(0).(*array.Int64Builder).AppendValues(ids, nil)
		b.Field(1).(*array.Int64Builder).AppendValues(vs, nil)
		return b.NewRecordBatch()
	}
	open := func() *iceberg.Writer {
		w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(sc, iceberg.IdentifierFields("user-id"),
			iceberg.FormatVersion(3)), iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompactionEvery(0))
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	w := open()
	if err := w.Write(ctx, batch([]int64{1, 2, 3}, []int64{1, 2, 3})); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Upsert(ctx, batch([]int64{2}, []int64{20})); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	w = open()
	if err := w.Upsert(ctx, batch([]int64{3}, []int64{30})); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got := readPairs(t, cat, ident, "user-id", "v")
	if len(got) != 3 || len(got[1]) != 1 || got[2][0] != 20 || len(got[2]) != 1 || got[3][0] != 30 || len(got[3]) != 1 {
		t.Fatalf("read back %v, want map[1:[1] 2:[20] 3:[30]]", got)
	}
	if eq, _ := deleteFileKinds(t, cat, ident); eq != 0 {
		t.Fatalf("%d equality delete files: want deletion vectors only", eq)
	}
}
