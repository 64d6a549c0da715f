// Package hadoop registers iceberg-go's Hadoop catalog (tables found by directory layout under a warehouse
// folder, versioned metadata files, no catalog server) with package catalog under the scheme hadoop. Import it
// for its side effect:
//
//	import _ "github.com/icewriter/iceberg/catalog/hadoop"
//
//	cat, err := catalog.Open(ctx, "hadoop:///var/lib/iceberg/warehouse")
//
// hadoop:///abs/path is a local warehouse; a warehouse query parameter may name another location instead
// (hadoop://?warehouse=s3://bucket/wh&allow-unsafe-commits=true). Commits on an object store are not atomic
// in this catalog, which is why iceberg-go demands allow-unsafe-commits there: prefer a real catalog for
// concurrent writers.
package hadoop

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"path/filepath"

	"github.com/apache/iceberg-go"
	icecatalog "github.com/apache/iceberg-go/catalog"
	icehadoop "github.com/apache/iceberg-go/catalog/hadoop"

	"github.com/icewriter/iceberg/catalog"
	"github.com/icewriter/iceberg/internal/redact"
)

func init() {
	catalog.Register("hadoop", open)
}

// Warehouse returns the warehouse location a hadoop URI names: the warehouse property when set, else
// file:// plus the URI's path (host and path for hadoop://relative/dir).
func Warehouse(u *url.URL, props iceberg.Properties) (string, error) {
	if u.Scheme != "hadoop" {
		return "", fmt.Errorf("catalog/hadoop: unsupported scheme %q", u.Scheme)
	}
	if wh := props.Get("warehouse", ""); wh != "" {
		return wh, nil
	}
	p := u.Path
	if u.Host != "" {
		p = u.Host + p
	}
	if p == "" || p == "/" {
		return "", fmt.Errorf("catalog/hadoop: uri %q names no warehouse folder", redact.URL(u))
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("catalog/hadoop: warehouse %q: %w", p, err)
	}
	return "file://" + filepath.ToSlash(abs), nil
}

func open(_ context.Context, u *url.URL, props iceberg.Properties) (icecatalog.Catalog, error) {
	wh, err := Warehouse(u, props)
	if err != nil {
		return nil, err
	}
	p := maps.Clone(props)
	if p == nil {
		p = iceberg.Properties{}
	}
	name := p.Get("name", "hadoop")
	delete(p, "name")
	p["warehouse"] = wh
	cat, err := icehadoop.NewCatalog(name, wh, p)
	if err != nil {
		// The warehouse may be a URL with secrets of its own (a presigned or SAS-token location).
		return nil, redact.Error(fmt.Errorf("catalog/hadoop: open %s: %w", wh, err), append(redact.Secrets(p), redact.URLSecrets(u)...)...)
	}
	return cat, nil
}
