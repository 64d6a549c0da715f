// Package catalog opens Apache Iceberg catalogs from a URI, the way database/sql opens databases by driver name.
//
// The sqlite scheme is always available and is the embedded default:
//
//	cat, err := catalog.Open(ctx, "sqlite:///var/lib/app/catalog.db?warehouse=file:///var/lib/app/warehouse")
//
// Other schemes (rest, glue, sql, hive, hadoop) register themselves when their package is imported, so a program
// links only the backends it uses:
//
//	import _ "github.com/icewriter/iceberg/catalog/rest"
//
// Errors never carry a secret. Open's errors, and every error of the catalog it returns, are masked: the
// password and secret query parameters of the URI, the secret properties (credential, token, s3.secret-access-key,
// ...), and secret shapes that a server may echo from a request even when the value was never ours (a bearer
// token it issued, a presigned URL's signature). errors.Is with iceberg-go's sentinels (ErrNoSuchTable,
// table.ErrCommitFailed, rest.ErrForbidden, ...) works through the masking; errors.As gives masked copies, or
// fails for a typed error that holds a secret. Backend reaches the backend's own catalog, unmasked, for methods
// beyond the catalog interface.
package catalog

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"

	"github.com/apache/iceberg-go"
	icecatalog "github.com/apache/iceberg-go/catalog"

	"github.com/icewriter/iceberg/internal/redact"
)

// ErrUnknownScheme is returned by Open for a URI whose scheme no imported backend registered.
var ErrUnknownScheme = errors.New("catalog: unknown scheme")

// Opener opens a catalog for a parsed URI. Query parameters that the opener does not consume are passed on as
// catalog properties in props (already merged with the properties given to OpenWithProperties). Open masks the
// opener's errors and wraps the catalog it returns, so an opener need not (though one that quotes u should print
// it with its secrets masked all the same, for callers of its exported helpers).
type Opener func(ctx context.Context, u *url.URL, props iceberg.Properties) (icecatalog.Catalog, error)

var (
	mu      sync.RWMutex
	openers = map[string]Opener{}
)

// Register makes a catalog backend available to Open under the given URI scheme. It panics when the scheme is
// registered twice or the opener is nil, as database/sql.Register does.
func Register(scheme string, o Opener) {
	if o == nil {
		panic("catalog: Register opener is nil")
	}
	scheme = strings.ToLower(scheme)
	mu.Lock()
	defer mu.Unlock()
	if _, dup := openers[scheme]; dup {
		panic("catalog: Register called twice for scheme " + scheme)
	}
	openers[scheme] = o
}

// Schemes lists the registered URI schemes, sorted.
func Schemes() []string {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]string, 0, len(openers))
	for s := range openers {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Open opens the catalog that uri names. Its query parameters become catalog properties.
func Open(ctx context.Context, uri string) (icecatalog.Catalog, error) {
	return OpenWithProperties(ctx, uri, nil)
}

// OpenWithProperties is Open with extra catalog properties (credentials, for example, that should not appear in a
// URI). Properties given here override query parameters of the same name.
//
// The catalog returned masks the secrets of uri and props in every error it returns (see the package doc);
// it implements iceberg-go's Closer, and TransactionalCatalog and PurgeableTable when the backend does.
func OpenWithProperties(ctx context.Context, uri string, props iceberg.Properties) (icecatalog.Catalog, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return nil, redact.Error(fmt.Errorf("catalog: parse uri: %w", redactURLError(err)), redact.Secrets(props)...)
	}
	scheme := strings.ToLower(u.Scheme)
	mu.RLock()
	o, ok := openers[scheme]
	mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w %q (registered: %s; import the backend package, e.g. _ \"github.com/icewriter/iceberg/catalog/%s\")",
			ErrUnknownScheme, u.Scheme, strings.Join(Schemes(), ", "), scheme)
	}
	merged := iceberg.Properties{}
	for k, vs := range u.Query() {
		if len(vs) > 0 {
			merged[k] = vs[len(vs)-1]
		}
	}
	for k, v := range props {
		merged[k] = v
	}
	// The secrets are taken before the opener runs: openers consume and rewrite their properties.
	red := redact.New(append(redact.URLSecrets(u), redact.Secrets(merged)...)...)
	cat, err := o(ctx, u, merged)
	if err != nil {
		return nil, red.Error(err)
	}
	return redact.WrapCatalog(cat, red), nil
}

// Backend returns the backend's own catalog behind one that Open returned (for methods beyond iceberg-go's
// catalog interface, such as a REST catalog's views), or cat itself. Its errors are not masked: they may quote
// the URI's password, a secret property or a server's echo of a request.
func Backend(cat icecatalog.Catalog) icecatalog.Catalog { return redact.Backend(cat) }

// redactURLError drops the URL text from a url.Error, since it may carry a password.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}
