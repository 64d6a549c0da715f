package iceberg

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/scalar"
	"github.com/icewriter/iceberg/internal/conform"
	"github.com/icewriter/iceberg/internal/pipeline"
)

// conformer is the conform.Conformer for the table's schema (casting, reordering, nullability, dead letters)
// with what the pipeline adds: whether small calls are gathered.
type conformer struct {
	*conform.Conformer
	target  *arrow.Schema // Conformer.Target()
	gathers bool          // small calls can be gathered (pipeline.Gatherable(target))
}

// newConformer returns the conformer for target (with the write-defaults defaults), reporting to v's hooks.
func (v *tableView) newConformer(target *arrow.Schema, defaults []scalar.Scalar) *conformer {
	return &conformer{Conformer: conform.New(target, defaults, v.mem, v.conformHooks, pipeline.GatherMaxRows),
		target: target, gathers: pipeline.Gatherable(target)}
}

// conformFor conforms one call's rows for the pipeline: a small call (under pipeline.GatherMaxRows rows, of types the
// gather copies) as a view the pipeline gathers, any other as an owned record.
func (c *conformer) conformFor(ctx context.Context, rec arrow.RecordBatch, kind opKind) (batchRecord, error) {
	view := rec != nil && rec.NumRows() < pipeline.GatherMaxRows && c.gathers
	out, size, _, err := c.ConformAs(ctx, rec, !view)
	if err != nil {
		return batchRecord{}, err
	}
	return batchRecord{Rec: out, Size: size, Kind: kind, View: view}, nil
}

// convert is Conformer.Convert, for the change stage's key and version columns.
func (c *conformer) convert(ctx context.Context, path []string, tf arrow.Field, col arrow.Array, mask []byte) (arrow.Array, error) {
	return c.Convert(ctx, path, tf, col, mask)
}
