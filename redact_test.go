package iceberg_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	icecatalog "github.com/apache/iceberg-go/catalog"
	icerest "github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"

	iw "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/catalog"
	_ "github.com/icewriter/iceberg/catalog/rest"
	"github.com/icewriter/iceberg/internal/redact/redacttest"
	"github.com/icewriter/iceberg/internal/seed"
)

// Secrets of the echoing REST catalog below. The client secret and the API key header are known to the
// catalog Open returns; the access token is issued by the server, so only its shape can give it away.
const (
	echoClientSecret = "cs-4f1d2e9a7b"
	echoAPIKey       = "hk-77aa9c31e0"
	echoAccessToken  = "at-5be0c1d2f3a4"
	echoStorageKey   = "sk-0a9b8c7d6e"
)

var echoSecrets = []string{echoClientSecret, echoAPIKey, echoAccessToken, echoStorageKey}

// echoREST is a REST catalog serving one table (metadata taken from a table created in an embedded catalog)
// whose error replies quote the whole request: method, URL, every header and the body, as a careless server or
// proxy does. Commits are always refused (409); loads are refused (403) once failLoads is set.
type echoREST struct {
	ident     table.Identifier
	metaLoc   string
	metadata  json.RawMessage
	failLoads atomic.Bool
	mu        sync.Mutex
	commits   int
}

func (f *echoREST) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	tablePath := "/v1/namespaces/" + f.ident[0] + "/tables/" + f.ident[1]
	switch {
	case strings.HasSuffix(r.URL.Path, "/oauth/tokens"):
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": echoAccessToken, "token_type": "bearer", "expires_in": 3600})
	case strings.HasSuffix(r.URL.Path, "/config"):
		_, _ = w.Write([]byte(`{"defaults":{},"overrides":{}}`))
	case r.Method == http.MethodGet && r.URL.Path == tablePath && !f.failLoads.Load():
		_ = json.NewEncoder(w).Encode(map[string]any{"metadata-location": f.metaLoc, "metadata": f.metadata, "config": map[string]string{}})
	case r.Method == http.MethodGet && r.URL.Path == tablePath:
		f.echo(w, r, body, http.StatusForbidden, "ForbiddenException")
	case r.Method == http.MethodPost && r.URL.Path == tablePath:
		f.mu.Lock()
		f.commits++
		f.mu.Unlock()
		f.echo(w, r, body, http.StatusConflict, "CommitFailedException")
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/namespaces/"):
		f.echo(w, r, body, http.StatusNotFound, "NoSuchTableException")
	default:
		f.echo(w, r, body, http.StatusBadRequest, "BadRequestException")
	}
}

// commitCount returns the commits the server refused so far.
func (f *echoREST) commitCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.commits
}

// echo replies with an error whose message, and stack, quote the request.
func (f *echoREST) echo(w http.ResponseWriter, r *http.Request, body []byte, status int, typ string) {
	var names []string
	for k := range r.Header {
		names = append(names, k)
	}
	sort.Strings(names)
	var req strings.Builder
	fmt.Fprintf(&req, "%s %s\n", r.Method, r.URL.String())
	for _, k := range names {
		fmt.Fprintf(&req, "%s: %s\n", k, strings.Join(r.Header[k], ", "))
	}
	req.Write(body)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"message": "refused request " + req.String(), "type": typ, "code": status,
		"stack": []string{fmt.Sprint(r.Header), string(body)},
	}})
}

