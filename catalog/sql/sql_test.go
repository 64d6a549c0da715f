package sql_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"

	"github.com/icewriter/iceberg/catalog"
	catsql "github.com/icewriter/iceberg/catalog/sql"
)

func parse(t *testing.T, uri string) catsql.Config {
	t.Helper()
	u, err := url.Parse(uri)
	if err != nil {
		t.Fatal(err)
	}
	props := iceberg.Properties{}
	for k, vs := range u.Query() {
		props[k] = vs[len(vs)-1]
	}
	cfg, err := catsql.Parse(u, props)
	if err != nil {
		t.Fatalf("Parse(%q): %v", uri, err)
	}
	return cfg
}

func TestParsePostgres(t *testing.T) {
	cfg := parse(t, "postgresql://ice:pw@127.0.0.1:5433/cat?sslmode=disable&warehouse=s3://b/wh&s3.endpoint=http://x")
	if cfg.Driver != "pgx" || cfg.Dialect != sqlcat.Postgres {
		t.Errorf("driver %q dialect %q", cfg.Driver, cfg.Dialect)
	}
	if cfg.DSN != "postgres://ice:pw@127.0.0.1:5433/cat?connect_timeout=10&sslmode=disable" {
		t.Errorf("dsn %q", cfg.DSN)
	}
	if cfg.Props["warehouse"] != "s3://b/wh" || cfg.Props["s3.endpoint"] != "http://x" {
		t.Errorf("props %v", cfg.Props)
	}
	if _, ok := cfg.Props["sslmode"]; ok {
		t.Errorf("driver parameter sslmode left in catalog props")
	}
}

func TestParseMySQL(t *testing.T) {
	cfg := parse(t, "mysql://root:pw@127.0.0.1:3307/cat?warehouse=file:///tmp/wh&charset=utf8mb4")
	if cfg.Driver != "mysql" || cfg.Dialect != sqlcat.MySQL {
		t.Errorf("driver %q dialect %q", cfg.Driver, cfg.Dialect)
	}
	if !strings.HasPrefix(cfg.DSN, "root:pw@tcp(127.0.0.1:3307)/cat?") || !strings.Contains(cfg.DSN, "charset=utf8mb4") {
		t.Errorf("dsn %q", cfg.DSN)
	}
	cfg = parse(t, "mysql://root@localhost/cat?socket=/run/mysqld.sock")
	if !strings.HasPrefix(cfg.DSN, "root@unix(/run/mysqld.sock)/cat") {
		t.Errorf("socket dsn %q", cfg.DSN)
	}
	cfg = parse(t, "mysql://u@dbhost/cat")
	if !strings.Contains(cfg.DSN, "tcp(dbhost:3306)") {
		t.Errorf("default port dsn %q", cfg.DSN)
	}
}

// TestPasswordNeverPrinted: a database that is not there gives an error that names it but not the password.
func TestPasswordNeverPrinted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, uri := range []string{
		"postgres://ice:Sup3rSecretPw@127.0.0.1:1/cat?sslmode=disable&connect_timeout=1",
		"mysql://ice:Sup3rSecretPw@127.0.0.1:1/cat?timeout=1s",
	} {
		_, err := catalog.Open(ctx, uri)
		if err == nil {
			t.Fatalf("%s: open succeeded", uri)
		}
		if strings.Contains(err.Error(), "Sup3rSecretPw") {
			t.Errorf("error prints the password: %v", err)
		}
		if !strings.Contains(err.Error(), "127.0.0.1:1") {
			t.Errorf("error does not name the server: %v", err)
		}
	}
}
