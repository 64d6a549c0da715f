// Package readonce is a view of a table's file system that opens each of a few named files once and serves
// later reads of the small ones from memory: what copy-on-write and compaction use to read a data file several
// times through iceberg-go's scanner without a request per read.
package readonce
