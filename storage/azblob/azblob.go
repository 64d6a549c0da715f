// Package azblob serves Azure Blob Storage and ADLS Gen2 table locations. Import it for its side effect:
//
//	import _ "github.com/icewriter/iceberg/storage/azblob"
//
//	cat, err := catalog.Open(ctx, "sqlite:///var/lib/app/catalog.db"+
//		"?warehouse=abfss://container@account.dfs.core.windows.net/warehouse")
//
// Two location forms are served:
//
//   - abfs://, abfss://, wasb://, wasbs:// (container@account.host/path), Iceberg's standard form, by
//     iceberg-go's ADLS file IO (io/gocloud/azure), which this package imports: credentials from
//     adls.auth.shared-key.account.name/key, adls.sas-token.<host>, adls.connection-string.<account>,
//     adls.managed-identity.enabled, else DefaultAzureCredential; adls.endpoint and adls.protocol for emulators.
//   - azblob://container/path, gocloud's form, through gocloud.dev's azureblob with the bucket cache of
//     package storage: the account comes from adls.auth.shared-key.account.name or AZURE_STORAGE_ACCOUNT, the
//     key from adls.auth.shared-key.account.key or AZURE_STORAGE_KEY (else a SAS token from
//     AZURE_STORAGE_SAS_TOKEN, else DefaultAzureCredential), the service URL from adls.endpoint or
//     AZURE_STORAGE_DOMAIN.
//
// The abfs forms are not routed through package storage's cache: its location extractor keys a bucket by host,
// while an ADLS authority is container@account.host. (Nor, therefore, through its read retries and request
// timeout, which the azblob form gets: icewriter.request-timeout, default 60s, on every connection.)
package azblob

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	sdkblob "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	iceio "github.com/apache/iceberg-go/io"
	_ "github.com/apache/iceberg-go/io/gocloud/azure" // abfs, abfss, wasb, wasbs
	"gocloud.dev/blob"
	"gocloud.dev/blob/azureblob"

	"github.com/icewriter/iceberg/internal/redact"
	"github.com/icewriter/iceberg/storage"
)

// Schemes are the URI schemes this package routes through package storage.
var Schemes = []string{"azblob"}

func init() {
	storage.Register(Open, Schemes...)
}

// ServiceURL returns the blob service URL of an account: adls.endpoint when set (an emulator such as Azurite,
// http://127.0.0.1:10000/account), else https://ACCOUNT.blob.DOMAIN with DOMAIN from AZURE_STORAGE_DOMAIN
// (default core.windows.net).
func ServiceURL(account string, props map[string]string) string {
	if e := props[iceio.ADLSEndpoint]; e != "" {
		return e
	}
	domain := os.Getenv("AZURE_STORAGE_DOMAIN")
	if domain == "" {
		domain = "core.windows.net"
	}
	proto := props[iceio.ADLSProtocol]
	if proto == "" {
		proto = "https"
	}
	return fmt.Sprintf("%s://%s.blob.%s", proto, account, domain)
}

// Open opens the container u.Host configured by props. It is registered with package storage for Schemes.
func Open(ctx context.Context, u *url.URL, props map[string]string) (*blob.Bucket, error) {
	if u.Host == "" {
		return nil, fmt.Errorf("storage/azblob: location %q names no container", redact.URL(u))
	}
	account := props[iceio.ADLSSharedKeyAccountName]
	if account == "" {
		account = os.Getenv("AZURE_STORAGE_ACCOUNT")
	}
	if account == "" {
		return nil, fmt.Errorf("storage/azblob: no account (set %s or AZURE_STORAGE_ACCOUNT)", iceio.ADLSSharedKeyAccountName)
	}
	key := props[iceio.ADLSSharedKeyAccountKey]
	if key == "" {
		key = os.Getenv("AZURE_STORAGE_KEY")
	}
	secrets := append(redact.Secrets(props), key)
	containerURL, err := url.JoinPath(ServiceURL(account, props), u.Host)
	if err != nil {
		return nil, fmt.Errorf("storage/azblob: container url: %w", err)
	}
	timeout, err := storage.RequestTimeout(props)
	if err != nil {
		return nil, err
	}
	// A transport of its own with the request timeout on each connection: a stalled upload or read fails (and
	// is retried by the Azure client's retry policy) instead of hanging.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	storage.WithIdleTimeout(tr, timeout)
	copts := &container.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: &http.Client{Transport: tr}}}
	var client *container.Client
	switch sas := os.Getenv("AZURE_STORAGE_SAS_TOKEN"); {
	case key != "":
		cred, cerr := sdkblob.NewSharedKeyCredential(account, key)
		if cerr != nil {
			return nil, redact.Error(fmt.Errorf("storage/azblob: shared key: %w", cerr), secrets...)
		}
		client, err = container.NewClientWithSharedKeyCredential(containerURL, cred, copts)
	case sas != "":
		secrets = append(secrets, sas)
		client, err = container.NewClientWithNoCredential(containerURL+"?"+sas, copts)
	default:
		cred, cerr := azidentity.NewDefaultAzureCredential(nil)
		if cerr != nil {
			return nil, fmt.Errorf("storage/azblob: default credential: %w", cerr)
		}
		client, err = container.NewClient(containerURL, cred, copts)
	}
	if err != nil {
		return nil, redact.Error(fmt.Errorf("storage/azblob: client for %s: %w", containerURL, err), secrets...)
	}
	b, err := azureblob.OpenBucket(ctx, client, nil)
	if err != nil {
		return nil, redact.Error(fmt.Errorf("storage/azblob: open %s: %w", containerURL, err), secrets...)
	}
	return b, nil
}
