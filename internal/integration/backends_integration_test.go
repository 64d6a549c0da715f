//go:build integration

package integration_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/icewriter/iceberg/catalog"
	_ "github.com/icewriter/iceberg/catalog/rest"
	_ "github.com/icewriter/iceberg/catalog/sql"
	"github.com/icewriter/iceberg/internal/tabletest"
	"github.com/icewriter/iceberg/internal/testenv"
	_ "github.com/icewriter/iceberg/storage/s3"
)

// backend opens a catalog on real servers.
type backend struct {
	name string
	open func(t testing.TB) icecatalog.Catalog
}

const warehouseBucket = "icewriter"

// versityProps are the catalog properties that put the warehouse on versitygw's S3, under a fresh prefix.
func versityProps(t testing.TB) iceberg.Properties {
	t.Helper()
	endpoint := testenv.Get(t, testenv.VersityS3Endpoint)
	if err := testenv.EnsureBucket(context.Background(), endpoint, warehouseBucket); err != nil {
		t.Fatal(err)
	}
	p := iceberg.Properties{"warehouse": "s3://" + warehouseBucket + "/wh-" + uuid.NewString()[:8]}
	for k, v := range testenv.S3Props(endpoint) {
		p[k] = v
	}
	return p
}

func openREST(t testing.TB) icecatalog.Catalog {
	t.Helper()
	return openRESTVia(t, strings.TrimPrefix(testenv.Get(t, testenv.RESTURI), "rest://"))
}

// openRESTVia opens SeaweedFS's REST catalog at addr (host:port: the server, or a proxy in front of it), with
// the warehouse on SeaweedFS's S3.
func openRESTVia(t testing.TB, addr string) icecatalog.Catalog {
	t.Helper()
	return openRESTAt(t, addr, testenv.Get(t, testenv.SeaweedS3Endpoint))
}

// openRESTAt opens SeaweedFS's REST catalog at addr with the warehouse's files read and written through the
// S3 endpoint s3 (SeaweedFS's S3, or a proxy in front of it).
func openRESTAt(t testing.TB, addr, s3 string) icecatalog.Catalog {
	t.Helper()
	access, secret := testenv.Keys()
	wh := os.Getenv(testenv.RESTWarehouse)
	if wh == "" {
		wh = "s3://iceberg-tables"
	}
	props := iceberg.Properties{"credential": access + ":" + secret, "warehouse": wh}
	for k, v := range testenv.S3Props(s3) {
		props[k] = v
	}
	cat, err := catalog.OpenWithProperties(context.Background(), "rest://"+addr, props)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = catalog.Backend(cat).(icecatalog.Closer).Close() })
	return cat
}

func openDSN(envVar string) func(t testing.TB) icecatalog.Catalog {
	return func(t testing.TB) icecatalog.Catalog {
		t.Helper()
		dsn := testenv.Get(t, envVar)
		cat, err := catalog.OpenWithProperties(context.Background(), dsn, versityProps(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cat.(icecatalog.Closer).Close() })
		return cat
	}
}

func openSQLiteVersity(t testing.TB) icecatalog.Catalog {
	t.Helper()
	props := versityProps(t)
	cat, err := catalog.OpenWithProperties(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "catalog.db"), props)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cat.(icecatalog.Closer).Close() })
	return cat
}

// backends are every catalog and store combination the suite runs on.
var backends = []backend{
	{"rest-seaweedfs", openREST},
	{"sqlite-versitygw", openSQLiteVersity},
	{"postgres-versitygw", openDSN(testenv.PostgresDSN)},
	{"mariadb-versitygw", openDSN(testenv.MySQLDSN)},
}

// newIdent returns a table identifier in a fresh namespace.
func newIdent(prefix string) table.Identifier {
	return table.Identifier{prefix + "_" + strings.ReplaceAll(uuid.NewString()[:8], "-", ""), "events"}
}

// readIDs scans the table with iceberg-go's scanner and counts the rows per id; values maps id to the value
// column, to compare against the model.
func readIDs(t testing.TB, cat icecatalog.Catalog, ident table.Identifier) (counts map[int64]int, values map[int64]float64) {
	t.Helper()
	counts, values = map[int64]int{}, map[int64]float64{}
	sc, it := tabletest.Records(t, tabletest.Load(t, cat, ident), table.WithSelectedFields("id", "value"))
	idIdx, valIdx := sc.FieldIndices("id")[0], sc.FieldIndices("value")[0]
	for rec := range it {
		ids := rec.Column(idIdx).(*array.Int64)
		vals := rec.Column(valIdx).(*array.Float64)
		for r := 0; r < int(rec.NumRows()); r++ {
			counts[ids.Value(r)]++
			values[ids.Value(r)] = vals.Value(r)
		}
	}
	return counts, values
}

// checkExactly fails unless the table holds each id of want exactly once (with its value) and nothing else.
func checkExactly(t testing.TB, cat icecatalog.Catalog, ident table.Identifier, want map[int64]float64) {
	t.Helper()
	counts, values := readIDs(t, cat, ident)
	if len(counts) != len(want) {
		missing, extra := 0, 0
		for id := range want {
			if counts[id] == 0 {
				missing++
			}
		}
		for id := range counts {
			if _, ok := want[id]; !ok {
				extra++
			}
		}
		t.Fatalf("table has %d ids, model %d (%d missing, %d unexpected)", len(counts), len(want), missing, extra)
	}
	for id, v := range want {
		if counts[id] != 1 {
			t.Fatalf("id %d appears %d times", id, counts[id])
		}
		if values[id] != v {
			t.Fatalf("id %d value %v, want %v", id, values[id], v)
		}
	}
}

func forEachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { f(t, b) })
	}
}

func describe(opts map[string]any) string {
	var parts []string
	for k, v := range opts {
		parts = append(parts, fmt.Sprintf("%s=%v", k, v))
	}
	return strings.Join(parts, " ")
}
