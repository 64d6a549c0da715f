package gcs_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/icewriter/iceberg/storage/gcs"
)

func TestCredentials(t *testing.T) {
	ctx := context.Background()
	c, err := gcs.Credentials(ctx, map[string]string{"gcs.no-auth": "true"})
	if err != nil || c != nil {
		t.Errorf("no-auth: %v, %v", c, err)
	}
	c, err = gcs.Credentials(ctx, map[string]string{"gcs.oauth2.token": "tok", "gcs.oauth2.token-expires-at": "4102444800000"})
	if err != nil || c == nil {
		t.Fatalf("token: %v", err)
	}
	tok, err := c.TokenSource.Token()
	if err != nil || tok.AccessToken != "tok" || tok.Expiry.Year() != 2100 {
		t.Errorf("token: %+v, %v", tok, err)
	}
	_, err = gcs.Credentials(ctx, map[string]string{"gcs.jsonkey": `{"type":"authorized_user"}`})
	if err == nil {
		t.Error("a key of the wrong type was accepted")
	}
}

func TestOpenAnonymous(t *testing.T) {
	u, _ := url.Parse("gs://bucket/path/file.parquet")
	b, err := gcs.Open(context.Background(), u, map[string]string{"gcs.no-auth": "true", "gcs.endpoint": "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	_ = b.Close()
	if _, err := gcs.Open(context.Background(), &url.URL{Scheme: "gs"}, nil); err == nil || !strings.Contains(err.Error(), "bucket") {
		t.Errorf("no bucket: %v", err)
	}
}
