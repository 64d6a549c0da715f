// Package encode writes a batch's rows as Parquet data files (Encoder): iceberg-go's rolling writer with the
// table's partitioning, a batch's rows grouped by partition and written in chunks (fan-out), an unpartitioned
// batch cut into parts written at once, and in a Router's bulk phase files kept open across batches (bulk
// files). It also holds the packed metadata of files held until their commit (PackedFiles), the write batch
// that keeps each column's dictionary check working (WriteBatchRows) and the bloom filters on key columns
// (KeyBloomProperties), and the writer of tables whose variant paths are chosen (ShredWrite: the layout of the
// table property write.parquet.variant-shredded-paths.<column>, which iceberg-go's writer cannot take). It never
// calls back into its caller: the caller passes what a batch holds (Batch) and
// reads what was written (Written, and Bulk for the bulk files).
package encode
