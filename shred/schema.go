package shred

import (
	"fmt"
	"reflect"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/extensions"
)

// TimestampType is the Arrow type of time.Time fields: microseconds, UTC.
var TimestampType = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}

// TimestampNsType is the Arrow type of time.Time fields tagged with the ns
// option (`iceberg:"ts,ns"`): nanoseconds, UTC (Iceberg timestamptz_ns).
var TimestampNsType = &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}

// SchemaOf returns the Arrow schema inferred from T's fields (T must be a
// struct type). A field tagged `required` is Nullable=false; every other
// field is Nullable=true, including non-pointer scalars. Nested struct fields
// follow the same rules; list elements and map values are nullable.
func SchemaOf[T any]() (*arrow.Schema, error) {
	return schemaOfType(reflect.TypeFor[T]())
}

func schemaOfType(t reflect.Type) (*arrow.Schema, error) {
	sp, err := planFor(t)
	if err != nil {
		return nil, err
	}
	fields, err := arrowFields(sp.fields, "")
	if err != nil {
		return nil, err
	}
	return arrow.NewSchema(fields, nil), nil
}

func arrowFields(gfs []goField, prefix string) ([]arrow.Field, error) {
	out := make([]arrow.Field, 0, len(gfs))
	for _, gf := range gfs {
		col := prefix + gf.name
		dt, err := arrowType(gf.typ, gf, col)
		if err != nil {
			return nil, err
		}
		out = append(out, arrow.Field{Name: gf.name, Type: dt, Nullable: !gf.required})
	}
	return out, nil
}

func unsupported(gf goField, col string, t reflect.Type) error {
	return planErr(col, "Go field %s of type %v: %w", gf.goName, t, ErrUnsupportedType)
}

// arrowType is the inferred Arrow type of a Go type. gf carries the tag
// options and names for messages.
func arrowType(t reflect.Type, gf goField, col string) (arrow.DataType, error) {
	if t.Kind() == reflect.Pointer {
		return arrowType(t.Elem(), gf, col)
	}
	if v, _, ok := sqlNullParts(t); ok {
		return arrowType(v.Type, gf, col)
	}
	if isVariantGoType(t) {
		return extensions.NewDefaultVariantType(), nil
	}
	switch t {
	case timeType:
		if gf.nanos {
			return TimestampNsType, nil
		}
		return TimestampType, nil
	case decimalType:
		if !gf.decimal {
			return nil, planErr(col, "Go field %s: decimal128.Num needs a decimal(P,S) tag option", gf.goName)
		}
		return &arrow.Decimal128Type{Precision: gf.prec, Scale: gf.scale}, nil
	}
	switch t.Kind() {
	case reflect.Bool:
		return arrow.FixedWidthTypes.Boolean, nil
	case reflect.Int8:
		return arrow.PrimitiveTypes.Int8, nil
	case reflect.Int16, reflect.Uint8:
		return arrow.PrimitiveTypes.Int16, nil
	case reflect.Int32, reflect.Uint16:
		return arrow.PrimitiveTypes.Int32, nil
	case reflect.Int64, reflect.Int, reflect.Uint32, reflect.Uint64, reflect.Uint:
		return arrow.PrimitiveTypes.Int64, nil
	case reflect.Float32:
		return arrow.PrimitiveTypes.Float32, nil
	case reflect.Float64:
		return arrow.PrimitiveTypes.Float64, nil
	case reflect.String:
		return arrow.BinaryTypes.String, nil
	case reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			if t.Len() == 16 {
				return extensions.NewUUIDType(), nil
			}
			return &arrow.FixedSizeBinaryType{ByteWidth: t.Len()}, nil
		}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return arrow.BinaryTypes.Binary, nil
		}
		et, err := arrowType(t.Elem(), goField{goName: gf.goName, nanos: gf.nanos}, col)
		if err != nil {
			return nil, err
		}
		return arrow.ListOfField(arrow.Field{Name: "element", Type: et, Nullable: true}), nil
	case reflect.Map:
		kt, err := mapKeyType(t.Key())
		if err != nil {
			return nil, planErr(col, "Go field %s of type %v: %w", gf.goName, t, err)
		}
		vt, err := arrowType(t.Elem(), goField{goName: gf.goName, nanos: gf.nanos}, col)
		if err != nil {
			return nil, err
		}
		return arrow.MapOf(kt, vt), nil
	case reflect.Struct:
		sp, err := planFor(t)
		if err != nil {
			return nil, err
		}
		fs, err := arrowFields(sp.fields, col+".")
		if err != nil {
			return nil, err
		}
		return arrow.StructOf(fs...), nil
	}
	return nil, unsupported(gf, col, t)
}

func mapKeyType(t reflect.Type) (arrow.DataType, error) {
	switch t.Kind() {
	case reflect.String:
		return arrow.BinaryTypes.String, nil
	case reflect.Int8:
		return arrow.PrimitiveTypes.Int8, nil
	case reflect.Int16, reflect.Uint8:
		return arrow.PrimitiveTypes.Int16, nil
	case reflect.Int32, reflect.Uint16:
		return arrow.PrimitiveTypes.Int32, nil
	case reflect.Int64, reflect.Int, reflect.Uint32, reflect.Uint64, reflect.Uint:
		return arrow.PrimitiveTypes.Int64, nil
	}
	return nil, fmt.Errorf("map key type %v: %w (want string or integer keys)", t, ErrUnsupportedType)
}
