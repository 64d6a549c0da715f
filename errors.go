package iceberg

import (
	"errors"
	"fmt"

	"github.com/icewriter/iceberg/internal/pipeline"

	"github.com/icewriter/iceberg/internal/commit"
	"github.com/icewriter/iceberg/internal/conform"
)

var (
	// ErrClosed is returned by every call after Close or Abort.
	ErrClosed = pipeline.ErrClosed
	// ErrWriterFailed wraps the permanent error after which the writer stopped (fail-stop): nothing accepted after
	// the failed run is committed. Recreate the writer and replay from LastCheckpoint.
	ErrWriterFailed = errors.New("iceberg: writer failed")
	// ErrCommitStateUnknown means a commit's outcome could not be established (the catalog stayed unreachable past
	// the retry budget). Its files are kept, since the table may reference them.
	ErrCommitStateUnknown = commit.ErrCommitStateUnknown
	// ErrFenced means a newer writer with the same ID took over the table.
	ErrFenced = commit.ErrFenced
	// ErrInvalidOption is wrapped by NewWriter errors about an option's value.
	ErrInvalidOption = errors.New("iceberg: invalid option")
	// ErrTokenTooLarge is returned by Checkpoint for a token over the size cap (tokens are copied into metadata).
	ErrTokenTooLarge = errors.New("iceberg: checkpoint token too large")
	// ErrInvalidPosition is returned for a source position that cannot be recorded: a partition key or a position
	// over 1 KiB, or not valid UTF-8. The error names the partition.
	ErrInvalidPosition = commit.ErrInvalidPosition
	// ErrPositionMoved means a commit carried a source partition's position while the table's position of that
	// partition was no longer the one the writer resumed from or last committed: another writer committed the
	// partition meanwhile (a consumer paused past its session timeout whose partitions a group moved, then
	// resumed). The commit is refused inside the attempt that would have applied it, so nothing of the run lands;
	// the writer stops (ErrWriterFailed wraps it), and the partition's rows must be read again from the table's
	// position by whoever owns it now. Beside ErrFenced, not wrapping it: the writer ID was not taken over.
	ErrPositionMoved = commit.ErrPositionMoved
	// ErrPositionBackwards is returned by Checkpoint and CheckpointPositions (a Source's, a Router's) for a
	// position that comes before the partition's last one known to the writer, by WithPositionOrder: the newest
	// the writer was given for the partition, or the one Resume read (Resume replaces it). The error names the
	// partition and both positions; nothing of the call is recorded and the writer stays usable.
	ErrPositionBackwards = pipeline.ErrPositionBackwards
	// ErrEqualityDeletesRefused means an upsert or delete needed equality deletes, which
	// WithDeleteFiles(NoEqualityDeletesOrFail) refuses: the key index does not cover the table (it is off or
	// over its budget, or another writer changed the table since the index was built).
	ErrEqualityDeletesRefused = commit.ErrEqualityDeletesRefused
	// ErrNotSupported is returned for an operation the table or mode does not support yet.
	ErrNotSupported = conform.ErrNotSupported
)

// Errors that ColumnError wraps, for errors.Is.
var (
	ErrUnknownColumn  = conform.ErrUnknownColumn
	ErrTypeMismatch   = conform.ErrTypeMismatch
	ErrNullInRequired = conform.ErrNullInRequired
	ErrMissingColumn  = conform.ErrMissingColumn
)

// ColumnError names the column that a row or batch could not be written to. It is the conform package's type
// (an alias), so errors.As finds the errors that package returns.
type ColumnError = conform.ColumnError

// columnErr returns a *ColumnError for col wrapping err, with format and args appended when format is set.
func columnErr(col string, err error, format string, args ...any) error {
	return conform.ColumnErr(col, err, format, args...)
}

// optionErr reports a bad option value, naming the option.
func optionErr(name string, format string, args ...any) error {
	return fmt.Errorf("%w %s: "+format, append([]any{ErrInvalidOption, name}, args...)...)
}
