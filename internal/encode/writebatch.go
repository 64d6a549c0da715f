package encode

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet/file"
	ice "github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/icewriter/iceberg/internal/arrowx"
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

// WriteBatchRows is the write batch for records recs of a table of properties props, or 0 to leave
// iceberg-go's: when the table sets write.parquet.page-row-limit itself, or when the default batch keeps every
// column within half a page, or when no record is larger than the batch picked (one batch each either way).
func WriteBatchRows(props ice.Properties, recs []arrow.RecordBatch) int {
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
			widest[i] += arrowx.ArraySize(c.Data())
		}
	}
	if rows == 0 {
		return 0
	}
	var perRow int64 = 1
	for _, b := range widest {
		perRow = max(perRow, (b+rows-1)/rows)
	}
	return writeBatchFor(props, perRow, largest)
}

// writeBatchFor is the write batch for a widest column of perRow bytes a row and records of at most largest
// rows, or 0 to leave iceberg-go's (see writeBatchRows).
func writeBatchFor(props ice.Properties, perRow, largest int64) int {
	page := int64(props.GetInt(table.ParquetPageSizeBytesKey, table.ParquetPageSizeBytesDefault))
	n := max(writeBatchMinRows, page/2/max(perRow, 1))
	if n >= writeBatchMaxRows || largest <= n {
		return 0
	}
	return int(n)
}

// RewriteBatchRows is the write batch of a compaction that rewrites files (writeBatchRows for records it does
// not see): a rewrite reads its input back in batches of up to read.parquet.batch-size (131,072) rows, so
// without it a column of distinct strings in the output builds the useless dictionary writeBatchRows avoids, and
// a compacted table reads slower than the same rows as the writer writes them. The widest column is
// measured on the footer of the largest input file: Parquet's uncompressed size of a plain-encoded column is
// its Arrow buffer size to within the offsets, and a dictionary-encoded one is narrow either way.
func RewriteBatchRows(fs iceio.IO, props ice.Properties, files []ice.DataFile) (int, error) {
	if _, ok := props[table.ParquetPageRowLimitKey]; ok || len(files) == 0 {
		return 0, nil
	}
	var largest ice.DataFile
	var rows int64
	for _, f := range files {
		rows += f.Count()
		if f.FileFormat() == ice.ParquetFile && (largest == nil || f.Count() > largest.Count()) {
			largest = f
		}
	}
	if largest == nil {
		return 0, nil
	}
	in, err := fs.Open(largest.FilePath())
	if err != nil {
		return 0, err
	}
	defer in.Close()
	pr, err := file.NewParquetReader(in)
	if err != nil {
		return 0, err
	}
	defer pr.Close()
	md := pr.MetaData()
	if md.NumRows == 0 {
		return 0, nil
	}
	widest := make([]int64, md.Schema.NumColumns())
	for g := 0; g < md.NumRowGroups(); g++ {
		rg := md.RowGroup(g)
		for c := 0; c < rg.NumColumns() && c < len(widest); c++ {
			cc, err := rg.ColumnChunk(c)
			if err != nil {
				return 0, err
			}
			widest[c] += cc.TotalUncompressedSize()
		}
	}
	var perRow int64 = 1
	for _, b := range widest {
		perRow = max(perRow, (b+md.NumRows-1)/md.NumRows)
	}
	return writeBatchFor(props, perRow, rows), nil
}
