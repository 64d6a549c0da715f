// Package sql registers iceberg-go's SQL catalog on PostgreSQL and MySQL/MariaDB with package catalog, under the
// schemes postgres, postgresql and mysql. Import it for its side effect:
//
//	import _ "github.com/icewriter/iceberg/catalog/sql"
//
//	cat, err := catalog.Open(ctx, "postgres://iceberg:secret@db.internal:5432/catalog?sslmode=disable&warehouse=s3://bucket/wh")
//	cat, err := catalog.Open(ctx, "mysql://iceberg:secret@db.internal:3306/catalog?warehouse=s3://bucket/wh")
//
// The URI is the database's DSN. Query parameters are split in two: names without a dot (sslmode,
// connect_timeout, tls, charset, ...) configure the database driver, except the catalog's own ones (warehouse,
// name, init_catalog_tables); names with a dot (s3.endpoint, ...) and every property given to
// catalog.OpenWithProperties are catalog properties. PostgreSQL goes through pgx (its URL DSN as is), MySQL
// and MariaDB through go-sql-driver/mysql (mysql://user:pass@host:port/db becomes user:pass@tcp(host:port)/db;
// ?socket=/path/mysqld.sock connects through a Unix socket instead). The catalog tables (iceberg_tables,
// iceberg_namespace_properties) are created when missing unless init_catalog_tables=false.
//
// Lost compare-and-swap races come back from iceberg-go wrapped in table.ErrCommitFailed; errors are wrapped,
// never string-matched, and never print the DSN's password.
package sql

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	icecatalog "github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"
	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver

	"github.com/icewriter/iceberg/catalog"
	"github.com/icewriter/iceberg/internal/redact"
	"github.com/icewriter/iceberg/internal/sqltx"
)

func init() {
	catalog.Register("postgres", open)
	catalog.Register("postgresql", open)
	catalog.Register("mysql", open)
}

// catalogKeys are query parameters without a dot that belong to the catalog, not to the driver.
var catalogKeys = map[string]bool{"warehouse": true, "name": true, "init_catalog_tables": true}

// Config is what a URI resolves to: the database/sql driver name and DSN, the iceberg-go dialect and the
// catalog properties.
type Config struct {
	Driver  string
	DSN     string
	Dialect sqlcat.SupportedDialect
	Props   iceberg.Properties
}

// Parse resolves a postgres://, postgresql:// or mysql:// URI and the merged properties into a Config.
func Parse(u *url.URL, props iceberg.Properties) (Config, error) {
	p := maps.Clone(props)
	if p == nil {
		p = iceberg.Properties{}
	}
	driverParams := url.Values{}
	for k, vs := range u.Query() {
		if strings.Contains(k, ".") || catalogKeys[k] {
			continue
		}
		driverParams[k] = vs
		delete(p, k)
	}
	switch strings.ToLower(u.Scheme) {
	case "postgres", "postgresql":
		if driverParams.Get("connect_timeout") == "" {
			driverParams.Set("connect_timeout", "10")
		}
		d := *u
		d.Scheme = "postgres"
		d.RawQuery = driverParams.Encode()
		d.Fragment = ""
		return Config{Driver: "pgx", DSN: d.String(), Dialect: sqlcat.Postgres, Props: p}, nil
	case "mysql":
		cfg := mysql.NewConfig()
		if u.User != nil {
			cfg.User = u.User.Username()
			cfg.Passwd, _ = u.User.Password()
		}
		if sock := driverParams.Get("socket"); sock != "" {
			cfg.Net, cfg.Addr = "unix", sock
			driverParams.Del("socket")
		} else {
			host := u.Host
			if host == "" {
				host = "127.0.0.1"
			}
			if u.Port() == "" {
				host = net.JoinHostPort(strings.Trim(host, "[]"), "3306")
			}
			cfg.Net, cfg.Addr = "tcp", host
		}
		cfg.DBName = strings.TrimPrefix(u.Path, "/")
		if driverParams.Get("timeout") == "" {
			cfg.Timeout = 10 * time.Second
		}
		dsn := cfg.FormatDSN()
		if len(driverParams) > 0 {
			sep := "?"
			if strings.Contains(dsn, "?") {
				sep = "&"
			}
			dsn += sep + driverParams.Encode()
		}
		if _, err := mysql.ParseDSN(dsn); err != nil {
			return Config{}, fmt.Errorf("catalog/sql: mysql uri %s: %w", redact.URL(u), redact.Error(err, redact.URLSecrets(u)...))
		}
		return Config{Driver: "mysql", DSN: dsn, Dialect: sqlcat.MySQL, Props: p}, nil
	default:
		return Config{}, fmt.Errorf("catalog/sql: unsupported scheme %q (want postgres, postgresql or mysql)", u.Scheme)
	}
}

func open(ctx context.Context, u *url.URL, props iceberg.Properties) (icecatalog.Catalog, error) {
	cfg, err := Parse(u, props)
	if err != nil {
		return nil, err
	}
	secrets := append(redact.URLSecrets(u), redact.Secrets(cfg.Props)...)
	where := redact.URL(&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path})
	fail := func(what string, err error) error {
		return redact.Error(fmt.Errorf("catalog/sql: %s %s: %w", what, where, err), secrets...)
	}
	db, err := sql.Open(cfg.Driver, cfg.DSN)
	if err != nil {
		return nil, fail("open", err)
	}
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fail("connect to", err)
	}
	name := cfg.Props.Get("name", "sql")
	delete(cfg.Props, "name")
	cat, err := sqlcat.NewCatalog(name, db, cfg.Dialect, cfg.Props)
	if err != nil {
		_ = db.Close()
		return nil, fail("init catalog on", err)
	}
	return &ownedDB{Catalog: cat, db: db, dialect: cfg.Dialect}, nil
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

// Close closes the catalog and its database handle.
func (c *ownedDB) Close() error {
	err := c.Catalog.Close()
	if cerr := c.db.Close(); err == nil {
		err = cerr
	}
	return err
}