// newEchoREST creates the table in an embedded catalog (so that its files live in a local warehouse) and serves
// its metadata.
func newEchoREST(t *testing.T) (*echoREST, *httptest.Server) {
	t.Helper()
	ctx := context.Background()
	ident := table.Identifier{"sec", "events"}
	w, err := iw.NewWriter(ctx, openCatalog(t), ident, iw.WithCreate(seed.Schema))
	if err != nil {
		t.Fatal(err)
	}
	tbl := w.Table()
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	meta, err := os.ReadFile(strings.TrimPrefix(tbl.MetadataLocation(), "file://"))
	if err != nil {
		t.Fatal(err)
	}
	f := &echoREST{ident: ident, metaLoc: tbl.MetadataLocation(), metadata: meta}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

// openEchoREST opens the echoing server through catalog.Open, with the secrets in the URI and the properties.
func openEchoREST(t *testing.T, srv *httptest.Server) icecatalog.Catalog {
	t.Helper()
	uri := strings.Replace(srv.URL, "http://", "rest://", 1) + "?credential=client:" + echoClientSecret
	cat, err := catalog.OpenWithProperties(context.Background(), uri, iceberg.Properties{
		"header.X-Api-Key": echoAPIKey, "s3.secret-access-key": echoStorageKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cat.(icecatalog.Closer).Close() })
	return cat
}

// TestSecretsNotInWriterErrors: a REST catalog that echoes every request in its error replies (the bearer token
// it issued, the API key header, the commit body) gives NewWriter, Flush, Close and LastCheckpoint errors
// and log lines that hold none of the secrets, in their message, %+v form or any error of their unwrap
// chain, while errors.Is still finds the sentinels. It holds both for a catalog from catalog.Open (which
// knows the secrets) and for the backend's own catalog handed to NewWriter (only secret shapes are known).
func TestSecretsNotInWriterErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		backend bool
	}{{"catalog.Open", false}, {"user-built catalog", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			f, srv := newEchoREST(t)
			cat := openEchoREST(t, srv)
			if tc.backend {
				cat = catalog.Backend(cat)
				if _, ok := cat.(*icerest.Catalog); !ok {
					t.Fatalf("Backend gave a %T", cat)
				}
			}
			var logs bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

			_, err := iw.NewWriter(ctx, cat, table.Identifier{"sec", "missing"}, iw.WithLogger(logger))
			assertNoSecrets(t, "NewWriter", err, echoSecrets...)
			if !errors.Is(err, icecatalog.ErrNoSuchTable) {
				t.Errorf("NewWriter on a missing table: %v, want ErrNoSuchTable", err)
			}

			// The short commit timeout ends the refused run quickly; its first retry, which the log check below
			// needs, is made however long the first attempt took.
			w, err := iw.NewWriter(ctx, cat, f.ident, iw.WithLogger(logger), iw.WithCommitTimeout(300*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			writeSeed(t, w, seed.New(0, 1), 10)
			err = w.Flush(ctx)
			assertNoSecrets(t, "Flush", err, echoSecrets...)
			for _, s := range []error{iw.ErrWriterFailed, table.ErrCommitFailed, icerest.ErrCommitFailed} {
				if !errors.Is(err, s) {
					t.Errorf("Flush error %v: errors.Is(%v) = false", err, s)
				}
			}
			if f.commitCount() == 0 {
				t.Fatal("no commit reached the server")
			}
			if !strings.Contains(err.Error(), "refused request POST") {
				t.Errorf("the server's reply was masked away entirely: %v", err)
			}

			f.failLoads.Store(true)
			_, _, err = w.LastCheckpoint(ctx)
			assertNoSecrets(t, "LastCheckpoint", err, echoSecrets...)
			if !errors.Is(err, icerest.ErrForbidden) {
				t.Errorf("LastCheckpoint: %v, want rest.ErrForbidden", err)
			}
			_, _, err = iw.LastCheckpoint(ctx, cat, f.ident, "some-writer")
			assertNoSecrets(t, "iceberg.LastCheckpoint", err, echoSecrets...)
			if !errors.Is(err, icerest.ErrForbidden) {
				t.Errorf("iceberg.LastCheckpoint: %v, want rest.ErrForbidden", err)
			}
			err = w.Close(ctx)
			assertNoSecrets(t, "Close", err, echoSecrets...)

			out := logs.String()
			if !strings.Contains(out, "commit attempt failed") || !strings.Contains(out, "writer stopped") {
				t.Errorf("expected the commit failures to be logged:\n%s", out)
			}
			for _, s := range echoSecrets {
				if strings.Contains(out, s) {
					t.Errorf("log output holds %q:\n%s", s, out)
				}
			}
		})
	}
}

