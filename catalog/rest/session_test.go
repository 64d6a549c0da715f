package rest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/iceberg-go"

	"github.com/icewriter/iceberg/catalog"
)

// fakeREST is a minimal REST catalog: OAuth2 tokens, config and an empty namespace list. It records the
// Authorization header of every catalog request.
type fakeREST struct {
	tokens atomic.Int32
	auth   atomic.Value // string
}

func (f *fakeREST) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch {
	case strings.HasSuffix(r.URL.Path, "/oauth/tokens"):
		f.tokens.Add(1)
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "tok", "token_type": "bearer", "expires_in": 3600})
	case strings.HasSuffix(r.URL.Path, "/config"):
		f.auth.Store(r.Header.Get("Authorization"))
		_, _ = w.Write([]byte(`{"defaults":{},"overrides":{}}`))
	default:
		f.auth.Store(r.Header.Get("Authorization"))
		_, _ = w.Write([]byte(`{"namespaces":[]}`))
	}
}

// TestOneSessionPerOpen: the OAuth2 token is fetched when the catalog opens and then reused by every request;
// catalog calls do not rebuild the client or fetch new tokens.
func TestOneSessionPerOpen(t *testing.T) {
	f := &fakeREST{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	cat, err := catalog.Open(context.Background(), strings.Replace(srv.URL, "http://", "rest://", 1)+"?credential=id:secret")
	if err != nil {
		t.Fatal(err)
	}
	// iceberg-go fetches one token for the /v1/config bootstrap and one for the catalog's session, lazily.
	if _, err := cat.ListNamespaces(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	afterOpen := f.tokens.Load()
	for i := 0; i < 5; i++ {
		if _, err := cat.ListNamespaces(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.tokens.Load(); got != afterOpen || got == 0 || got > 2 {
		t.Errorf("token requests: %d after the first call, %d after 5 more", afterOpen, got)
	}
	if a, _ := f.auth.Load().(string); a != "Bearer tok" {
		t.Errorf("Authorization = %q, want the OAuth2 token", a)
	}
}

// TestSigV4: with rest.sigv4-enabled, catalog requests are signed with AWS SigV4 for the named service.
func TestSigV4(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	f := &fakeREST{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	cat, err := catalog.OpenWithProperties(context.Background(), strings.Replace(srv.URL, "http://", "rest://", 1),
		iceberg.Properties{"rest.sigv4-enabled": "true", "rest.signing-region": "eu-west-1", "rest.signing-name": "glue"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cat.ListNamespaces(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	a, _ := f.auth.Load().(string)
	if !strings.HasPrefix(a, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/") || !strings.Contains(a, "/eu-west-1/glue/aws4_request") {
		t.Errorf("Authorization = %q, want a SigV4 signature for glue in eu-west-1", a)
	}
}
