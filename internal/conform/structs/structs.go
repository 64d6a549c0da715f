// Package structs converts Go values into record batches of a table's schema for WriteStructs and
// UpsertStructs (Stage): one shred.Converter per Go type, cached while the table's schema stays the same. With
// schema evolution it first has the table take the type's fields, and relaxes a required column that receives
// nulls; with dead letters on it sets apart the values that cannot be converted. What it needs of the writer
// comes through Env.
package structs

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/icewriter/iceberg/internal/conform"
	"github.com/icewriter/iceberg/internal/encode"
	"github.com/icewriter/iceberg/shred"
)

// Env is what the stage asks of the writer.
type Env struct {
	Mem memory.Allocator // the writer's memory, which the batches are built in
	// Target is the table's Arrow schema now (a pointer that changes only when the schema does).
	Target func() *arrow.Schema
	// Evolve has the table's schema take an input schema and returns the table's Arrow schema then
	// (WithSchemaEvolution; nil: off).
	Evolve func(ctx context.Context, in *arrow.Schema) (*arrow.Schema, error)
	// Relax makes the required column at path optional, reporting whether the table's schema changed (nil:
	// schema evolution off).
	Relax func(ctx context.Context, path []string) (changed bool, err error)
	// DeadLetter is set when the rows that cannot be converted are set apart (WithDeadLetter) instead of failing
	// the call.
	DeadLetter bool
}

// Stage converts Go values into record batches in the table's schema, concurrently.
type Stage struct {
	env  Env
	conv sync.Map // reflect.Type -> *structConverter
}

// New returns a Stage working through env.
func New(env Env) *Stage { return &Stage{env: env} }

// structConverter is a shred.Converter for one Go type and one table schema, guarded for concurrent callers.
type structConverter struct {
	mu     sync.Mutex
	schema *arrow.Schema
	conv   any // *shred.Converter[T]
}

// converterFor returns the cached converter of T into the current table schema. With schema evolution the
// table first takes T's fields (added columns, widened types).
func converterFor[T any](ctx context.Context, s *Stage) (*structConverter, *shred.Converter[T], error) {
	target := s.env.Target()
	key := reflect.TypeFor[T]()
	if v, ok := s.conv.Load(key); ok {
		sc := v.(*structConverter)
		if sc.schema == target {
			return sc, sc.conv.(*shred.Converter[T]), nil
		}
	}
	if s.env.Evolve != nil {
		as, err := shred.SchemaOf[T]()
		if err != nil {
			return nil, nil, ShredErr(err)
		}
		if target, err = s.env.Evolve(ctx, as); err != nil {
			return nil, nil, err
		}
	}
	conv, err := shred.NewConverter[T](target)
	if err != nil {
		return nil, nil, ShredErr(err)
	}
	sc := &structConverter{schema: target, conv: conv}
	s.conv.Store(key, sc)
	return sc, conv, nil
}

// BadRow is a row that could not be converted: its index in the call's rows and the reason.
type BadRow struct {
	Idx int
	Err error
}

// ToBatch converts rows into a record batch in the table's schema. With schema evolution a required
// column that receives nulls is made optional; with a dead-letter function the rows that cannot be converted
// are returned apart (rec is nil when no row could be).
func ToBatch[T any](ctx context.Context, s *Stage, rows []T) (arrow.RecordBatch, []BadRow, error) {
	fixed := map[string]bool{} // columns schema evolution could not relax
	for range conform.MaxRetries {
		sc, conv, err := converterFor[T](ctx, s)
		if err != nil {
			return nil, nil, err
		}
		rec, bad, relaxCol, err := convertRows(s, sc, conv, rows, fixed)
		if err != nil {
			return nil, nil, ShredErr(err)
		}
		if relaxCol == "" {
			return rec, bad, nil
		}
		if changed, err := s.env.Relax(ctx, strings.Split(relaxCol, ".")); err != nil {
			return nil, nil, err
		} else if !changed && s.env.Target() == sc.schema {
			fixed[relaxCol] = true
		}
	}
	return nil, nil, fmt.Errorf("%w: more than %d schema changes for one call", conform.ErrEvolve, conform.MaxRetries)
}

// convertRows runs the converter. A row-level error is returned as relaxCol when schema evolution may relax its
// column; else, with a dead-letter function, the row is set apart and conversion goes on after it.
func convertRows[T any](s *Stage, sc *structConverter, conv *shred.Converter[T], rows []T, fixed map[string]bool) (
	rec arrow.RecordBatch, bad []BadRow, relaxCol string, err error) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	var parts []arrow.RecordBatch
	defer func() {
		for _, p := range parts {
			p.Release()
		}
	}()
	// Convert rows[start:end]; a failure names some bad row (not necessarily the first: shred converts column by
	// column), so the prefix before it is tried next, until a prefix converts and the row after it is set apart.
	start, end := 0, len(rows)
	var pending error // the error of the row at end, when end < len(rows)
	for start < len(rows) {
		if start == end {
			bad = append(bad, BadRow{Idx: end, Err: ShredErr(pending)})
			start, end = end+1, len(rows)
			continue
		}
		out, err := conv.Convert(s.env.Mem, rows[start:end])
		if err == nil {
			parts = append(parts, out)
			if end < len(rows) {
				bad = append(bad, BadRow{Idx: end, Err: ShredErr(pending)})
			}
			start, end = end+1, len(rows)
			continue
		}
		var fe *shred.FieldError
		if !errors.As(err, &fe) || fe.Row < 0 || fe.Row >= end-start {
			return nil, nil, "", err
		}
		if s.env.Relax != nil && errors.Is(err, shred.ErrNull) && !fixed[fe.Column] {
			return nil, nil, fe.Column, nil
		}
		if !s.env.DeadLetter {
			return nil, nil, "", err
		}
		end, pending = start+fe.Row, err
	}
	switch len(parts) {
	case 0:
		return nil, bad, "", nil
	case 1:
		rec, parts = parts[0], nil
		return rec, bad, "", nil
	}
	rec, err = encode.ConcatRecords(s.env.Mem, conv.Schema(), parts)
	return rec, bad, "", err
}

// ShredErr turns a shred.FieldError into a ColumnError, so callers see one error type.
func ShredErr(err error) error {
	var fe *shred.FieldError
	if errors.As(err, &fe) {
		reason := fe.Err
		switch {
		case errors.Is(err, shred.ErrNull):
			reason = errors.Join(conform.ErrNullInRequired, fe.Err)
		case errors.Is(err, shred.ErrUnknownColumn):
			reason = errors.Join(conform.ErrUnknownColumn, fe.Err)
		case errors.Is(err, shred.ErrTypeMismatch), errors.Is(err, shred.ErrOutOfRange), errors.Is(err, shred.ErrUnsupportedType),
			errors.Is(err, shred.ErrInvalidJSON):
			reason = errors.Join(conform.ErrTypeMismatch, fe.Err)
		}
		return &conform.ColumnError{Column: fe.Column, Err: reason}
	}
	return err
}
