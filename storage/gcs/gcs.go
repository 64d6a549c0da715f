// Package gcs serves gs:// table locations from Google Cloud Storage through gocloud.dev's gcsblob. Import it
// for its side effect:
//
//	import _ "github.com/icewriter/iceberg/storage/gcs"
//
//	cat, err := catalog.Open(ctx, "sqlite:///var/lib/app/catalog.db?warehouse=gs://bucket/warehouse")
//
// Credentials, in order: gcs.no-auth=true (anonymous), gcs.oauth2.token (with gcs.oauth2.token-expires-at,
// as a REST catalog vends them; the cached client is reopened before expiry by package storage), gcs.jsonkey
// or gcs.keypath (a service account key, or another type named by gcs.credtype), else Application Default
// Credentials. gcs.service.host or gcs.endpoint point at another endpoint (an emulator), gcs.usejsonapi=true
// reads through the JSON API. icewriter.request-timeout (default 60s) bounds how long a connection may go
// without moving a byte; the GCS client retries what fails so, and package storage re-reads cut-off bodies.
package gcs

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	iceio "github.com/apache/iceberg-go/io"
	icegcs "github.com/apache/iceberg-go/io/gocloud/gcs" // also registers iceberg-go's own factory, replaced below
	"gocloud.dev/blob"
	"gocloud.dev/blob/gcsblob"
	"gocloud.dev/gcp"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/icewriter/iceberg/internal/redact"
	"github.com/icewriter/iceberg/storage"
)

// Schemes are the URI schemes this package serves.
var Schemes = []string{"gs"}

const scope = "https://www.googleapis.com/auth/devstorage.read_write"

func init() {
	storage.Register(Open, Schemes...)
}

// Credentials resolves the credentials the properties name; nil means anonymous access.
func Credentials(ctx context.Context, props map[string]string) (*google.Credentials, error) {
	if b, err := strconv.ParseBool(props[iceio.GCSNoAuth]); err == nil && b {
		return nil, nil
	}
	if tok := props[iceio.GCSOAuthToken]; tok != "" {
		t := &oauth2.Token{AccessToken: tok}
		if ms, err := strconv.ParseInt(props[iceio.GCSOAuthExpiresAt], 10, 64); err == nil {
			t.Expiry = time.UnixMilli(ms)
		}
		return &google.Credentials{TokenSource: oauth2.StaticTokenSource(t)}, nil
	}
	credType := google.ServiceAccount
	if v := props[iceio.GCSCredType]; v != "" {
		credType = google.CredentialsType(v)
	}
	key := []byte(props[iceio.GCSJSONKey])
	if len(key) == 0 && props[iceio.GCSKeyPath] != "" {
		var err error
		if key, err = os.ReadFile(props[iceio.GCSKeyPath]); err != nil {
			return nil, fmt.Errorf("storage/gcs: read %s: %w", iceio.GCSKeyPath, err)
		}
	}
	if len(key) > 0 {
		c, err := google.CredentialsFromJSONWithType(ctx, key, credType, scope)
		if err != nil {
			return nil, fmt.Errorf("storage/gcs: parse key (set %s if it is not a service account): %w", iceio.GCSCredType, err)
		}
		return c, nil
	}
	c, err := gcp.DefaultCredentials(ctx)
	if err != nil {
		return nil, fmt.Errorf("storage/gcs: no credentials (set %s=true for public buckets): %w", iceio.GCSNoAuth, err)
	}
	return c, nil
}

// Open opens the bucket u.Host configured by props. It is registered with package storage for Schemes.
func Open(ctx context.Context, u *url.URL, props map[string]string) (*blob.Bucket, error) {
	if u.Host == "" {
		return nil, fmt.Errorf("storage/gcs: location %q names no bucket", redact.URL(u))
	}
	creds, err := Credentials(ctx, props)
	if err != nil {
		return nil, redact.Error(err, redact.Secrets(props)...)
	}
	timeout, err := storage.RequestTimeout(props)
	if err != nil {
		return nil, err
	}
	// A transport of its own with the request timeout on each connection: a stalled upload or read fails (and
	// is retried by the GCS client) instead of hanging.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	storage.WithIdleTimeout(tr, timeout)
	var client *gcp.HTTPClient
	if creds == nil {
		client = gcp.NewAnonymousHTTPClient(tr)
	} else if client, err = gcp.NewHTTPClient(tr, gcp.CredentialsTokenSource(creds)); err != nil {
		return nil, fmt.Errorf("storage/gcs: http client: %w", err)
	}
	b, err := gcsblob.OpenBucket(ctx, client, u.Host, icegcs.ParseGCSConfig(props))
	if err != nil {
		return nil, redact.Error(fmt.Errorf("storage/gcs: open bucket %s: %w", u.Host, err), redact.Secrets(props)...)
	}
	return b, nil
}
