package iceberg

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/icewriter/iceberg/internal/arrowx"
)

// recordsSize returns the rows of recs and the bytes of their buffers.
func recordsSize(recs []arrow.RecordBatch) (rows, bytes int64) {
	for _, r := range recs {
		rows += r.NumRows()
		for _, c := range r.Columns() {
			bytes += arrowx.ArraySize(c.Data())
		}
	}
	return rows, bytes
}
