// Package rest registers the Iceberg REST catalog with package catalog under the schemes rest, rest+http and
// rest+https. Import it for its side effect:
//
//	import _ "github.com/icewriter/iceberg/catalog/rest"
//
//	cat, err := catalog.Open(ctx, "rest://127.0.0.1:8181?warehouse=s3://iceberg-tables&credential=id:secret")
//
// The URI rest://host:port/path names the catalog endpoint http://host:port/path (rest+https:// names
// https://host:port/path); the REST client appends /v1 itself. Every query parameter and property is handed to
// iceberg-go's REST catalog (github.com/apache/iceberg-go/catalog/rest), which understands among others:
//
//   - credential=id:secret: OAuth2 client credentials, exchanged at oauth2-server-uri (default
//     {endpoint}/v1/oauth/tokens) for a token that is refreshed before it expires; scope, audience, resource
//   - token=...: a static bearer token
//   - rest.sigv4-enabled=true, rest.signing-region, rest.signing-name: AWS SigV4 request signing, for the Glue
//     Iceberg REST endpoint (signing-name glue) and S3 Tables (signing-name s3tables), with credentials from the
//     environment or profile
//   - warehouse, prefix: the warehouse to ask /v1/config for and a fixed path prefix
//   - header.X-Name=value: an extra HTTP header on every request
//   - rest.tls.skip-verify=true: skip TLS verification (tests only)
//   - s3.*, gcs.*, adls.*: storage properties for table files; credentials that the server vends per table
//     (X-Iceberg-Access-Delegation: vended-credentials) take precedence and are refreshed before expiry by
//     package storage.
//
// User info in the URI (rest://id:secret@host:port) is taken as the OAuth2 credential when no credential
// property is given. The property name (default "rest") names the catalog. Each Open builds one HTTP client
// and, with OAuth2, one token source, both reused for the catalog's lifetime.
//
// Errors never print the credential, the token or any other secret property, neither Open's nor those of the
// catalog's later calls (package catalog wraps the catalog it returns), even when the server echoes the request
// with the bearer token it issued: they are masked, and errors still answer errors.Is for iceberg-go's error
// values (rest.ErrUnauthorized, table.ErrCommitFailed, ...). catalog.Backend returns the *rest.Catalog itself.
package rest

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"strings"

	"github.com/apache/iceberg-go"
	icecatalog "github.com/apache/iceberg-go/catalog"
	icerest "github.com/apache/iceberg-go/catalog/rest"

	"github.com/icewriter/iceberg/catalog"
	"github.com/icewriter/iceberg/internal/redact"
)

// Schemes are the URI schemes this package registers.
var Schemes = []string{"rest", "rest+http", "rest+https"}

func init() {
	for _, s := range Schemes {
		catalog.Register(s, open)
	}
}

// Endpoint maps a catalog URI to the HTTP endpoint of the REST catalog: rest:// and rest+http:// become
// http://, rest+https:// becomes https://. User info, query and fragment are dropped.
func Endpoint(u *url.URL) (string, error) {
	var scheme string
	switch strings.ToLower(u.Scheme) {
	case "rest", "rest+http":
		scheme = "http"
	case "rest+https":
		scheme = "https"
	default:
		return "", fmt.Errorf("catalog/rest: unsupported scheme %q (want rest, rest+http or rest+https)", u.Scheme)
	}
	if u.Host == "" {
		return "", fmt.Errorf("catalog/rest: uri %q names no host", redact.URL(u))
	}
	e := url.URL{Scheme: scheme, Host: u.Host, Path: strings.TrimRight(u.Path, "/")}
	return e.String(), nil
}

// Properties returns the properties iceberg-go's REST catalog is loaded with: props plus the endpoint under
// "uri" and "type" rest. User info in u becomes the credential when props has none.
func Properties(u *url.URL, props iceberg.Properties) (iceberg.Properties, error) {
	endpoint, err := Endpoint(u)
	if err != nil {
		return nil, err
	}
	p := maps.Clone(props)
	if p == nil {
		p = iceberg.Properties{}
	}
	if u.User != nil && p["credential"] == "" && p["token"] == "" {
		if pw, ok := u.User.Password(); ok {
			p["credential"] = u.User.Username() + ":" + pw
		} else if u.User.Username() != "" {
			p["credential"] = u.User.Username()
		}
	}
	p["type"] = "rest"
	p["uri"] = endpoint
	// catalog.Load fills these from ~/.iceberg-go.yaml when they are missing; an explicit empty value keeps a
	// URI-opened catalog independent of that file.
	for _, k := range []string{"credential", "warehouse"} {
		if _, ok := p[k]; !ok {
			p[k] = ""
		}
	}
	return p, nil
}

func open(ctx context.Context, u *url.URL, props iceberg.Properties) (icecatalog.Catalog, error) {
	p, err := Properties(u, props)
	if err != nil {
		return nil, err
	}
	secrets := append(redact.Secrets(p), redact.URLSecrets(u)...)
	name := p.Get("name", "rest")
	delete(p, "name")
	cat, err := icecatalog.Load(ctx, name, p)
	if err != nil {
		return nil, redact.Error(fmt.Errorf("catalog/rest: open %s: %w", p["uri"], err), secrets...)
	}
	if _, ok := cat.(*icerest.Catalog); !ok {
		return nil, fmt.Errorf("catalog/rest: iceberg-go returned a %T for type rest", cat)
	}
	return cat, nil
}
