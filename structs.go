package iceberg

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/icewriter/iceberg/internal/conform/structs"
	"github.com/icewriter/iceberg/shred"
)

// newStructStage returns the stage of WriteStructs and UpsertStructs (Go values to record batches), converting
// into the view's table schema, with hooks' relax and dead letters, and, when evolving, evolve to have the table
// take a Go type's fields first.
func newStructStage(mem memory.Allocator, view *tableView, hooks *conformHooks, evolving bool,
	evolve func(ctx context.Context, in *arrow.Schema) (*conformer, error)) *structs.Stage {
	env := structs.Env{Mem: mem, Target: func() *arrow.Schema { return view.conformer().target },
		DeadLetter: hooks.deadLetter != nil}
	if evolving {
		env.Evolve = func(ctx context.Context, in *arrow.Schema) (*arrow.Schema, error) {
			conf, err := evolve(ctx, in)
			if err != nil {
				return nil, err
			}
			return conf.target, nil
		}
	}
	if hooks.relax != nil {
		env.Relax = func(ctx context.Context, path []string) (bool, error) {
			_, changed, err := hooks.relax(ctx, view.conformer(), path)
			return changed, err
		}
	}
	return structs.New(env)
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
	rec, bad, err := structs.ToBatch(ctx, w.structs, rows)
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
		w.view.hooks.deadLetter(rows[b.Idx], b.Err)
	}
	return nil
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
