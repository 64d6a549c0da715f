package iceberg

// WithRowGroupRowsForReview3 sets the Parquet row-group limit of the files the writer encodes (not an option
// users get): small values make files of many row groups, which the key index must read in row order.
func WithRowGroupRowsForReview3(n int) Option { return func(o *options) { o.rowGroupRows = n } }
