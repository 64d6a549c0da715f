package conform

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/scalar"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// WriteDefaults is, per top-level field of as (the Arrow schema of sc), the field's write-default as an Arrow
// scalar of its type (nil: none), built by iceberg-go's own projection, which fills a column missing from a
// file with it. All nil (nil slice) when sc has no write-default.
func WriteDefaults(sc *ice.Schema, as *arrow.Schema) (_ []scalar.Scalar, err error) {
	var fields []ice.NestedField
	for _, f := range sc.Fields() {
		if f.WriteDefault != nil {
			fields = append(fields, f)
		}
	}
	if len(fields) == 0 {
		return nil, nil
	}
	defer func() { // iceberg-go panics on a default its type cannot hold
		if r := recover(); r != nil {
			err = fmt.Errorf("iceberg: table write-default: %v", r)
		}
	}()
	// A one-row batch of a column no field has: every requested field is missing from it, so filled.
	id := sc.HighestFieldID() + 1
	file := ice.NewSchema(0, ice.NestedField{ID: id, Name: "_", Type: ice.PrimitiveTypes.Bool})
	bb := array.NewBooleanBuilder(memory.DefaultAllocator)
	bb.AppendNull()
	col := bb.NewArray()
	defer col.Release()
	bb.Release()
	md := arrow.MetadataFrom(map[string]string{"PARQUET:field_id": strconv.Itoa(id)})
	rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "_", Type: arrow.FixedWidthTypes.Boolean, Nullable: true, Metadata: md}}, nil),
		[]arrow.Array{col}, 1)
	defer rec.Release()
	out, err := table.ToRequestedSchema(context.Background(), ice.NewSchema(0, fields...), file, rec,
		table.SchemaOptions{UseWriteDefault: true, IncludeFieldIDs: true, FormatVersion: 3})
	if err != nil {
		return nil, fmt.Errorf("iceberg: table write-defaults: %w", err)
	}
	defer out.Release()
	defaults := make([]scalar.Scalar, as.NumFields())
	for i, f := range fields {
		idx := as.FieldIndices(f.Name)
		if len(idx) != 1 {
			continue
		}
		s, err := scalar.GetScalar(out.Column(i), 0)
		if err != nil {
			return nil, fmt.Errorf("iceberg: write-default of column %q: %w", f.Name, err)
		}
		defaults[idx[0]] = s
	}
	return defaults, nil
}

// SameDefaults reports whether a and b (from WriteDefaults) hold the same defaults.
func SameDefaults(a, b []scalar.Scalar) bool {
	return slices.EqualFunc(a, b, func(x, y scalar.Scalar) bool {
		return (x == nil) == (y == nil) && (x == nil || scalar.Equals(x, y))
	})
}
