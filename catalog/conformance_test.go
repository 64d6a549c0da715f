package catalog_test

import (
	"context"
	"path/filepath"
	"testing"

	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/catalogtest"

	"github.com/icewriter/iceberg/catalog"
)

// TestSQLiteConformance runs iceberg-go's catalog conformance suite on the embedded SQLite catalog.
func TestSQLiteConformance(t *testing.T) {
	catalogtest.RunCatalogTests(t, catalogtest.Config{
		SupportsNamespaceProperties: true,
		NewCatalog: func(t *testing.T) icecatalog.Catalog {
			dir := t.TempDir()
			cat, err := catalog.Open(context.Background(), "sqlite://"+filepath.Join(dir, "catalog.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cat.(icecatalog.Closer).Close() })
			return cat
		},
	})
}
