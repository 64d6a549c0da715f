package commit

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"maps"
	"strings"
	"testing"

	iceio "github.com/apache/iceberg-go/io"
)

// TestPositionsFileFormats: side files are written as Puffin files (named .puffin, which stores that take only
// the Iceberg layout in a table's folder accept) and read back; side files of the earlier format (gzipped JSON
// named .json.gz) are still read.
func TestPositionsFileFormats(t *testing.T) {
	ctx := context.Background()
	tbl := newTxFixture(t).load(t)
	want := map[string]string{"orders/0": "42", "orders/1": ""}

	path, err := WritePositionsFile(ctx, tbl, want)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(path, ".puffin") {
		t.Errorf("side file %s is not named .puffin", path)
	}
	if got, err := ReadPositionsFile(ctx, tbl, path); err != nil || !maps.Equal(got, want) {
		t.Fatalf("read %v (%v), want %v", got, err, want)
	}

	lp, err := tbl.LocationProvider()
	if err != nil {
		t.Fatal(err)
	}
	legacy := lp.NewMetadataLocation(positionsFilePrefix + "legacy.json.gz")
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := json.NewEncoder(zw).Encode(positionsFile{Format: positionsFileFormat, Version: positionsFileVersion,
		Positions: want}); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.(iceio.WriteFileIO).WriteFile(legacy, buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadPositionsFile(ctx, tbl, legacy); err != nil || !maps.Equal(got, want) {
		t.Fatalf("read legacy %v (%v), want %v", got, err, want)
	}
}
