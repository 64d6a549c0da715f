//go:build integration

package sql_test

import (
	"context"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/catalogtest"

	"github.com/icewriter/iceberg/catalog"
	"github.com/icewriter/iceberg/internal/testenv"
)

func conformance(t *testing.T, envVar string) {
	dsn := testenv.Get(t, envVar)
	warehouse := "file://" + t.TempDir()
	catalogtest.RunCatalogTests(t, catalogtest.Config{
		SupportsNamespaceProperties: true,
		NewCatalog: func(t *testing.T) icecatalog.Catalog {
			cat, err := catalog.OpenWithProperties(context.Background(), dsn, iceberg.Properties{"warehouse": warehouse})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cat.(icecatalog.Closer).Close() })
			return cat
		},
	})
}

// TestPostgresConformance runs iceberg-go's catalog conformance suite on the sql catalog over PostgreSQL.
func TestPostgresConformance(t *testing.T) { conformance(t, testenv.PostgresDSN) }

// TestMariaDBConformance runs iceberg-go's catalog conformance suite on the sql catalog over MariaDB.
func TestMariaDBConformance(t *testing.T) { conformance(t, testenv.MySQLDSN) }

// TestWrongPassword: a refused password gives an error naming the server, never the password.
func TestWrongPassword(t *testing.T) {
	for _, v := range []string{testenv.PostgresDSN, testenv.MySQLDSN} {
		dsn := testenv.Get(t, v)
		// The test servers trust every local user: use an unknown user with a password, which is refused.
		dsn = strings.Replace(dsn, "://postgres@", "://nobody:Wr0ngPassw0rd@", 1)
		dsn = strings.Replace(dsn, "://root@", "://nobody:Wr0ngPassw0rd@", 1)
		_, err := catalog.Open(context.Background(), dsn)
		if err == nil {
			t.Fatalf("%s: open with a wrong user succeeded", v)
		}
		if strings.Contains(err.Error(), "Wr0ngPassw0rd") {
			t.Errorf("error prints the password: %v", err)
		}
		if !strings.Contains(err.Error(), "127.0.0.1") {
			t.Errorf("error does not name the server: %v", err)
		}
		t.Log(err)
	}
}
