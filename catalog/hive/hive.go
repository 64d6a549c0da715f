// Package hive registers the Hive Metastore catalog (iceberg-go's catalog/hive, over Thrift) with package catalog
// under the scheme thrift. Import it for its side effect:
//
//	import _ "github.com/icewriter/iceberg/catalog/hive"
//
//	cat, err := catalog.Open(ctx, "thrift://metastore.internal:9083?warehouse=s3://bucket/warehouse")
//
// The metastore address is thrift://host:port (port 9083 when omitted); every query parameter is passed on as a
// catalog property (warehouse, iceberg.hive.lock-check-min-wait-ms, iceberg.hive.lock-check-max-wait-ms,
// lock-check-retries, s3.*, ...). Commits take the metastore's table lock; a lost race comes back wrapped in
// table.ErrCommitFailed.
package hive

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/url"

	"github.com/apache/iceberg-go"
	icecatalog "github.com/apache/iceberg-go/catalog"
	icehive "github.com/apache/iceberg-go/catalog/hive"

	"github.com/icewriter/iceberg/catalog"
	"github.com/icewriter/iceberg/internal/redact"
)

// DefaultPort is the Hive Metastore's Thrift port.
const DefaultPort = "9083"

func init() {
	catalog.Register("thrift", open)
}

// Properties returns the properties iceberg-go's Hive catalog is opened with: props plus uri=thrift://host:port.
func Properties(u *url.URL, props iceberg.Properties) (iceberg.Properties, error) {
	if u.Scheme != "thrift" {
		return nil, fmt.Errorf("catalog/hive: unsupported scheme %q (want thrift)", u.Scheme)
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("catalog/hive: uri %q names no metastore host", redact.URL(u))
	}
	port := u.Port()
	if port == "" {
		port = DefaultPort
	}
	p := maps.Clone(props)
	if p == nil {
		p = iceberg.Properties{}
	}
	p[icehive.URI] = "thrift://" + net.JoinHostPort(u.Hostname(), port)
	return p, nil
}

func open(_ context.Context, u *url.URL, props iceberg.Properties) (icecatalog.Catalog, error) {
	p, err := Properties(u, props)
	if err != nil {
		return nil, err
	}
	delete(p, "name")
	cat, err := icehive.NewCatalog(p)
	if err != nil {
		return nil, redact.Error(fmt.Errorf("catalog/hive: open %s: %w", p[icehive.URI], err), redact.Secrets(p)...)
	}
	return cat, nil
}
