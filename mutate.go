package iceberg

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
)

// Upsert replaces any existing row with the same key (WithKeys or the table's identifier fields) and inserts
// the rest. Later operations on a key win over earlier ones, across batches and coalesced commits.
//
// Not implemented yet: it returns ErrNotSupported and accepts nothing (merge-on-read and copy-on-write are
// tracked in the project's issues 4 and 5).
func (w *Writer) Upsert(ctx context.Context, rec arrow.RecordBatch) error {
	return w.keyed(ctx, "Upsert")
}

// Delete removes the rows whose key matches a row of keys (only the key columns are read).
//
// Not implemented yet: it returns ErrNotSupported and accepts nothing.
func (w *Writer) Delete(ctx context.Context, keys arrow.RecordBatch) error {
	return w.keyed(ctx, "Delete")
}

func (w *Writer) keyed(ctx context.Context, op string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usableLocked(); err != nil {
		return err
	}
	return fmt.Errorf("%w: %s (keyed writes are not implemented yet)", ErrNotSupported, op)
}
