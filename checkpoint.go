package iceberg

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/icewriter/iceberg/internal/redact"
)

// CommitInfo describes one successful commit, as WithOnCommit and HookCommitted report it.
type CommitInfo struct {
	SnapshotID int64
	Token      string // newest checkpoint token in the commit, "" if none
	Rows       int64  // rows added by the commit
	Files      int    // data files added
	Bytes      int64  // Arrow bytes of the rows
	FirstSeq   int64  // first batch sequence number in the commit
	LastSeq    int64  // last batch sequence number in the commit
	Batches    int    // batches coalesced into the commit
	Attempts   int    // catalog attempts it took
	Conflicts  int    // attempts the catalog rejected because the table moved
	// FileBytes is the size of the files the commit adds: data files, delete files and deletion vectors.
	FileBytes int64
	// Duration is the commit's time, from forming the run to its commit returning: the key index's deletion
	// vectors, every attempt and the backoffs between them.
	Duration time.Duration
	// CommitTime is when the commit returned, by the writer's clock (the snapshot's own timestamp is the
	// committer's, in the table's metadata).
	CommitTime time.Time
	Table      table.Identifier
	WriterID   string
}

// Checkpoint marks everything accepted so far with an opaque token (source offsets, a log position) and ends the
// current batch there. With WithCheckpoints, a commit never includes rows after its newest token.
func (w *Writer) Checkpoint(ctx context.Context, token string) error {
	if len(token) > defaultMaxTokenBytes {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrTokenTooLarge, len(token), defaultMaxTokenBytes)
	}
	return w.pipe.Checkpoint(token)
}

// LastCheckpoint returns the newest token committed by this writer's ID on the table's current branch history.
func (w *Writer) LastCheckpoint(ctx context.Context) (token string, ok bool, err error) {
	tbl, err := w.env.loadTable(ctx)
	if err != nil {
		return "", false, err
	}
	token, _, ok = lastCheckpoint(tbl.Metadata(), w.env.branch, w.env.id)
	return token, ok, nil
}

// LastCheckpoint returns the newest token that the writer ID committed to the table, without opening a writer
// (and so without fencing a running one). Its errors are masked as NewWriter's are.
func LastCheckpoint(ctx context.Context, cat catalog.Catalog, ident table.Identifier, writerID string) (string, bool, error) {
	tbl, err := redact.WrapCatalog(cat, nil).LoadTable(ctx, ident)
	if err != nil {
		return "", false, fmt.Errorf("iceberg: load table %v: %w", ident, err)
	}
	token, _, ok := lastCheckpoint(tbl.Metadata(), table.MainBranch, writerID)
	return token, ok, nil
}
