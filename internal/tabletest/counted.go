// Package tabletest holds the test fixtures that the root package's in-package and external tests and the
// nested modules' tests share (a Go test file of one package cannot call a helper of another): readers of a
// table (its records, live data and delete files, row lineage) and a local file system that counts reads. Only
// tests import it.
package tabletest

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	icecatalog "github.com/apache/iceberg-go/catalog"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/icewriter/iceberg/catalog"
)

// CountedScheme serves local folders under the URI scheme "counted" (counted:///path is file:///path) and counts,
// per file, how often anything opened or read it: a catalog whose warehouse is there (CountedCatalog) tells a
// test which files a writer read back, and how (FileReads).
const CountedScheme = "counted"

var countedReads sync.Map // path under file:// -> *countedFile

// countedFile counts the reads of one file: opens (then read by ranges: at least one request each, against an
// object store, plus one for each range Open's first request did not hold) and whole-file reads (ReadFile: one
// request).
type countedFile struct{ opens, whole atomic.Int64 }

func init() {
	iceio.Register(CountedScheme, func(ctx context.Context, u *url.URL, props map[string]string) (iceio.IO, error) {
		inner, err := iceio.LoadFS(ctx, props, "file://"+u.Path)
		if err != nil {
			return nil, err
		}
		return &countedIO{inner: inner}, nil
	})
}

// countedIO is a file system of the counted scheme: the local one, counting opens and whole-file reads.
type countedIO struct{ inner iceio.IO }

func countedPath(name string) string {
	return "file://" + strings.TrimPrefix(name, CountedScheme+"://")
}

func (c *countedIO) counter(name string) *countedFile {
	n, _ := countedReads.LoadOrStore(countedPath(name), new(countedFile))
	return n.(*countedFile)
}

func (c *countedIO) Open(name string) (iceio.File, error) {
	c.counter(name).opens.Add(1)
	return c.inner.Open(countedPath(name))
}

func (c *countedIO) ReadFile(name string) ([]byte, error) {
	c.counter(name).whole.Add(1)
	return c.inner.(iceio.ReadFileIO).ReadFile(countedPath(name))
}

func (c *countedIO) Remove(name string) error { return c.inner.Remove(countedPath(name)) }

func (c *countedIO) Create(name string) (iceio.FileWriter, error) {
	return c.inner.(iceio.WriteFileIO).Create(countedPath(name))
}

func (c *countedIO) WriteFile(name string, p []byte) error {
	return c.inner.(iceio.WriteFileIO).WriteFile(countedPath(name), p)
}

// FileReads returns how often the file at location (of the counted scheme) was opened and read whole so far.
func FileReads(location string) (opens, whole int64) {
	n, ok := countedReads.Load(countedPath(location))
	if !ok {
		return 0, 0
	}
	f := n.(*countedFile)
	return f.opens.Load(), f.whole.Load()
}

// CountedCatalog opens an embedded catalog (closed when the test ends) whose warehouse is in the counted scheme;
// dataReads returns how often the Parquet files under it were opened or read whole so far.
func CountedCatalog(t testing.TB) (cat icecatalog.Catalog, dataReads func() int64) {
	t.Helper()
	dir := t.TempDir()
	wh := filepath.Join(dir, "warehouse")
	if err := os.MkdirAll(wh, 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := catalog.Open(context.Background(), "sqlite://"+filepath.Join(dir, "catalog.db")+"?warehouse="+
		CountedScheme+"://"+filepath.ToSlash(wh))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.(icecatalog.Closer).Close() })
	prefix := "file://" + filepath.ToSlash(wh) + "/"
	return c, func() int64 {
		var n int64
		countedReads.Range(func(k, v any) bool {
			if p := k.(string); strings.HasPrefix(p, prefix) && strings.HasSuffix(p, ".parquet") {
				f := v.(*countedFile)
				n += f.opens.Load() + f.whole.Load()
			}
			return true
		})
		return n
	}
}
