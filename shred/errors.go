package shred

import (
	"errors"
	"fmt"
)

// FieldError reports a value or a field that could not be converted. Column is
// always set: the column name, or a dotted path for a nested field
// ("address.city"). Row is the index of the input row, or -1 when the error
// is not about one row (a plan or schema error).
type FieldError struct {
	Column string
	Row    int
	Err    error
}

// Error implements error.
func (e *FieldError) Error() string {
	if e.Row < 0 {
		return fmt.Sprintf("shred: column %q: %v", e.Column, e.Err)
	}
	return fmt.Sprintf("shred: column %q (row %d): %v", e.Column, e.Row, e.Err)
}

// Unwrap returns the underlying error.
func (e *FieldError) Unwrap() error { return e.Err }

// ErrUnsupportedType is wrapped by errors about Go types that have no Arrow mapping.
var ErrUnsupportedType = errors.New("unsupported type")

// ErrUnknownColumn is wrapped when an input column has no column in the target schema.
var ErrUnknownColumn = errors.New("no such column in the target schema")

// ErrNull is wrapped when a null is written into a non-nullable column.
var ErrNull = errors.New("null value in a non-nullable column")

// ErrOutOfRange is wrapped when a value does not fit the column's type.
var ErrOutOfRange = errors.New("value out of range")

// ErrInvalidJSON is wrapped when JSON text is malformed (a JSON lines line, a
// json.RawMessage or a document for a variant column).
var ErrInvalidJSON = errors.New("invalid JSON")

// ErrInexactNumber is wrapped, under VariantJSONOptions.ExactNumbers, when a
// JSON number has no exact variant value (1e-400, 41 significant digits that
// no double prints as).
var ErrInexactNumber = errors.New("JSON number has no exact variant value")

// ErrTypeMismatch is wrapped when a value's type cannot be converted to the column's type.
var ErrTypeMismatch = errors.New("type mismatch")

func planErr(col string, format string, args ...any) *FieldError {
	return &FieldError{Column: col, Row: -1, Err: fmt.Errorf(format, args...)}
}

func rowErr(col string, row int, err error) *FieldError {
	return &FieldError{Column: col, Row: row, Err: err}
}
