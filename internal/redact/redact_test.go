package redact_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/icewriter/iceberg/internal/redact"
	"github.com/icewriter/iceberg/internal/redact/redacttest"
)

func TestError(t *testing.T) {
	base := errors.Join(fs.ErrNotExist, errors.New(`POST client_secret=s3cr3t%2Bx&client_id=id: denied for "id:s3cr3t+x"`))
	secrets := redact.Secrets(map[string]string{"credential": "id:s3cr3t+x", "warehouse": "s3://b", "s3.secret-access-key": ""})
	err := redact.Error(base, secrets...)
	if strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("secret left in %q", err)
	}
	if !strings.Contains(err.Error(), "client_id=id") {
		t.Errorf("too much masked: %q", err)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Error("redacted error lost its chain")
	}
	assertNoSecret(t, err, "s3cr3t")
	if redact.Error(nil, "x") != nil {
		t.Error("nil error became non-nil")
	}
	plain := errors.New("nothing secret")
	if redact.Error(plain, "s3cr3t") != plain {
		t.Error("an error without secrets was wrapped")
	}
	wrapped := fmt.Errorf("load: %w", context.Canceled)
	if redact.Error(wrapped) != wrapped {
		t.Error("a plain chain without secrets was wrapped")
	}
}

func TestURL(t *testing.T) {
	u, _ := url.Parse("postgres://ice:pw123@db:5432/cat?sslmode=disable&token=tok123&warehouse=s3://b")
	got := redact.URL(u)
	if strings.Contains(got, "pw123") || strings.Contains(got, "tok123") || !strings.Contains(got, "sslmode=disable") {
		t.Errorf("URL = %q", got)
	}
	if s := redact.URLSecrets(u); len(s) != 2 {
		t.Errorf("URLSecrets = %v", s)
	}
}

func TestIsSecretKey(t *testing.T) {
	for k, want := range map[string]bool{"credential": true, "token": true, "s3.secret-access-key": true,
		"s3.session-token": true, "adls.sas-token.host": true, "password": true, "warehouse": false,
		"s3.access-key-id": false, "s3.endpoint": false, "header.Authorization": true,
		"adls.auth.shared-key.account.key": true, "gcs.jsonkey": true, "adls.connection-string.acct": true,
		"sig": true, "X-Amz-Security-Token": true, "X-Amz-Signature": true, "Cookie": true, "signed": false,
		"rest.signing-name": false} {
		if redact.IsSecretKey(k) != want {
			t.Errorf("IsSecretKey(%q) = %v", k, !want)
		}
	}
}

// TestShapes: secrets a server echoes are masked by their form, though no Redactor was told their value, and
// the text around them survives.
func TestShapes(t *testing.T) {
	for _, c := range []struct{ in, secret, keep string }{
		{"Authorization: Bearer tokEN.123-abc", "tokEN.123-abc", "Authorization: Bearer"},
		{"map[Authorization:[Bearer abcdef123] Accept:[*/*]]", "abcdef123", "Accept:[*/*]"},
		{"Authorization: Basic Y2xpZW50OnMzY3IzdA==", "Y2xpZW50OnMzY3IzdA", "Basic"},
		{`{"access_token":"at-98765","token_type":"bearer"}`, "at-98765", `"token_type":"bearer"`},
		{`message: {\"token\": \"tk-4242\", \"warehouse\": \"wh\"}`, "tk-4242", `\"warehouse\": \"wh\"`},
		{"grant_type=client_credentials&client_id=me&client_secret=cs-777&scope=catalog", "cs-777", "client_id=me&"},
		{"GET https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKID%2F2025&X-Amz-Security-Token=FwoGZX1&X-Amz-Signature=abcdef01 403",
			"FwoGZX1", "X-Amz-Algorithm=AWS4-HMAC-SHA256"},
		{"https://b.s3.amazonaws.com/k?X-Amz-Signature=abcdef01&x=1", "abcdef01", "x=1"},
		{"https://acct.blob.core.windows.net/c/k?sv=2021&sig=SAS%2Bsig%3D&se=2030", "SAS%2Bsig", "sv=2021"},
		{"https://s3.amazonaws.com/b/k?AWSAccessKeyId=AKID&Signature=presig123&Expires=1", "presig123", "Expires=1"},
		{"X-Amz-Security-Token: IQoJb3JpZ2luX2VjE", "IQoJb3JpZ2luX2VjE", "X-Amz-Security-Token:"},
		{"Authorization: AWS4-HMAC-SHA256 Credential=AKID/2025/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=feedbeef",
			"feedbeef", "SignedHeaders=host"},
		{"dial postgres://ice:pg-pass@db:5432/cat failed", "pg-pass", "postgres://ice:"},
		{"host=db user=ice password=pg-pass2 dbname=cat", "pg-pass2", "dbname=cat"},
		{"Error 1045: ice:my-pass@tcp(db:3306)/cat", "my-pass", "tcp(db:3306)"},
		{"DefaultEndpointsProtocol=https;AccountName=a;AccountKey=k3y+/==;EndpointSuffix=x", "k3y+/==", "AccountName=a"},
		{"token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjMifQ.c2lnbmF0dXJl refused", "eyJhbGciOiJIUzI1NiJ9", "refused"},
		{"Cookie: session=abc123def", "abc123def", "Cookie:"},
	} {
		got := redact.String(c.in)
		if strings.Contains(got, c.secret) {
			t.Errorf("%q: secret %q left in %q", c.in, c.secret, got)
		}
		if !strings.Contains(got, c.keep) {
			t.Errorf("%q: %q lost: %q", c.in, c.keep, got)
		}
	}
	for _, s := range []string{"table does not exist: ns.t", "iceberg: commit run 1..3 gave up after 4 attempts",
		"requirement failed: branch main has changed: expected id 1, found 2", "open file:///tmp/wh/x.parquet: no such file"} {
		if got := redact.String(s); got != s {
			t.Errorf("nothing secret in %q, yet it became %q", s, got)
		}
	}
}

