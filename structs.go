package iceberg

import (
	"context"
	"errors"
	"reflect"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/icewriter/iceberg/shred"
)

// structConverter is a shred.Converter for one Go type and one table schema, guarded for concurrent callers.
type structConverter struct {
	mu     sync.Mutex
	schema *arrow.Schema
	conv   any // *shred.Converter[T]
}

// converterFor returns the writer's cached converter of T into the current table schema.
func converterFor[T any](w *Writer) (*structConverter, *shred.Converter[T], error) {
	target := w.Schema()
	key := reflect.TypeFor[T]()
	if v, ok := w.structConv.Load(key); ok {
		sc := v.(*structConverter)
		if sc.schema == target {
			return sc, sc.conv.(*shred.Converter[T]), nil
		}
	}
	conv, err := shred.NewConverter[T](target)
	if err != nil {
		return nil, nil, shredErr(err)
	}
	sc := &structConverter{schema: target, conv: conv}
	w.structConv.Store(key, sc)
	return sc, conv, nil
}

// structsToBatch converts rows into a record batch in the table's schema.
func structsToBatch[T any](w *Writer, rows []T) (arrow.RecordBatch, error) {
	sc, conv, err := converterFor[T](w)
	if err != nil {
		return nil, err
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	rec, err := conv.Convert(w.mem, rows)
	if err != nil {
		return nil, shredErr(err)
	}
	return rec, nil
}

// WriteStructs appends Go values as rows (see package shred for the mapping: the `iceberg` tag, else the json
// tag, else the field name in snake_case). It validates and accepts as Write does.
func WriteStructs[T any](ctx context.Context, w *Writer, rows []T) error {
	if len(rows) == 0 {
		return nil
	}
	rec, err := structsToBatch(w, rows)
	if err != nil {
		return err
	}
	defer rec.Release()
	return w.Write(ctx, rec)
}

// UpsertStructs upserts Go values as rows by key, as Upsert does.
func UpsertStructs[T any](ctx context.Context, w *Writer, rows []T) error {
	if len(rows) == 0 {
		return nil
	}
	rec, err := structsToBatch(w, rows)
	if err != nil {
		return err
	}
	defer rec.Release()
	return w.Upsert(ctx, rec)
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
