// Package glue registers the AWS Glue Data Catalog (iceberg-go's catalog/glue) with package catalog under the
// scheme glue. Import it for its side effect:
//
//	import _ "github.com/icewriter/iceberg/catalog/glue"
//
//	cat, err := catalog.Open(ctx, "glue://?region=eu-west-1&warehouse=s3://bucket/warehouse")
//
// The URI's host, when given, is the Glue catalog id (the AWS account id): glue://123456789012?region=....
// Short query parameters are mapped to iceberg-go's glue.* properties: region -> glue.region, endpoint ->
// glue.endpoint, id -> glue.id; the glue.* names work as well (glue.access-key-id, glue.secret-access-key,
// glue.session-token, glue.max-retries, glue.retry-mode, glue.skip-archive). Credentials default to the AWS
// environment, shared profile or instance role. For Glue's Iceberg REST endpoint use package catalog/rest with
// rest.sigv4-enabled=true and rest.signing-name=glue instead.
package glue

import (
	"context"
	"fmt"
	"maps"
	"net/url"

	"github.com/apache/iceberg-go"
	icecatalog "github.com/apache/iceberg-go/catalog"
	iceglue "github.com/apache/iceberg-go/catalog/glue"

	"github.com/icewriter/iceberg/catalog"
	"github.com/icewriter/iceberg/internal/redact"
)

func init() {
	catalog.Register("glue", open)
}

var aliases = map[string]string{
	"region":   iceglue.Region,
	"endpoint": iceglue.Endpoint,
	"id":       iceglue.CatalogIdKey,
}

// Properties returns the properties iceberg-go's Glue catalog is loaded with.
func Properties(u *url.URL, props iceberg.Properties) (iceberg.Properties, error) {
	if u.Scheme != "glue" {
		return nil, fmt.Errorf("catalog/glue: unsupported scheme %q", u.Scheme)
	}
	p := maps.Clone(props)
	if p == nil {
		p = iceberg.Properties{}
	}
	for short, long := range aliases {
		if v, ok := p[short]; ok {
			if _, set := p[long]; !set {
				p[long] = v
			}
			delete(p, short)
		}
	}
	if u.Host != "" {
		if _, set := p[iceglue.CatalogIdKey]; !set {
			p[iceglue.CatalogIdKey] = u.Host
		}
	}
	p["type"] = "glue"
	for _, k := range []string{"uri", "credential", "warehouse"} { // keep ~/.iceberg-go.yaml out of it
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
	name := p.Get("name", "glue")
	delete(p, "name")
	cat, err := icecatalog.Load(ctx, name, p)
	if err != nil {
		return nil, redact.Error(fmt.Errorf("catalog/glue: open (region %q): %w", p[iceglue.Region], err), redact.Secrets(p)...)
	}
	return cat, nil
}
