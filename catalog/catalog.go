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
)

// ErrUnknownScheme is returned by Open for a URI whose scheme no imported backend registered.
var ErrUnknownScheme = errors.New("catalog: unknown scheme")

// Opener opens a catalog for a parsed URI. Query parameters that the opener does not consume are passed on as
// catalog properties in props (already merged with the properties given to OpenWithProperties).
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
func OpenWithProperties(ctx context.Context, uri string, props iceberg.Properties) (icecatalog.Catalog, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return nil, fmt.Errorf("catalog: parse uri: %w", redactURLError(err))
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
	return o(ctx, u, merged)
}

// redactURLError drops the URL text from a url.Error, since it may carry a password.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}
