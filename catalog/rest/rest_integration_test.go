//go:build integration

package rest_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/catalogtest"

	"github.com/icewriter/iceberg/catalog"
	"github.com/icewriter/iceberg/internal/testenv"
	_ "github.com/icewriter/iceberg/storage/s3"
)

// openREST opens the SeaweedFS REST catalog that scripts/integration.sh started.
func openREST(t *testing.T, secret string) (icecatalog.Catalog, error) {
	t.Helper()
	uri := testenv.Get(t, testenv.RESTURI)
	access, _ := testenv.Keys()
	wh := os.Getenv(testenv.RESTWarehouse)
	if wh == "" {
		wh = "s3://iceberg-tables"
	}
	props := iceberg.Properties{"credential": access + ":" + secret, "warehouse": wh}
	for k, v := range testenv.S3Props(testenv.Get(t, testenv.SeaweedS3Endpoint)) {
		props[k] = v
	}
	return catalog.OpenWithProperties(context.Background(), uri, props)
}

// TestConformance runs iceberg-go's catalog conformance suite against the SeaweedFS REST catalog.
func TestConformance(t *testing.T) {
	_, secret := testenv.Keys()
	catalogtest.RunCatalogTests(t, catalogtest.Config{
		SupportsNamespaceProperties: true,
		NewCatalog: func(t *testing.T) icecatalog.Catalog {
			cat, err := openREST(t, secret)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cat.(icecatalog.Closer).Close() })
			return cat
		},
	})
}

// TestWrongSecretReal: the real server refuses a wrong client secret with an error that names the endpoint and
// does not print the secret.
func TestWrongSecretReal(t *testing.T) {
	const wrong = "definitely-not-the-secret-9f8e7d"
	_, err := openREST(t, wrong)
	if err == nil {
		t.Fatal("open with a wrong secret succeeded")
	}
	msg := err.Error()
	if strings.Contains(msg, wrong) {
		t.Fatalf("error prints the secret: %s", msg)
	}
	endpoint := strings.Replace(testenv.Get(t, testenv.RESTURI), "rest://", "http://", 1)
	if !strings.Contains(msg, strings.TrimRight(endpoint, "/")) {
		t.Errorf("error does not name the endpoint %s: %s", endpoint, msg)
	}
	t.Log(msg)
}
