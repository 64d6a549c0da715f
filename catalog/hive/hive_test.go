package hive_test

import (
	"net/url"
	"testing"

	"github.com/apache/iceberg-go"

	"github.com/icewriter/iceberg/catalog/hive"
)

func TestProperties(t *testing.T) {
	for in, want := range map[string]string{
		"thrift://metastore:9083?warehouse=s3://b/wh": "thrift://metastore:9083",
		"thrift://metastore":                          "thrift://metastore:9083",
		"thrift://[::1]:1234":                         "thrift://[::1]:1234",
	} {
		u, _ := url.Parse(in)
		p, err := hive.Properties(u, iceberg.Properties{"warehouse": "s3://b/wh"})
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if p["uri"] != want || p["warehouse"] != "s3://b/wh" {
			t.Errorf("%s: uri %q warehouse %q", in, p["uri"], p["warehouse"])
		}
	}
	u, _ := url.Parse("thrift:///nohost")
	if _, err := hive.Properties(u, nil); err == nil {
		t.Error("no error for a uri without host")
	}
}
