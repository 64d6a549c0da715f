package conform

import (
	"errors"
	"fmt"

	"github.com/icewriter/iceberg/internal/keyindex/keyenc"
)

// Errors that ColumnError wraps, for errors.Is (the root package exports them under the same names).
var (
	ErrUnknownColumn  = errors.New("no such column in the table")
	ErrTypeMismatch   = keyenc.ErrTypeMismatch
	ErrNullInRequired = errors.New("null in a required column")
	ErrMissingColumn  = errors.New("required column missing")
	// ErrNotSupported is an operation the table or mode does not support (yet).
	ErrNotSupported = errors.New("iceberg: not supported")
	// ErrEvolve wraps the failure of a schema change.
	ErrEvolve = errors.New("iceberg: schema evolution")
)

// ColumnError names the column that a row or batch could not be written to. The root package exports it as
// iceberg.ColumnError (an alias), so errors.As finds it under either name.
type ColumnError struct {
	Column string
	Err    error
}

// Error names the column and the reason.
func (e *ColumnError) Error() string { return fmt.Sprintf("iceberg: column %q: %v", e.Column, e.Err) }

// Unwrap returns the reason.
func (e *ColumnError) Unwrap() error { return e.Err }

// ColumnErr returns a *ColumnError for col wrapping err, with format and args appended to its message when
// format is not empty.
func ColumnErr(col string, err error, format string, args ...any) error {
	if format == "" {
		return &ColumnError{Column: col, Err: err}
	}
	return &ColumnError{Column: col, Err: fmt.Errorf("%w: "+format, append([]any{err}, args...)...)}
}
