package commit

import (
	"context"
	"sync"

	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/icewriter/iceberg/storage"
)

// Tables derives the table a commit leaves from the commit's response. Each derived table takes its file
// system from the table the catalog loaded, not from its predecessor: chaining FS functions through every
// earlier table would keep them all alive and make each file system lookup walk the chain.
type Tables struct {
	mu    sync.Mutex
	roots map[string]table.FSysF
}

// NewTables makes an empty Tables.
func NewTables() *Tables { return &Tables{roots: map[string]table.FSysF{}} }

// Loaded records a table as the catalog returned it.
func (d *Tables) Loaded(t *table.Table) *table.Table {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.roots[IdentKey(t.Identifier())] = t.FS
	return t
}

// Derive builds the table a commit left from prev, the table the commit was based on.
func (d *Tables) Derive(prev *table.Table, meta table.Metadata, loc string, cat table.CatalogIO) *table.Table {
	d.mu.Lock()
	fs, ok := d.roots[IdentKey(prev.Identifier())]
	if !ok {
		fs = prev.FS
		d.roots[IdentKey(prev.Identifier())] = fs
	}
	d.mu.Unlock()
	return table.New(prev.Identifier(), meta, loc, boundFS(fs), cat)
}

// boundFS binds the file system fsF returns to the context of each lookup. A catalog may cache one file
// system per table across lookups (iceberg-go's REST catalog does while vended credentials last), and a file
// system of package storage runs its requests on the context it was opened with: without this, every later
// upload and read would run on the context of the first lookup, cancelled or not.
func boundFS(fsF table.FSysF) table.FSysF {
	return func(ctx context.Context) (iceio.IO, error) {
		fs, err := fsF(ctx)
		if err != nil {
			return nil, err
		}
		return storage.WithContext(ctx, fs), nil
	}
}
