package iceberg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/icewriter/iceberg/internal/commit"
	"github.com/icewriter/iceberg/internal/redact"
)

// writerEnv is what the stages of one writer share about where they write and as whom: the catalog, the
// table's identifier and branch, the writer ID and the epoch it holds, the redactor and logger that mask
// secrets, the allocator of the writer's rows, and what its own transactions need (the table cache and the
// commit timeout). NewWriter makes it; the fence (in NewWriter, before any stage runs) is the only thing that
// sets the epoch, so the stages read every field without a lock.
type writerEnv struct {
	cat      catalog.Catalog // masks its errors (redact.WrapCatalog)
	red      *redact.Redactor
	log      *slog.Logger // masks every record with red
	ident    table.Identifier
	branch   string // WithBranch (default main)
	id       string // WithWriterID, else random
	stableID bool   // the ID came from WithWriterID: fencing, commit records and checkpoint mirrors apply
	epoch    int64  // the epoch the writer holds (1 for a random ID)
	timeout  time.Duration
	tables   *commit.Tables // the catalog's loads and what commits leave (see commit.Tables)
	mem      memory.Allocator
	// retryWaits, when set, replaces the backoff bounds of every commit retry (see options.retryWaits).
	retryWaits *[2]time.Duration
	// events delivers WithOnCommit and the hooks' events (set by NewWriter once it fenced: nil before).
	events *callbacks
}

// failure is the error the writer keeps once err stopped it (every later call returns it): masked, since a
// commit or upload error may quote a server's reply or a presigned URL, and logged.
func (e *writerEnv) failure(err error) error {
	err = e.red.Error(err)
	if !errors.Is(err, ErrWriterFailed) {
		err = fmt.Errorf("%w: %w", ErrWriterFailed, err)
	}
	e.log.Error("iceberg: writer stopped", "table", e.ident, "writer", e.id, "err", err)
	return err
}

// loadTable loads the writer's table from the catalog, for the calls that read what is committed now.
func (e *writerEnv) loadTable(ctx context.Context) (*table.Table, error) {
	tbl, err := e.cat.LoadTable(ctx, e.ident)
	if err != nil {
		return nil, fmt.Errorf("iceberg: load table %v: %w", e.ident, err)
	}
	return tbl, nil
}
