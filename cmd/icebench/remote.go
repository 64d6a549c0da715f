package main

import (
	"context"

	ice "github.com/apache/iceberg-go"
	icecatalog "github.com/apache/iceberg-go/catalog"

	"github.com/icewriter/iceberg/catalog"
	_ "github.com/icewriter/iceberg/catalog/rest" // rest://, rest+https://
	_ "github.com/icewriter/iceberg/storage/s3"   // s3:// table locations
)

// openRemote opens a non-embedded catalog (rest://host:port?warehouse=..., or any scheme a linked backend
// registered) with the storage properties of the flags.
func openRemote(ctx context.Context, cfg config, props ice.Properties) (icecatalog.Catalog, error) {
	return catalog.OpenWithProperties(ctx, cfg.catalogURI, props)
}