// TestSecretsNotInCommitterErrors: the coordinator's committer masks a server's echo as a Writer does.
func TestSecretsNotInCommitterErrors(t *testing.T) {
	_, srv := newEchoREST(t)
	cat := catalog.Backend(openEchoREST(t, srv))
	c := iw.NewCatalogCommitter(cat, 200*time.Millisecond)
	_, err := c.Commit(context.Background(), &iw.Run{Table: table.Identifier{"sec", "missing"}, Branch: table.MainBranch,
		WriterID: "w", Epoch: 1, FirstSeq: 1, LastSeq: 1})
	if err == nil {
		t.Fatal("commit to a missing table succeeded")
	}
	assertNoSecrets(t, "Commit", err, echoSecrets...)
	if !errors.Is(err, icecatalog.ErrNoSuchTable) {
		t.Errorf("Commit: %v, want ErrNoSuchTable", err)
	}
}

// leakyCommitter fails every run with the kind of error an object store gives: a url.Error quoting a presigned
// URL (signature, session token) and a server reply that quotes the request's headers.
type leakyCommitter struct{}

const (
	presignSignature = "feedface0123456789"
	presignToken     = "IQoJb3JpZ2luX2VjEFwoGZXIvYXdzEJr"
)

func (leakyCommitter) Commit(context.Context, *iw.Run) (*iw.CommitResult, error) {
	u := "https://bucket.s3.amazonaws.com/wh/data/f.parquet?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKID%2F20260101" +
		"&X-Amz-Security-Token=" + presignToken + "&X-Amz-Signature=" + presignSignature
	return nil, fmt.Errorf("blob (code=PermissionDenied): %w", &url.Error{Op: "Put", URL: u,
		Err: fmt.Errorf("403 Forbidden: request headers map[Authorization:[AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=%s] X-Amz-Security-Token:[%s]]: %w",
			presignSignature, presignToken, fs.ErrPermission)})
}

// TestSecretsNotInStorageErrors: an upload or commit error that quotes a presigned URL and the request's
// headers reaches Flush, Close and the log masked, keeps its sentinels, and errors.As to *url.Error gives a
// copy whose URL is masked.
func TestSecretsNotInStorageErrors(t *testing.T) {
	ctx := context.Background()
	var logs bytes.Buffer
	w, err := iw.NewWriter(ctx, openCatalog(t), table.Identifier{"sec", "storage"}, iw.WithCreate(seed.Schema),
		iw.WithCommitter(leakyCommitter{}), iw.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	writeSeed(t, w, seed.New(0, 1), 10)
	err = w.Flush(ctx)
	secrets := []string{presignSignature, presignToken}
	assertNoSecrets(t, "Flush", err, secrets...)
	if !errors.Is(err, iw.ErrWriterFailed) || !errors.Is(err, fs.ErrPermission) {
		t.Errorf("Flush: %v, want ErrWriterFailed and fs.ErrPermission", err)
	}
	var ue *url.Error
	if !errors.As(err, &ue) {
		t.Errorf("errors.As(*url.Error) failed on %v", err)
	} else if strings.Contains(ue.URL, presignSignature) || strings.Contains(ue.URL, presignToken) ||
		!strings.Contains(ue.URL, "bucket.s3.amazonaws.com/wh/data/f.parquet") {
		t.Errorf("url.Error copy: %s", ue.URL)
	}
	assertNoSecrets(t, "Close", w.Close(ctx), secrets...)
	for _, s := range secrets {
		if strings.Contains(logs.String(), s) {
			t.Errorf("log holds %q:\n%s", s, logs.String())
		}
	}
	if !strings.Contains(logs.String(), "writer stopped") {
		t.Errorf("the failure was not logged:\n%s", logs.String())
	}
}

// assertNoSecrets fails when err is nil, or when its message, its %+v and %#v forms, or any error reachable
// through Unwrap() error and Unwrap() []error holds one of the secrets.
func assertNoSecrets(t *testing.T, what string, err error, secrets ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error", what)
		return
	}
	for _, leak := range redacttest.Leaks(err, secrets...) {
		t.Errorf("%s: %s", what, leak)
	}
}
