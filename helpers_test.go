package iceberg_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/icewriter/iceberg/catalog"
)

// openCatalog opens a fresh embedded catalog in a temporary folder.
func openCatalog(t testing.TB) icecatalog.Catalog {
	t.Helper()
	return openCatalogAt(t, filepath.Join(t.TempDir(), "catalog.db"))
}

// openCatalogAt opens the embedded catalog whose database is at path.
func openCatalogAt(t testing.TB, path string) icecatalog.Catalog {
	t.Helper()
	cat, err := catalog.Open(context.Background(), "sqlite://"+path)
	if err != nil {
		t.Fatalf("open catalog: %v", err)
	}
	t.Cleanup(func() {
		if c, ok := cat.(icecatalog.Closer); ok {
			_ = c.Close()
		}
	})
	return cat
}

// readRows scans the table with iceberg-go's scanner and returns, per id, how many rows carry it, plus each
// id's row as a map of column values (the last one seen).
func readRows(t testing.TB, cat icecatalog.Catalog, ident table.Identifier) (map[int64]int, map[int64]map[string]any) {
	t.Helper()
	ctx := context.Background()
	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		t.Fatalf("load table: %v", err)
	}
	counts := map[int64]int{}
	rows := map[int64]map[string]any{}
	if tbl.CurrentSnapshot() == nil {
		return counts, rows
	}
	sc, it, err := tbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	idIdx := sc.FieldIndices("id")[0]
	for rec, err := range it {
		if err != nil {
			t.Fatalf("scan: %v", err)
		}
		ids := rec.Column(idIdx).(*array.Int64)
		for r := 0; r < int(rec.NumRows()); r++ {
			id := ids.Value(r)
			counts[id]++
			row := map[string]any{}
			for c, f := range sc.Fields() {
				row[f.Name] = cellValue(rec.Column(c), r)
			}
			rows[id] = row
		}
		rec.Release()
	}
	return counts, rows
}

func cellValue(a arrow.Array, r int) any {
	if a.IsNull(r) {
		return nil
	}
	switch c := a.(type) {
	case *array.Int64:
		return c.Value(r)
	case *array.Int32:
		return int64(c.Value(r))
	case *array.Float64:
		return c.Value(r)
	case *array.String:
		return c.Value(r)
	case *array.LargeString:
		return c.Value(r)
	case *array.Timestamp:
		return int64(c.Value(r))
	case *array.Boolean:
		return c.Value(r)
	}
	return a.ValueStr(r)
}
