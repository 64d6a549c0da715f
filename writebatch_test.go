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

// TestDistinctStringsDropTheirDictionary: a batch of seed events written by a writer, and by a router's bulk
// phase (files kept open across batches, bulkfile.go), keeps no dictionary for the info column (92 distinct
// characters a row: a dictionary of it only costs) and keeps one for event_type (six values), with every row
// read back as written. With iceberg-go's 20,000-row write batch the info column filled a data page before the
// cost-based fallback could run, and wrote its dictionary page.
func TestDistinctStringsDropTheirDictionary(t *testing.T) {
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
}

// checkDictionaries checks that the table's one data file has no dictionary page for the info column and one
// for event_type in every row group, and that the table holds the rows of rec.
func checkDictionaries(t *testing.T, cat icecatalog.Catalog, ident table.Identifier, rec arrow.RecordBatch) {
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
