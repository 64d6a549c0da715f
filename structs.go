package iceberg

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

// structStage converts Go values into record batches of the table's schema for WriteStructs and UpsertStructs:
// one shred.Converter per Go type, cached while the table's schema stays the same. With schema evolution it
// first has the table take the type's fields, and relaxes a required column that receives nulls; with a
// dead-letter function it sets apart the values that cannot be converted.
type structStage struct {
	mem   memory.Allocator
	view  *tableView
	hooks *conformHooks // the view's: relax (schema evolution on) and deadLetter, each optional
	// evolve has the table's schema take an input schema (WithSchemaEvolution; nil: off).
	evolve func(ctx context.Context, in *arrow.Schema) (*conformer, error)
	conv   sync.Map // reflect.Type -> *structConverter
}

// structConverter is a shred.Converter for one Go type and one table schema, guarded for concurrent callers.
type structConverter struct {
	mu     sync.Mutex
	schema *arrow.Schema
	conv   any // *shred.Converter[T]
}

// converterFor returns the cached converter of T into the current table schema. With schema evolution the
// table first takes T's fields (added columns, widened types).
func converterFor[T any](ctx context.Context, s *structStage) (*structConverter, *shred.Converter[T], error) {
	target := s.view.conformer().target
	key := reflect.TypeFor[T]()
	if v, ok := s.conv.Load(key); ok {
		sc := v.(*structConverter)
		if sc.schema == target {
			return sc, sc.conv.(*shred.Converter[T]), nil
		}
	}
	if s.evolve != nil {
		as, err := shred.SchemaOf[T]()
		if err != nil {
			return nil, nil, shredErr(err)
		}
		conf, err := s.evolve(ctx, as)
		if err != nil {
			return nil, nil, err
		}
		target = conf.target
	}
	conv, err := shred.NewConverter[T](target)
	if err != nil {
		return nil, nil, shredErr(err)
	}
	sc := &structConverter{schema: target, conv: conv}
	s.conv.Store(key, sc)
	return sc, conv, nil
}

// structRow is a row that could not be converted.
type structRow struct {
	idx int
	err error
}

// structsToBatch converts rows into a record batch in the table's schema. With schema evolution a required
// column that receives nulls is made optional; with a dead-letter function the rows that cannot be converted
// are returned apart (rec is nil when no row could be).
func structsToBatch[T any](ctx context.Context, s *structStage, rows []T) (arrow.RecordBatch, []structRow, error) {
	fixed := map[string]bool{} // columns schema evolution could not relax
	for range conform.MaxRetries {
		sc, conv, err := converterFor[T](ctx, s)
		if err != nil {
			return nil, nil, err
		}
		rec, bad, relaxCol, err := convertRows(s, sc, conv, rows, fixed)
		if err != nil {
			return nil, nil, shredErr(err)
		}
		if relaxCol == "" {
			return rec, bad, nil
		}
		cur := s.view.conformer()
		if _, changed, err := s.hooks.relax(ctx, cur, strings.Split(relaxCol, ".")); err != nil {
			return nil, nil, err
		} else if !changed && s.view.conformer().target == sc.schema {
			fixed[relaxCol] = true
		}
	}
	return nil, nil, fmt.Errorf("%w: more than %d schema changes for one call", errEvolve, conform.MaxRetries)
}

// convertRows runs the converter. A row-level error is returned as relaxCol when schema evolution may relax its
// column; else, with a dead-letter function, the row is set apart and conversion goes on after it.
func convertRows[T any](s *structStage, sc *structConverter, conv *shred.Converter[T], rows []T, fixed map[string]bool) (
	rec arrow.RecordBatch, bad []structRow, relaxCol string, err error) {
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
			bad = append(bad, structRow{idx: end, err: shredErr(pending)})
			start, end = end+1, len(rows)
			continue
		}
		out, err := conv.Convert(s.mem, rows[start:end])
		if err == nil {
			parts = append(parts, out)
			if end < len(rows) {
				bad = append(bad, structRow{idx: end, err: shredErr(pending)})
			}
			start, end = end+1, len(rows)
			continue
		}
		var fe *shred.FieldError
		if !errors.As(err, &fe) || fe.Row < 0 || fe.Row >= end-start {
			return nil, nil, "", err
		}
		if s.hooks.relax != nil && errors.Is(err, shred.ErrNull) && !fixed[fe.Column] {
			return nil, nil, fe.Column, nil
		}
		if s.hooks.deadLetter == nil {
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
	rec, err = encode.ConcatRecords(s.mem, conv.Schema(), parts)
	return rec, bad, "", err
}

// WriteStructs appends Go values as rows (see package shred for the mapping: the `iceberg` tag, else the json
// tag, else the field name in snake_case). It validates and accepts as Write does. With WithDeadLetter, the
// values that cannot be converted are routed there once the others are accepted.
func WriteStructs[T any](ctx context.Context, w *Writer, rows []T) error {
	return writeStructs(ctx, w, rows, w.Write)
}

// UpsertStructs upserts Go values as rows by key, as Upsert does (and routes bad values as WriteStructs does).
func UpsertStructs[T any](ctx context.Context, w *Writer, rows []T) error {
	return writeStructs(ctx, w, rows, w.Upsert)
}

func writeStructs[T any](ctx context.Context, w *Writer, rows []T, write func(context.Context, arrow.RecordBatch) error) error {
	if len(rows) == 0 {
		return nil
	}
	rec, bad, err := structsToBatch(ctx, w.structs, rows)
	if err != nil {
		return err
	}
	if rec != nil {
		err = write(ctx, rec)
		rec.Release()
		if err != nil {
			return err
		}
	}
	for _, b := range bad {
		w.structs.hooks.deadLetter(rows[b.idx], b.err)
	}
	return nil
}

// shredErr turns a shred.FieldError into a ColumnError, so callers see one error type.
func shredErr(err error) error {
	var fe *shred.FieldError
	if errors.As(err, &fe) {
		reason := fe.Err
		switch {
		case errors.Is(err, shred.ErrNull):
			reason = errors.Join(ErrNullInRequired, fe.Err)
		case errors.Is(err, shred.ErrUnknownColumn):
			reason = errors.Join(ErrUnknownColumn, fe.Err)
		case errors.Is(err, shred.ErrTypeMismatch), errors.Is(err, shred.ErrOutOfRange), errors.Is(err, shred.ErrUnsupportedType):
			reason = errors.Join(ErrTypeMismatch, fe.Err)
		}
		return &ColumnError{Column: fe.Column, Err: reason}
	}
	return err
}

// WithCreateFor is WithCreate with the schema inferred from the Go struct type T (see package shred for the
// mapping): columns are optional unless tagged `iceberg:"name,required"`, and identifier (key) columns are
// required. A type shred cannot map makes NewWriter fail, naming the field.
func WithCreateFor[T any](opts ...CreateOption) Option {
	schema, err := shred.SchemaOf[T]()
	if err != nil {
		return func(o *options) { o.schema.createErr = err }
	}
	return WithCreate(schema, opts...)
}
