package redact_test

import (
	"errors"
	"io/fs"
	"net/url"
	"strings"
	"testing"

	"github.com/icewriter/iceberg/internal/redact"
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
	if redact.Error(nil, "x") != nil {
		t.Error("nil error became non-nil")
	}
	plain := errors.New("nothing secret")
	if redact.Error(plain, "s3cr3t") != plain {
		t.Error("an error without secrets was wrapped")
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
		"s3.access-key-id": false, "s3.endpoint": false, "header.Authorization": true} {
		if redact.IsSecretKey(k) != want {
			t.Errorf("IsSecretKey(%q) = %v", k, !want)
		}
	}
}
