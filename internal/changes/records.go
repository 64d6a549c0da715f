package changes

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/icewriter/iceberg/internal/arrowx"
	"github.com/icewriter/iceberg/internal/conform"
)

// DeleteRecord builds the key-only record of the keys a call deletes (nil when none): for each key column, the
// values of the rows deleting their key, then those of the rows deleting their before-image key, taken into
// the writer's memory.
func DeleteRecord(ctx context.Context, mem memory.Allocator, cb *Batch, plan *Plan) (arrow.RecordBatch, int64, error) {
	n := len(plan.delKeys) + len(plan.delBefore)
	if n == 0 {
		return nil, 0, nil
	}
	take := conform.NewRowTaker(ctx, mem)
	cols := make([]arrow.Array, len(cb.keyNames))
	defer arrowx.ReleaseArrays(cols)
	var size int64
	for i := range cb.keyNames {
		var parts []arrow.Array
		if len(plan.delKeys) > 0 {
			p, err := take.Array(cb.keys[i], plan.delKeys)
			if err != nil {
				return nil, 0, fmt.Errorf("iceberg: take the deleted keys: %w", err)
			}
			parts = append(parts, p)
		}
		if len(plan.delBefore) > 0 {
			p, err := take.Array(cb.before[i], plan.delBefore)
			if err != nil {
				arrowx.ReleaseArrays(parts)
				return nil, 0, fmt.Errorf("iceberg: take the deleted keys: %w", err)
			}
			parts = append(parts, p)
		}
		if len(parts) == 1 {
			cols[i] = parts[0]
		} else {
			col, err := array.Concatenate(parts, mem)
			arrowx.ReleaseArrays(parts)
			if err != nil {
				return nil, 0, err
			}
			cols[i] = col
		}
		size += arrowx.ArraySize(cols[i].Data())
	}
	return array.NewRecordBatch(cb.keySchema, cols, int64(n)), size, nil
}

// UpsertRecord returns the rows a call upserts (nil when none) in the table's schema, with the memory they hold,
// and the rows of data routed to the dead letter handler (ascending). Only the upserted rows are checked: a
// delete row's other columns may be null even where the table requires them. When data needs no conversion
// (Conformer.KeepRows) it is kept as it is, uncopied, and sel names the upserted rows (plan.upserts): the
// batch's resolve takes them, once, with the rows of the calls before and after it. Otherwise the upserted rows
// are conformed into the writer's memory and sel is nil.
func UpsertRecord(ctx context.Context, conf *conform.Conformer, data arrow.RecordBatch, plan *Plan) (rec arrow.RecordBatch, sel []int32, size int64, dead []int32, err error) {
	if len(plan.upserts) == 0 {
		return nil, nil, 0, nil, nil
	}
	if rec, size, ok := conf.KeepRows(data, plan.upserts); ok {
		return rec, plan.upserts, size, nil, nil
	}
	rec, size, dead, err = conformUpserts(ctx, conf, data, plan)
	return rec, nil, size, dead, err
}

// conformUpserts conforms the rows a call upserts into the table's schema, in the writer's memory.
func conformUpserts(ctx context.Context, conf *conform.Conformer, data arrow.RecordBatch, plan *Plan) (arrow.RecordBatch, int64, []int32, error) {
	var out arrow.RecordBatch
	var size int64
	var dead []int64
	var err error
	if len(plan.upserts) == int(data.NumRows()) {
		out, size, dead, err = conf.Conform(ctx, data)
	} else {
		taken, terr := conform.NewRowTaker(ctx, conf.Mem()).Record(data, plan.upserts)
		if terr != nil {
			return nil, 0, nil, fmt.Errorf("iceberg: take the upserted rows: %w", terr)
		}
		defer taken.Release()
		// The rows were copied into the writer's memory already: the conformed record may share those buffers
		// (a view keeps them alive) instead of copying them a second time.
		out, size, dead, err = conf.ConformView(ctx, taken)
	}
	if err != nil {
		return nil, 0, nil, err
	}
	var rows []int32
	for _, d := range dead {
		rows = append(rows, plan.upserts[d]) // the conformed rows are plan.upserts, in order
	}
	return out, size, rows, nil
}
