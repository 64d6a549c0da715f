// Package encode holds how the writer lays out the Parquet files it writes: the write batch that keeps each
// column's dictionary check working (WriteBatchRows), the bloom filters on key columns (KeyBloomProperties), a
// batch's rows grouped by partition and cut into chunks (fan-out), and the packed metadata of files held until
// their commit (PackedFiles). The encoder itself (and bulk files) still lives in the root package.
package encode
