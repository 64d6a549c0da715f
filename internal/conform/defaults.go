package conform

import (
	"context"
	"fmt"
	"maps"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/scalar"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// Defaults are fields' write-defaults by field ID, as Arrow scalars of the field's type (nil: none).
type Defaults map[int]scalar.Scalar

// WriteDefaults are the write-defaults of sc's fields, nested ones included (nil when none has one), built by
// iceberg-go's own projection, which fills a field missing from a file with it.
func WriteDefaults(sc *ice.Schema) (_ Defaults, err error) {
	flat, err := sc.FlatFields()
	if err != nil {
		return nil, fmt.Errorf("iceberg: table write-defaults: %w", err)
	}
	var fields []ice.NestedField
	for f := range flat {
		if f.WriteDefault != nil {
			// Lifted to the top level under its own ID: the projection fills it by ID.
			fields = append(fields, ice.NestedField{ID: f.ID, Name: "f" + strconv.Itoa(f.ID), Type: f.Type,
				Required: f.Required, WriteDefault: f.WriteDefault})
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
	md := arrow.MetadataFrom(map[string]string{fieldIDKey: strconv.Itoa(id)})
	rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "_", Type: arrow.FixedWidthTypes.Boolean, Nullable: true, Metadata: md}}, nil),
		[]arrow.Array{col}, 1)
	defer rec.Release()
	out, err := table.ToRequestedSchema(context.Background(), ice.NewSchema(0, fields...), file, rec,
		table.SchemaOptions{UseWriteDefault: true, IncludeFieldIDs: true, FormatVersion: 3})
	if err != nil {
		return nil, fmt.Errorf("iceberg: table write-defaults: %w", err)
	}
	defer out.Release()
	defaults := make(Defaults, len(fields))
	for i, f := range fields {
		s, err := scalar.GetScalar(out.Column(i), 0)
		if err != nil {
			name, _ := sc.FindColumnName(f.ID)
			return nil, fmt.Errorf("iceberg: write-default of column %q: %w", name, err)
		}
		defaults[f.ID] = s
	}
	return defaults, nil
}

// fieldIDKey is the Arrow field metadata key of the Iceberg field ID (iceberg-go's and Parquet's).
const fieldIDKey = "PARQUET:field_id"

// Of is the write-default of the target field f (nil: none).
func (d Defaults) Of(f arrow.Field) scalar.Scalar {
	if len(d) == 0 {
		return nil
	}
	v, ok := f.Metadata.GetValue(fieldIDKey)
	if !ok {
		return nil
	}
	id, err := strconv.Atoi(v)
	if err != nil {
		return nil
	}
	return d[id]
}

// SameDefaults reports whether a and b (from WriteDefaults) hold the same defaults.
func SameDefaults(a, b Defaults) bool {
	return maps.EqualFunc(a, b, func(x, y scalar.Scalar) bool { return scalar.Equals(x, y) })
}
