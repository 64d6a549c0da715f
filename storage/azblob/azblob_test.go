package azblob_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/icewriter/iceberg/storage/azblob"
)

func TestServiceURL(t *testing.T) {
	t.Setenv("AZURE_STORAGE_DOMAIN", "")
	if got := azblob.ServiceURL("acct", nil); got != "https://acct.blob.core.windows.net" {
		t.Errorf("default: %s", got)
	}
	if got := azblob.ServiceURL("acct", map[string]string{"adls.endpoint": "http://127.0.0.1:10000/acct"}); got != "http://127.0.0.1:10000/acct" {
		t.Errorf("endpoint: %s", got)
	}
}

func TestOpen(t *testing.T) {
	t.Setenv("AZURE_STORAGE_ACCOUNT", "")
	t.Setenv("AZURE_STORAGE_KEY", "")
	u, _ := url.Parse("azblob://container/wh/file.parquet")
	if _, err := azblob.Open(context.Background(), u, nil); err == nil || !strings.Contains(err.Error(), "account") {
		t.Errorf("no account: %v", err)
	}
	// A shared key client is built without contacting the service; a malformed key is refused without
	// printing it.
	b, err := azblob.Open(context.Background(), u, map[string]string{
		"adls.auth.shared-key.account.name": "devstoreaccount1",
		"adls.auth.shared-key.account.key":  "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==",
		"adls.endpoint":                     "http://127.0.0.1:10000/devstoreaccount1",
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = b.Close()
	_, err = azblob.Open(context.Background(), u, map[string]string{
		"adls.auth.shared-key.account.name": "a",
		"adls.auth.shared-key.account.key":  "not base64 SecretValue!",
	})
	if err == nil || strings.Contains(err.Error(), "SecretValue") {
		t.Errorf("bad key: %v", err)
	}
}