func TestKnownSecretForms(t *testing.T) {
	r := redact.New(redact.Secrets(map[string]string{"credential": "client:p@ss/w+rd"})...)
	for _, s := range []string{"p@ss/w+rd", url.QueryEscape("p@ss/w+rd"), "Y2xpZW50OnBAc3MvdytyZA=="} {
		if got := r.String("got " + s + " back"); strings.Contains(got, s) {
			t.Errorf("%q left in %q", s, got)
		}
	}
}

// sentinel is a project-style sentinel error.
var sentinel = errors.New("commit failed")

// echoErr is a typed error holding a server's echo in a field its message does not print.
type echoErr struct {
	Status  int
	Headers http.Header
}

func (e *echoErr) Error() string { return fmt.Sprintf("status %d", e.Status) }

// TestErrorChain: no error reachable from a masked one carries the secret, whichever way it is walked or
// printed, while errors.Is still finds the sentinels and errors.As gives masked copies or nothing.
func TestErrorChain(t *testing.T) {
	const secret = "sekrit-value-9"
	ue := &url.Error{Op: "Get", URL: "https://u:" + secret + "@h/x?token=" + secret, Err: context.DeadlineExceeded}
	echo := &echoErr{Status: 403, Headers: http.Header{"Authorization": {"Bearer zzz-echoed-1"}}}
	orig := fmt.Errorf("iceberg: load table: %w", errors.Join(
		fmt.Errorf("%w: %s refused", sentinel, secret), ue, echo, fmt.Errorf("pkg: %w", fs.ErrPermission)))
	err := redact.Error(orig, secret)
	assertNoSecret(t, err, secret, "zzz-echoed-1")
	for _, s := range []error{sentinel, context.DeadlineExceeded, fs.ErrPermission} {
		if !errors.Is(err, s) {
			t.Errorf("errors.Is(%v) lost", s)
		}
	}
	var gotURL *url.Error
	if !errors.As(err, &gotURL) {
		t.Fatal("errors.As(*url.Error) failed")
	}
	if strings.Contains(gotURL.URL, secret) || !strings.Contains(gotURL.URL, "h/x") || !gotURL.Timeout() {
		t.Errorf("url.Error copy: %q timeout=%v", gotURL.URL, gotURL.Timeout())
	}
	var gotEcho *echoErr
	if errors.As(err, &gotEcho) {
		t.Errorf("errors.As gave a typed error holding a secret in a field: %v", gotEcho.Headers)
	}
	var timeout interface{ Timeout() bool }
	if !errors.As(err, &timeout) || strings.Contains(fmt.Sprint(timeout), secret) {
		t.Errorf("errors.As(interface) = %v", timeout)
	}
	// A typed error with nothing secret in it is handed out as it is.
	clean := &echoErr{Status: 404}
	var gotClean *echoErr
	if !errors.As(redact.Error(fmt.Errorf("x %s: %w", secret, clean), secret), &gotClean) || gotClean != clean {
		t.Error("errors.As refused a typed error without secrets")
	}
	// A single-cause error still unwraps one step at a time, to a masked cause.
	one := redact.Error(fmt.Errorf("get %s: %w", secret, ue), secret)
	if u := errors.Unwrap(one); u == nil || strings.Contains(u.Error(), secret) || !strings.Contains(u.Error(), "h/x") {
		t.Errorf("errors.Unwrap = %v", u)
	}
	// Masking twice keeps every property.
	again := redact.Error(err, "other-secret")
	assertNoSecret(t, again, secret, "zzz-echoed-1")
	if !errors.Is(again, sentinel) {
		t.Error("errors.Is lost after masking twice")
	}
}

func TestLogger(t *testing.T) {
	const secret = "log-secret-77"
	var buf bytes.Buffer
	l := redact.Logger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), redact.New(secret))
	err := fmt.Errorf("wrapped: %w", &url.Error{Op: "Post", URL: "http://h/?client_secret=" + secret, Err: errors.New("EOF")})
	l.With("uri", "rest://id:"+secret+"@h").WithGroup("g").Debug("failed "+secret, "err", err,
		"props", map[string]string{"token": "tok-zz-88"}, "hdr", "Authorization: Bearer bt-66-xyz",
		slog.Group("inner", "pw", secret))
	out := buf.String()
	for _, s := range []string{secret, "tok-zz-88", "bt-66-xyz"} {
		if strings.Contains(out, s) {
			t.Errorf("log holds %q: %s", s, out)
		}
	}
	if !strings.Contains(out, "wrapped") || !strings.Contains(out, "rest://id:") {
		t.Errorf("log lost its content: %s", out)
	}
}

// assertNoSecret fails when err's message, %+v or %#v form, or any error reachable through Unwrap holds one of
// the secrets.
func assertNoSecret(t *testing.T, err error, secrets ...string) {
	t.Helper()
	for _, leak := range redacttest.Leaks(err, secrets...) {
		t.Error(leak)
	}
}
