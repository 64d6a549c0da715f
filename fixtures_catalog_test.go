package iceberg_test

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	ice "github.com/apache/iceberg-go"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// Catalogs and tables: opening an embedded catalog, creating, loading and rolling back tables, and their files
// in local folders. Fakes that inject faults live in slowcatalog_test.go.

// openCatalog opens a fresh embedded catalog in a temporary folder.
func openCatalog(t testing.TB) icecatalog.Catalog {
	t.Helper()
	return tabletest.TempCatalog(t)
}

// openCatalogAt opens the embedded catalog whose database is at path.
func openCatalogAt(t testing.TB, path string) icecatalog.Catalog {
	t.Helper()
	return tabletest.OpenCatalog(t, path)
}

// createTable creates the table at ident (a writer that creates it and closes at once).
func createTable(t testing.TB, ctx context.Context, cat icecatalog.Catalog, ident table.Identifier, schema *arrow.Schema, create ...iceberg.CreateOption) {
	t.Helper()
	setup, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(schema, create...))
	if err != nil {
		t.Fatal(err)
	}
	_ = setup.Close(ctx)
}

// metadataFile is the metadata file the catalog has for the table: it changes with every commit, so equal
// files mean that no commit happened in between.
func metadataFile(t testing.TB, cat icecatalog.Catalog, ident table.Identifier) string {
	t.Helper()
	tbl := tabletest.Load(t, cat, ident)
	return tbl.MetadataLocation()
}

// rollbackTo rolls the table's main branch back to the snapshot, as an operator would.
func rollbackTo(t testing.TB, cat icecatalog.Catalog, ident table.Identifier, snapshotID int64) {
	t.Helper()
	ctx := context.Background()
	tbl := tabletest.Load(t, cat, ident)
	tx := tbl.NewTransaction()
	if err := tx.RollbackToSnapshot(snapshotID); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// localDir is the local folder of a file:// location (tables of the embedded catalog).
func localDir(t testing.TB, location string) string {
	t.Helper()
	u, err := url.Parse(location)
	if err != nil || u.Scheme != "file" {
		t.Fatalf("not a local location: %q", location)
	}
	return u.Path
}

// positionFiles lists the side files of source positions in the table's metadata folder (local tables), sorted.
func positionFiles(t testing.TB, cat icecatalog.Catalog, ident table.Identifier) []string {
	t.Helper()
	tbl := tabletest.Load(t, cat, ident)
	dir := filepath.Join(localDir(t, tbl.Location()), "metadata")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "icewriter-positions-") {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

// loadSchema returns the table's current schema.
func loadSchema(t testing.TB, cat icecatalog.Catalog, ident table.Identifier) *ice.Schema {
	t.Helper()
	tbl := tabletest.Load(t, cat, ident)
	return tbl.Schema()
}

// fieldOf returns the named field of sc, failing the test when there is none.
func fieldOf(t testing.TB, sc *ice.Schema, name string) ice.NestedField {
	t.Helper()
	f, ok := sc.FindFieldByName(name)
	if !ok {
		t.Fatalf("table has no field %q; schema:\n%s", name, sc)
	}
	return f
}

// replaceSnapshots counts the table's "replace" snapshots: with compaction and conversion off, a v2 writer's
// removals of its superseded position delete files.
func replaceSnapshots(t *testing.T, cat tabletest.Loader, ident table.Identifier) int {
	t.Helper()
	tbl := tabletest.Load(t, cat, ident)
	n := 0
	for _, s := range tbl.Metadata().Snapshots() {
		if s.Summary != nil && s.Summary.Operation == table.OpReplace {
			n++
		}
	}
	return n
}
