package encode

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"

	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// Parquet bloom filters on key columns. iceberg-go's writer turns a filter on for a column when the table
// property write.parquet.bloom-filter-enabled.column.<name> is true, and then gives every row group a filter of
// exactly write.parquet.bloom-filter-max-bytes (1 MiB by default): far too large for a 1,000-row file, too small
// for nothing. So the writer sizes the filter for the rows of each write and hands iceberg-go a copy of the table
// whose properties say so; nothing of that copy is ever committed.

// BloomFPP is the false-positive rate the key columns' filters are sized for.
const BloomFPP = 0.01

const (
	bloomMinBytes = 32
	bloomMaxBytes = 1 << 20
)

// BloomBytes is the size of a Parquet split-block bloom filter holding ndv distinct values at bloomFPP: about
// 1.2 bytes a value, rounded up to a power of two, within 32 B and 1 MiB.
func BloomBytes(ndv int64) int64 {
	if ndv < 1 {
		ndv = 1
	}
	bitsNeeded := -8 * float64(ndv) / math.Log(1-math.Pow(BloomFPP, 1.0/8))
	n := int64(math.Ceil(bitsNeeded / 8))
	if n <= bloomMinBytes {
		return bloomMinBytes
	}
	if n >= bloomMaxBytes {
		return bloomMaxBytes
	}
	return 1 << bits.Len64(uint64(n-1))
}

// WithKeyBlooms returns tbl, or a copy of it whose properties ask the Parquet writer for a bloom filter on each
// key column sized for rows distinct values per row group. Columns whose filter the table's own properties turn
// on or off, and a filter size the table sets, are left as the table says (a filter the table turns on without
// a size is sized here too).
func WithKeyBlooms(tbl *table.Table, keys []string, rows int64) (*table.Table, error) {
	return WithWriteProperties(tbl, KeyBloomProperties(tbl.Properties(), keys, rows))
}

// KeyBloomProperties are the properties withKeyBlooms sets on a table of properties props (none: nil).
func KeyBloomProperties(props ice.Properties, keys []string, rows int64) ice.Properties {
	if len(keys) == 0 {
		return nil
	}
	set := ice.Properties{}
	on := false // some key column gets a filter
	for _, k := range keys {
		key := table.ParquetBloomFilterColumnEnabledKeyPrefix + "." + k
		v, ok := props[key]
		switch {
		case !ok:
			set[key] = "true"
			on = true
		case v == "true":
			on = true
		}
	}
	if _, ok := props[table.ParquetBloomFilterMaxBytesKey]; on && !ok {
		set[table.ParquetBloomFilterMaxBytesKey] = strconv.FormatInt(BloomBytes(rows), 10)
	}
	return set
}

// WithWriteProperties returns tbl, or a copy of it with the properties set (tbl itself when set is empty), for
// iceberg-go's writer to read: nothing of that copy is ever committed.
func WithWriteProperties(tbl *table.Table, set ice.Properties) (*table.Table, error) {
	if len(set) == 0 {
		return tbl, nil
	}
	b, err := table.MetadataBuilderFromBase(tbl.Metadata(), tbl.MetadataLocation())
	if err != nil {
		return nil, fmt.Errorf("iceberg: write properties: %w", err)
	}
	if err := b.SetProperties(set); err != nil {
		return nil, fmt.Errorf("iceberg: write properties: %w", err)
	}
	meta, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("iceberg: write properties: %w", err)
	}
	return table.New(tbl.Identifier(), meta, tbl.MetadataLocation(), tbl.FS, nil), nil
}
