// Package encode holds how the writer lays out the Parquet files it writes: the write batch that keeps each
// column's dictionary check working (WriteBatchRows) and the bloom filters on key columns (KeyBloomProperties).
// The encoder itself (fan-out, held files, bulk files) still lives in the root package.
package encode
