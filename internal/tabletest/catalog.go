package tabletest

import (
	"context"
	"path/filepath"
	"testing"

	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/icewriter/iceberg/catalog"
)

// OpenCatalog opens the embedded catalog (SQLite, tables in a local folder) whose database is at path, and
// closes it when the test ends.
func OpenCatalog(t testing.TB, path string) icecatalog.Catalog {
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

// TempCatalog opens a fresh embedded catalog in a temporary folder of the test (OpenCatalog).
func TempCatalog(t testing.TB) icecatalog.Catalog {
	t.Helper()
	return OpenCatalog(t, filepath.Join(t.TempDir(), "catalog.db"))
}
