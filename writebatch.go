package iceberg

import (
	"github.com/apache/arrow-go/v18/arrow"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// Parquet write batches. arrow-go's column writers take a record's values in write batches (iceberg-go sizes
// them from write.parquet.page-row-limit, 20,000 rows by default) and, after each batch, first cut a data page
// when the buffered values fill one (write.parquet.page-size-bytes, 1 MiB), then check whether the dictionary
// saves space over plain values (the cost-based fallback). That check runs only while no page has been cut. A
// column of distinct strings wider than about 50 bytes fills a page within one 20,000-row batch, so the page is
// cut with dictionary indices, the check never runs, and every value goes into the dictionary until it outgrows
// write.parquet.dict-size-bytes (2 MiB); then that useless dictionary page is written and the column goes on
// plain. In BenchmarkApply (the seed's 92-character info column) that was about a third of the encoding CPU.
// So the writer picks a write batch in which its widest column stays within half a page: the check runs after
// the first batch, and a column of distinct values drops its dictionary there.

const (
	writeBatchMaxRows = table.ParquetPageRowLimitDefault
	writeBatchMinRows = 256
)

// writeBatchRows is the write batch for records recs of a table of properties props, or 0 to leave
// iceberg-go's: when the table sets write.parquet.page-row-limit itself, or when the default batch keeps every
// column within half a page, or when no record is larger than the batch picked (one batch each either way).
func writeBatchRows(props ice.Properties, recs []arrow.RecordBatch) int {
	if _, ok := props[table.ParquetPageRowLimitKey]; ok || len(recs) == 0 {
		return 0
	}
	var rows, largest int64
	widest := make([]int64, recs[0].NumCols())
	for _, r := range recs {
		if r.NumCols() != int64(len(widest)) {
			return 0
		}
		rows += r.NumRows()
		largest = max(largest, r.NumRows())
		for i, c := range r.Columns() {
			// Buffer bytes: a slice counts its parent's, which only makes the batch smaller.
			widest[i] += arraySize(c.Data())
		}
	}
	if rows == 0 {
		return 0
	}
	var perRow int64 = 1
	for _, b := range widest {
		perRow = max(perRow, (b+rows-1)/rows)
	}
	page := int64(props.GetInt(table.ParquetPageSizeBytesKey, table.ParquetPageSizeBytesDefault))
	n := max(writeBatchMinRows, page/2/perRow)
	if n >= writeBatchMaxRows || largest <= n {
		return 0
	}
	return int(n)
}
