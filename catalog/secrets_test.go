package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	icecatalog "github.com/apache/iceberg-go/catalog"
	icerest "github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"

	"github.com/icewriter/iceberg/catalog"
	_ "github.com/icewriter/iceberg/catalog/glue"
	_ "github.com/icewriter/iceberg/catalog/hadoop"
	_ "github.com/icewriter/iceberg/catalog/hive"
	_ "github.com/icewriter/iceberg/catalog/rest"
	_ "github.com/icewriter/iceberg/catalog/sql"
	"github.com/icewriter/iceberg/internal/redact/redacttest"
)

// Secrets placed in URIs and properties below; none may appear in any error.
const (
	uriPassword = "uri-pw-3141"
	uriSecret   = "uri-secret-2718"
	propSecret  = "prop-secret-1618"
	propToken   = "prop-token-1414"
)

var allSecrets = []string{uriPassword, uriSecret, propSecret, propToken}

// secretProps are secret properties of every kind a backend may be given.
func secretProps() iceberg.Properties {
	return iceberg.Properties{"s3.secret-access-key": propSecret, "s3.session-token": propToken,
		"glue.secret-access-key": propSecret, "adls.sas-token.acct": propToken}
}

// TestOpenErrorsHoldNoSecrets: every backend's Open error path, with secrets in the URI (password, secret
// query parameters) and in the properties, gives an error in whose message, formatted forms and unwrap chain
// none of them appears.
func TestOpenErrorsHoldNoSecrets(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q := "s3.secret-access-key=" + uriSecret + "&credential=id:" + uriSecret
	for name, uri := range map[string]string{
		"sqlite without a file":     "sqlite://?" + q,
		"sqlite with user info":     "sqlite://me:" + uriPassword + "@?" + q,
		"hadoop without warehouse":  "hadoop://?" + q,
		"hadoop with user info":     "hadoop://me:" + uriPassword + "@?" + q,
		"hadoop on s3 unsafe":       "hadoop://?warehouse=s3://AKID:" + uriPassword + "@bucket/wh&" + q,
		"rest without host":         "rest:///?" + q,
		"postgres unreachable":      "postgres://ice:" + uriPassword + "@127.0.0.1:1/cat?sslmode=disable&connect_timeout=1&" + q,
		"mysql unreachable":         "mysql://ice:" + uriPassword + "@127.0.0.1:1/cat?timeout=1s&" + q,
		"mysql bad parameter":       "mysql://ice:" + uriPassword + "@127.0.0.1:1/cat?timeout=notaduration&" + q,
		"hive without host":         "thrift:///?" + q,
		"unparsable uri":            "rest://me:" + uriPassword + "@h:port/?" + q,
		"unknown scheme with query": "nosuch://me:" + uriPassword + "@h/?" + q,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := catalog.OpenWithProperties(ctx, uri, secretProps())
			if err == nil {
				t.Fatal("open succeeded")
			}
			assertNoSecrets(t, err, allSecrets...)
		})
	}
}

// TestRESTOpenEchoHoldsNoSecrets: a REST server that refuses the OAuth2 exchange and echoes the request
// (headers and form body) gives an Open error without the client secret, the API key header or the basic
// credentials, that still unwraps to rest.ErrOAuthError or rest.ErrUnauthorized.
func TestRESTOpenEchoHoldsNoSecrets(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = fmt.Fprintf(w, `{"error":"invalid_client","error_description":"refused %s headers %v form %s"}`,
			r.URL, strings.ReplaceAll(fmt.Sprint(r.Header), `"`, `'`), r.PostForm.Encode())
	}))
	defer srv.Close()
	uri := strings.Replace(srv.URL, "http://", "rest://client:"+uriPassword+"@", 1) + "?s3.secret-access-key=" + uriSecret
	_, err := catalog.OpenWithProperties(context.Background(), uri, iceberg.Properties{"header.X-Api-Key": propToken})
	if err == nil {
		t.Fatal("open succeeded")
	}
	assertNoSecrets(t, err, allSecrets...)
	if !errors.Is(err, icerest.ErrOAuthError) && !errors.Is(err, icerest.ErrUnauthorized) {
		t.Errorf("error does not unwrap to the REST sentinels: %v", err)
	}
}

// TestOpenedCatalogErrorsHoldNoSecrets: the catalogs Open returns mask their own errors too (a server or
// driver may quote what it was sent long after Open), keep iceberg-go's sentinels, and still implement the
// optional interfaces their backend implements.
func TestOpenedCatalogErrorsHoldNoSecrets(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	missing := table.Identifier{"ns", "missing"}

	sqlite, err := catalog.OpenWithProperties(ctx, "sqlite://"+filepath.Join(dir, "c.db")+"?s3.secret-access-key="+uriSecret, secretProps())
	if err != nil {
		t.Fatal(err)
	}
	defer sqlite.(icecatalog.Closer).Close()
	_, err = sqlite.LoadTable(ctx, missing)
	if !errors.Is(err, icecatalog.ErrNoSuchTable) {
		t.Errorf("sqlite LoadTable: %v, want ErrNoSuchTable", err)
	}
	assertNoSecrets(t, err, allSecrets...)
	if _, ok := sqlite.(icecatalog.TransactionalCatalog); ok != backendIs[icecatalog.TransactionalCatalog](sqlite) {
		t.Error("TransactionalCatalog: the wrapper answers differently from its backend")
	}
	if _, ok := sqlite.(icecatalog.PurgeableTable); ok != backendIs[icecatalog.PurgeableTable](sqlite) {
		t.Error("PurgeableTable: the wrapper answers differently from its backend")
	}

	hadoop, err := catalog.OpenWithProperties(ctx, "hadoop://"+filepath.Join(dir, "wh")+"?token="+uriSecret, secretProps())
	if err != nil {
		t.Fatal(err)
	}
	_, err = hadoop.LoadTable(ctx, missing)
	if !errors.Is(err, icecatalog.ErrNoSuchTable) {
		t.Errorf("hadoop LoadTable: %v, want ErrNoSuchTable", err)
	}
	assertNoSecrets(t, err, allSecrets...)

	// Glue and Hive connect lazily: their first call fails against a closed port.
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	glue, err := catalog.OpenWithProperties(ctx, "glue://?region=eu-west-1&endpoint=http://127.0.0.1:1&glue.max-retries=1",
		iceberg.Properties{"glue.access-key-id": "AKIDEXAMPLE", "glue.secret-access-key": propSecret, "glue.session-token": propToken})
	if err != nil {
		t.Fatal(err)
	}
	_, err = glue.LoadTable(ctx, missing)
	assertNoSecrets(t, err, allSecrets...)

	hive, err := catalog.OpenWithProperties(ctx, "thrift://127.0.0.1:1?token="+uriSecret, secretProps())
	if err == nil {
		_, err = hive.ListNamespaces(ctx, nil)
	}
	assertNoSecrets(t, err, allSecrets...)
}

func backendIs[T any](cat icecatalog.Catalog) bool {
	_, ok := catalog.Backend(cat).(T)
	return ok
}

// assertNoSecrets fails when err is nil, or when its message, its %+v and %#v forms, or any error reachable
// through Unwrap() error and Unwrap() []error holds one of the secrets.
func assertNoSecrets(t *testing.T, err error, secrets ...string) {
	t.Helper()
	if err == nil {
		t.Error("no error")
		return
	}
	for _, leak := range redacttest.Leaks(err, secrets...) {
		t.Error(leak)
	}
	t.Log(err)
}
