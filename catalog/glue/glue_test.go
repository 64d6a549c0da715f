package glue_test

import (
	"context"
	"net/url"
	"testing"

	"github.com/apache/iceberg-go"
	iceglue "github.com/apache/iceberg-go/catalog/glue"

	"github.com/icewriter/iceberg/catalog"
	"github.com/icewriter/iceberg/catalog/glue"
)

func TestProperties(t *testing.T) {
	u, _ := url.Parse("glue://123456789012?region=eu-west-1&warehouse=s3://b/wh")
	p, err := glue.Properties(u, iceberg.Properties{"region": "eu-west-1", "warehouse": "s3://b/wh", "endpoint": "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{iceglue.Region: "eu-west-1", iceglue.CatalogIdKey: "123456789012",
		iceglue.Endpoint: "http://127.0.0.1:1", "warehouse": "s3://b/wh", "type": "glue"} {
		if p[k] != v {
			t.Errorf("%s = %q, want %q", k, p[k], v)
		}
	}
	if _, ok := p["region"]; ok {
		t.Error("short alias region left in properties")
	}
}

// TestOpen builds the client without contacting AWS (Glue is called lazily).
func TestOpen(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	cat, err := catalog.Open(context.Background(), "glue://?region=eu-west-1&warehouse=s3://b/wh")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := catalog.Backend(cat).(*iceglue.Catalog); !ok {
		t.Fatalf("got %T", catalog.Backend(cat))
	}
}
