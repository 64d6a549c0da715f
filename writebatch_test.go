package iceberg_test

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet/file"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/seed"
)

// TestDistinctStringsDropTheirDictionary: a batch of seed events written by a writer, by a router's bulk
// phase (files kept open across batches, bulkfile.go), and the files a compaction writes keep no dictionary for the info column (92 distinct
// characters a row: a dictionary of it only costs) and keeps one for event_type (six values), with every row
// read back as written. With iceberg-go's 20,000-row write batch the info column filled a data page before the
// cost-based fallback could run, and wrote its dictionary page.
func TestDistinctStringsDropTheirDictionary(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	rec := seed.New(0, 7).Batch(20_000)
	defer rec.Release()
	t.Run("writer", func(t *testing.T) {
		cat := openCatalog(t)
		ident := table.Identifier{"db", "dict"}
		w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema))
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(ctx, rec); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		checkDictionaries(t, cat, ident, rec)
	})
	t.Run("bulk", func(t *testing.T) {
		cat := openCatalog(t)
		ident := table.Identifier{"db", "dict"}
		r := bulkRouter(t, cat, 16<<20)
		if err := r.Write(ctx, ident, rec); err != nil {
			t.Fatal(err)
		}
		if err := r.Close(ctx); err != nil {
			t.Fatal(err)
		}
		checkDictionaries(t, cat, ident, rec)
	})
	// A compaction reads its input back in batches of up to 131,072 rows (a file or row group each) and writes
	// them through iceberg-go's writer: without the writer's write batch (rewriteBatchRows) a first batch over
	// 20,000 rows filled the info column's first page, its output kept a dictionary, and the compacted table
	// read 5-10% slower than the same rows appended (BenchmarkReadAfterUpserts).
	t.Run("compaction", func(t *testing.T) {
		cat := openCatalog(t)
		ident := table.Identifier{"db", "dict"}
		w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema, iceberg.IdentifierFields("id")))
		if err != nil {
			t.Fatal(err)
		}
		model := seedModel{}
		g := seed.New(0, 8)
		for range 2 { // two files of 25,000 rows, one commit each
			r := g.Batch(25_000)
			model.put(r)
			if err := w.Write(ctx, r); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
		// Half of each file updated: position deletes on both, and a third file of 25,000 rows; Compact rewrites
		// the three into one, reading no batch under 20,000 rows.
		up := seed.New(12_500, 9).Batch(25_000)
		model.put(up)
		if err := w.Upsert(ctx, up); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		res, err := w.Compact(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if res.RewrittenDataFiles != 3 || res.AddedDataFiles != 1 {
			t.Fatalf("compaction rewrote %d files into %d, want 3 into 1", res.RewrittenDataFiles, res.AddedDataFiles)
		}
		checkDictionaryPages(t, cat, ident)
		model.check(t, cat, ident)
	})
	// A copy-on-write rewrite writes the rows it keeps as the scanner reads them (here the file's one 25,000-row
	// batch, less the deleted rows at its end): without the writer's write batch its output kept a dictionary on
	// info, where the file it replaces had none.
	t.Run("copy-on-write", func(t *testing.T) {
		cat := openCatalog(t)
		ident := table.Identifier{"db", "dict"}
		w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(seed.Schema, iceberg.IdentifierFields("id")),
			iceberg.WithMode(iceberg.CopyOnWrite))
		if err != nil {
			t.Fatal(err)
		}
		model := seedModel{}
		r := seed.New(0, 8).Batch(25_000)
		model.put(r)
		if err := w.Write(ctx, r); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		checkDictionaryPages(t, cat, ident)
		gone := []int64{24_990, 24_995, 24_999}
		for _, id := range gone {
			delete(model, id)
		}
		del := keyBatch(gone)
		defer del.Release()
		if err := w.Delete(ctx, del); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		checkDictionaryPages(t, cat, ident)
		model.check(t, cat, ident)
	})
}

// checkDictionaries checks that the table's one data file has no dictionary page for the info column and one
// for event_type in every row group, and that the table holds the rows of rec.
func checkDictionaries(t *testing.T, cat icecatalog.Catalog, ident table.Identifier, rec arrow.RecordBatch) {
	t.Helper()
	checkDictionaryPages(t, cat, ident)
	counts, rows := readRows(t, cat, ident)
	ids := rec.Column(0).(*array.Int64)
	info := rec.Column(4).(*array.String)
	if len(counts) != int(rec.NumRows()) {
		t.Fatalf("%d ids read back, want %d", len(counts), rec.NumRows())
	}
	for i := range int(rec.NumRows()) {
		id := ids.Value(i)
		if counts[id] != 1 || rows[id]["info"] != info.Value(i) {
			t.Fatalf("id %d: %d rows, info %v, want 1 row, info %q", id, counts[id], rows[id]["info"], info.Value(i))
		}
	}
}

// checkDictionaryPages checks that the table's one data file has no dictionary page for the info column and one
// for event_type in every row group.
func checkDictionaryPages(t *testing.T, cat icecatalog.Catalog, ident table.Identifier) {
	t.Helper()
	ctx := context.Background()
	tbl, tasks := liveDataFiles(t, cat, ident)
	if len(tasks) != 1 {
		t.Fatalf("%d data files, want 1", len(tasks))
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f, err := fs.Open(tasks[0].File.FilePath())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rdr, err := file.NewParquetReader(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		dict bool
	}{{"info", false}, {"event_type", true}} {
		col := rdr.MetaData().Schema.ColumnIndexByName(c.name)
		for rg := range rdr.NumRowGroups() {
			chunk, err := rdr.MetaData().RowGroup(rg).ColumnChunk(col)
			if err != nil {
				t.Fatal(err)
			}
			if got := chunk.HasDictionaryPage(); got != c.dict {
				t.Errorf("row group %d, column %s: dictionary page %v, want %v (encodings %v)", rg, c.name, got, c.dict, chunk.Encodings())
			}
		}
	}
}
