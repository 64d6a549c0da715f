package iceberg

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"
	"github.com/icewriter/iceberg/internal/arrowx"
	"github.com/icewriter/iceberg/internal/changes"
)

// ErrNoKeys is returned by Upsert and Delete on a writer with no key: neither WithKeys nor identifier fields.
var ErrNoKeys = errors.New("iceberg: no key columns (use WithKeys or set the table's identifier fields)")

type opKind = changes.Kind

const (
	opInsert = changes.Insert
	opUpsert = changes.Upsert
	opDelete = changes.Delete
)

// updateMode is a writer's update mode on tbl: WithMode, else the table's write.update.mode, else MergeOnRead.
func updateMode(o *options, tbl *table.Table) Mode {
	if o.keyed.mode != nil {
		return *o.keyed.mode
	}
	if tbl.Properties().Get("write.update.mode", "") == table.WriteModeCopyOnWrite {
		return CopyOnWrite
	}
	return MergeOnRead
}

// Upsert replaces any existing row with the same key (WithKeys or the table's identifier fields) and inserts
// the rest. Later operations on a key win over earlier ones, across batches and coalesced commits.
//
// In MergeOnRead mode each commit deletes the earlier rows of the keys it upserts or deletes with delete files:
// while the key index places every key (WithKeyIndexBytes), by position on the files that hold them (deletion
// vectors on a format-v3 table, position delete files on v2; on v3 the new row keeps the replaced row's
// _row_id), else equality deletes on the key, or what WithDeleteFiles says instead. Rows superseded inside the
// writer are dropped before they are written. Key columns must not be null.
func (w *Writer) Upsert(ctx context.Context, rec arrow.RecordBatch) error {
	return w.upsert(ctx, "", rec)
}

// upsert is Upsert of a source partition's rows.
func (w *Writer) upsert(ctx context.Context, source string, rec arrow.RecordBatch) error {
	if err := w.pipe.Usable(); err != nil {
		return err
	}
	tbl, conf := w.view.get()
	ks := w.keys.spec
	err := w.keys.check("Upsert", tbl.Metadata().Version())
	if err != nil {
		return err
	}
	if w.view.evolving() && rec != nil {
		if conf, err = w.evolveFor(ctx, rec.Schema()); err != nil {
			return err
		}
	}
	r, err := conf.conformFor(ctx, rec, opUpsert)
	if err != nil {
		return err
	}
	if err := checkKeyNulls(keyColumns(r.Rec, ks, false), ks); err != nil {
		r.Rec.Release()
		return err
	}
	r.Source = source
	return w.accept(ctx, r)
}

// Delete removes the rows whose key matches a row of keys (only the key columns are read).
func (w *Writer) Delete(ctx context.Context, keys arrow.RecordBatch) error {
	return w.delete(ctx, "", keys)
}

// delete is Delete of a source partition's keys.
func (w *Writer) delete(ctx context.Context, source string, keys arrow.RecordBatch) error {
	if err := w.pipe.Usable(); err != nil {
		return err
	}
	tbl, conf := w.view.get()
	ks := w.keys.spec
	err := w.keys.check("Delete", tbl.Metadata().Version())
	if err != nil {
		return err
	}
	if keys == nil {
		return fmt.Errorf("iceberg: nil record batch")
	}
	cols := make([]arrow.Array, len(ks.names))
	release := func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}
	var size int64
	for i, name := range ks.names {
		idx := keys.Schema().FieldIndices(name)
		if len(idx) == 0 {
			release()
			return columnErr(name, ErrMissingColumn, "Delete needs every key column %v", ks.names)
		}
		col, err := conf.Column(ctx, ks.schemaFor(conf.target).Field(i), keys.Schema().Field(idx[0]), keys.Column(idx[0]))
		if err != nil {
			release()
			return err
		}
		cols[i] = col
		size += arrowx.ArraySize(col.Data())
	}
	owned := array.NewRecordBatch(ks.arraysSchema(cols), cols, keys.NumRows())
	release()
	return w.accept(ctx, batchRecord{Rec: owned, Size: size, Kind: opDelete, Source: source})
}

func checkKeyNulls(cols []arrow.Array, ks *keySpec) error {
	for i, c := range cols {
		if c.NullN() > 0 {
			return columnErr(ks.names[i], ErrNullInRequired, "key column has %d null value(s)", c.NullN())
		}
	}
	return nil
}
