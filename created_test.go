package iceberg_test

import (
	"context"
	"testing"

	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
)

// TestCreatedTableCompression: a created table writes zstd at level 1 unless TableProperties says otherwise; a
// different codec keeps its own default level rather than inheriting zstd's.
func TestCreatedTableCompression(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name      string
		props     map[string]string
		wantCodec string
		wantLevel string // "" when unset
	}{
		{"default", nil, "zstd", "1"},
		{"gzip", map[string]string{table.ParquetCompressionKey: "gzip"}, "gzip", ""},
		{"zstd-level-3", map[string]string{table.ParquetCompressionLevelKey: "3"}, "zstd", "3"},
		{"snappy-with-level", map[string]string{table.ParquetCompressionKey: "snappy", table.ParquetCompressionLevelKey: "2"}, "snappy", "2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, err := iceberg.NewWriter(ctx, openCatalog(t), table.Identifier{"c", "t"},
				iceberg.WithCreate(kvSchema, iceberg.TableProperties(c.props)))
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close(ctx)
			props := w.Table().Properties()
			if got := props[table.ParquetCompressionKey]; got != c.wantCodec {
				t.Fatalf("codec %q, want %q", got, c.wantCodec)
			}
			if got := props[table.ParquetCompressionLevelKey]; got != c.wantLevel {
				t.Fatalf("level %q, want %q", got, c.wantLevel)
			}
		})
	}
}
