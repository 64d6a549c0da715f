package hadoop_test

import (
	"context"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/apache/iceberg-go"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/catalogtest"

	"github.com/icewriter/iceberg/catalog"
	"github.com/icewriter/iceberg/catalog/hadoop"
)

func TestWarehouse(t *testing.T) {
	u, _ := url.Parse("hadoop:///var/wh")
	if wh, err := hadoop.Warehouse(u, iceberg.Properties{}); err != nil || wh != "file:///var/wh" {
		t.Errorf("got %q, %v", wh, err)
	}
	u, _ = url.Parse("hadoop://?warehouse=s3://b/wh")
	if wh, err := hadoop.Warehouse(u, iceberg.Properties{"warehouse": "s3://b/wh"}); err != nil || wh != "s3://b/wh" {
		t.Errorf("got %q, %v", wh, err)
	}
	u, _ = url.Parse("hadoop://")
	if _, err := hadoop.Warehouse(u, iceberg.Properties{}); err == nil {
		t.Error("no error without a warehouse")
	}
}

// TestConformance runs iceberg-go's catalog conformance suite on a local Hadoop warehouse.
func TestConformance(t *testing.T) {
	catalogtest.RunCatalogTests(t, catalogtest.Config{
		NewCatalog: func(t *testing.T) icecatalog.Catalog {
			cat, err := catalog.Open(context.Background(), "hadoop://"+filepath.Join(t.TempDir(), "wh"))
			if err != nil {
				t.Fatal(err)
			}
			return cat
		},
	})
}
