package catalog

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/apache/iceberg-go"
	icecatalog "github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"
	"github.com/uptrace/bun/driver/sqliteshim"

	"github.com/icewriter/iceberg/internal/redact"
	"github.com/icewriter/iceberg/internal/sqltx"

	// The embedded default stores files in local folders (and in memory for tests) through gocloud blob.
	_ "github.com/icewriter/iceberg/storage"
)

func init() {
	Register("sqlite", openSQLite)
}

// openSQLite opens the embedded SQLite catalog: sqlite:///abs/path/catalog.db or sqlite://rel/path/catalog.db
// (relative to the working directory), with an optional warehouse query parameter (a file://, mem:// or any
// registered storage URI). The warehouse defaults to a "warehouse" folder beside the database file. The
// database runs in WAL mode with a busy timeout so that several writers and processes can share it.
func openSQLite(ctx context.Context, u *url.URL, props iceberg.Properties) (icecatalog.Catalog, error) {
	p := u.Path
	if u.Host != "" { // sqlite://relative/dir/catalog.db
		p = u.Host + p
	} else if u.Opaque != "" { // sqlite:relative.db
		p = u.Opaque
	}
	if p == "" {
		return nil, fmt.Errorf("catalog: sqlite uri %q names no database file", redact.URL(u))
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return nil, fmt.Errorf("catalog: sqlite path %q: %w", p, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return nil, fmt.Errorf("catalog: sqlite folder: %w", err)
	}
	wh := props.Get("warehouse", "")
	if wh == "" {
		wh = "file://" + filepath.ToSlash(filepath.Join(filepath.Dir(abs), "warehouse"))
	} else if !strings.Contains(wh, "://") { // a bare path
		whAbs, err := filepath.Abs(wh)
		if err != nil {
			return nil, fmt.Errorf("catalog: warehouse path %q: %w", wh, err)
		}
		wh = "file://" + filepath.ToSlash(whAbs)
	}
	if strings.HasPrefix(wh, "file://") {
		if err := os.MkdirAll(strings.TrimPrefix(wh, "file://"), 0o755); err != nil {
			return nil, fmt.Errorf("catalog: warehouse folder: %w", err)
		}
	}
	name := props.Get("name", "default")
	delete(props, "name")
	props["warehouse"] = wh

	dsn := "file:" + filepath.ToSlash(abs) + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"
	db, err := sql.Open(sqliteshim.ShimName, dsn)
	if err != nil {
		return nil, fmt.Errorf("catalog: open sqlite %s: %w", abs, err)
	}
	cat, err := sqlcat.NewCatalog(name, db, sqlcat.SQLite, props)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("catalog: init sqlite catalog %s: %w", abs, err)
	}
	return &ownedDB{Catalog: cat, db: db, dialect: sqlcat.SQLite}, nil
}

// ownedDB closes the database handle it opened when the catalog is closed.
type ownedDB struct {
	*sqlcat.Catalog
	db      *sql.DB
	dialect sqlcat.SupportedDialect
}

// CommitTransaction commits changes to several tables in one database transaction: all of them apply or none
// does (an error wrapping table.ErrCommitFailed when a table moved since its commit was built). It makes the
// catalog a catalog.TransactionalCatalog, which iceberg-go's SQL catalog is not (see package sqltx).
func (c *ownedDB) CommitTransaction(ctx context.Context, commits []table.TableCommit) error {
	return sqltx.Commit(ctx, c.Catalog, c.db, c.dialect, commits)
}

// Close closes the catalog and its database.
func (c *ownedDB) Close() error {
	err := c.Catalog.Close()
	if cerr := c.db.Close(); err == nil {
		err = cerr
	}
	return err
}
