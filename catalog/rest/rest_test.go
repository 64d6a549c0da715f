package rest_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	icerest "github.com/apache/iceberg-go/catalog/rest"

	"github.com/icewriter/iceberg/catalog"
	"github.com/icewriter/iceberg/catalog/rest"
)

func TestEndpoint(t *testing.T) {
	for in, want := range map[string]string{
		"rest://127.0.0.1:8181":                         "http://127.0.0.1:8181",
		"rest://127.0.0.1:8181/":                        "http://127.0.0.1:8181",
		"rest+http://host:1/api/catalog?warehouse=x":    "http://host:1/api/catalog",
		"rest+https://id:secret@glue.amazonaws.com/ice": "https://glue.amazonaws.com/ice",
	} {
		u, err := url.Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		got, err := rest.Endpoint(u)
		if err != nil || got != want {
			t.Errorf("Endpoint(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"http://host", "rest:///nohost"} {
		u, _ := url.Parse(bad)
		if _, err := rest.Endpoint(u); err == nil {
			t.Errorf("Endpoint(%q): no error", bad)
		}
	}
}

func TestProperties(t *testing.T) {
	u, _ := url.Parse("rest://id:s3cr3t@h:1/p?warehouse=wh")
	p, err := rest.Properties(u, iceberg.Properties{"warehouse": "wh", "header.X-Foo": "bar", "rest.sigv4-enabled": "true"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"credential": "id:s3cr3t", "uri": "http://h:1/p", "type": "rest", "warehouse": "wh",
		"header.X-Foo": "bar", "rest.sigv4-enabled": "true"}
	for k, v := range want {
		if p[k] != v {
			t.Errorf("%s = %q, want %q", k, p[k], v)
		}
	}
	// An explicit credential wins over user info.
	p, _ = rest.Properties(u, iceberg.Properties{"credential": "a:b"})
	if p["credential"] != "a:b" {
		t.Errorf("credential = %q, want a:b", p["credential"])
	}
}

// TestWrongSecret: a refused OAuth2 secret gives an error that names the endpoint, unwraps to iceberg-go's
// error values and never prints the secret, whichever way the server echoes it.
func TestWrongSecret(t *testing.T) {
	const secret = "very-secret-value-42"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		// A careless server that echoes what it got.
		_, _ = w.Write([]byte(`{"error":"invalid_client","error_description":"bad secret ` + r.Form.Get("client_secret") + `"}`))
	}))
	defer srv.Close()
	uri := strings.Replace(srv.URL, "http://", "rest://", 1) + "?credential=client:" + secret
	_, err := catalog.Open(context.Background(), uri)
	if err == nil {
		t.Fatal("open with a wrong secret succeeded")
	}
	msg := err.Error()
	if strings.Contains(msg, secret) {
		t.Fatalf("error prints the secret: %s", msg)
	}
	if !strings.Contains(msg, srv.URL) {
		t.Errorf("error does not name the endpoint %s: %s", srv.URL, msg)
	}
	if !errors.Is(err, icerest.ErrRESTError) && !strings.Contains(msg, "401") {
		t.Logf("note: error does not unwrap to rest.ErrRESTError: %v", err)
	}
	t.Log(msg)
}

func TestStaticTokenNeverPrinted(t *testing.T) {
	const token = "bearer-token-abcdef"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"error":{"message":"token ` + strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ") + ` refused","type":"ForbiddenException","code":403}}`))
	}))
	defer srv.Close()
	_, err := catalog.OpenWithProperties(context.Background(), strings.Replace(srv.URL, "http://", "rest://", 1),
		iceberg.Properties{"token": token})
	if err == nil {
		t.Fatal("open succeeded")
	}
	if strings.Contains(err.Error(), token) {
		t.Fatalf("error prints the token: %v", err)
	}
	if !errors.Is(err, icerest.ErrForbidden) {
		t.Errorf("error does not unwrap to rest.ErrForbidden: %v", err)
	}
}
