package commit

import "errors"

// The errors a commit reports; the root package re-exports them under the same names, so errors.Is matches
// either.
var (
	// ErrCommitStateUnknown means a commit's outcome could not be established.
	ErrCommitStateUnknown = errors.New("iceberg: commit state unknown")
	// ErrFenced means a newer writer with the same ID took over the table.
	ErrFenced = errors.New("iceberg: fenced by a newer writer with the same ID")
	// ErrPositionMoved means a commit carried a source partition's position while the table held another one
	// than the run's base for it.
	ErrPositionMoved = errors.New("iceberg: source position moved by another writer")
	// ErrInvalidPosition is returned for a source position that cannot be recorded (CheckPosition).
	ErrInvalidPosition = errors.New("iceberg: invalid source position")
	// ErrEqualityDeletesRefused means an upsert or delete needed equality deletes, which
	// NoEqualityDeletesOrFail refuses.
	ErrEqualityDeletesRefused = errors.New("iceberg: equality deletes refused (WithDeleteFiles(NoEqualityDeletesOrFail)) and the key index does not cover the table")
)
