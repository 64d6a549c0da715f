// Package evolve plans schema evolution: what a table schema lacks to take batches of an Arrow schema (added
// columns, promotions), making a required column optional, adding a column with a default, and the schema
// update that applies such a plan in a transaction. It computes from schemas only; committing the change is
// the caller's (the writer's commit queue).
package evolve

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/icewriter/iceberg/internal/conform"
)

// Change is one change to the table schema: exactly one of Add, Promote and Relax is set.
type Change struct {
	Path    []string
	Add     ice.Type // add an optional column of this type
	Initial any      // with Add: the column's initial-default and write-default, nil for none
	Promote ice.Type // widen the column to this type
	Relax   bool     // make the required column optional
}

// Plan lists the changes a table schema needs (none: it needs nothing).
type Plan func(sc *ice.Schema) ([]Change, error)

// String describes the change, naming the column.
func (c Change) String() string {
	name := strings.Join(c.Path, ".")
	switch {
	case c.Add != nil && c.Initial != nil:
		return fmt.Sprintf("add %s %s default %v", name, c.Add, c.Initial)
	case c.Add != nil:
		return fmt.Sprintf("add %s %s", name, c.Add)
	case c.Promote != nil:
		return fmt.Sprintf("promote %s to %s", name, c.Promote)
	}
	return fmt.Sprintf("make %s optional", name)
}

// For lists the changes the table schema sc needs to take batches of schema in; keys are the writer's key
// columns (WithKeys), which are never relaxed. Type differences that are not promotions are left to the
// conformer, which casts what it can and reports the rest.
func For(in *arrow.Schema, sc *ice.Schema, keys []string) ([]Change, error) {
	var out []Change
	for _, f := range in.Fields() {
		tf, ok := TopField(sc, f.Name)
		if !ok {
			t, err := ColumnType(f)
			if err != nil {
				return nil, conform.ColumnErr(f.Name, conform.ErrTypeMismatch, "cannot add a column of type %s: %v", f.Type, err)
			}
			out = append(out, Change{Path: []string{f.Name}, Add: t})
			continue
		}
		key := isKey(keys, sc, f.Name, tf.ID)
		if err := planField(&out, []string{f.Name}, f.Type, tf, key); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// TopField is the top-level field name of sc.
func TopField(sc *ice.Schema, name string) (ice.NestedField, bool) {
	for _, f := range sc.Fields() {
		if f.Name == name {
			return f, true
		}
	}
	return ice.NestedField{}, false
}

// isKey reports whether a column is a key column (keys, from WithKeys, or an identifier field): keys are
// never relaxed. They
// may be promoted (int to long, float to double, a wider decimal): a key encodes the same before and after
// (keyenc.Encoder), so the key index holds, and the key columns' types follow the batch's (keySpec.schemaOf).
func isKey(keys []string, sc *ice.Schema, top string, id int) bool {
	if slices.Contains(keys, top) {
		return true
	}
	return slices.Contains(sc.IdentifierFieldIDs, id)
}

// planField compares one input type with the table field at path, recursively.
func planField(out *[]Change, path []string, in arrow.DataType, tf ice.NestedField, key bool) error {
	child := func(name string) []string { return append(slices.Clone(path), name) }
	switch tt := tf.Type.(type) {
	case *ice.StructType:
		st, ok := in.(*arrow.StructType)
		if !ok {
			return nil
		}
		for _, f := range st.Fields() {
			idx := slices.IndexFunc(tt.FieldList, func(n ice.NestedField) bool { return n.Name == f.Name })
			if idx < 0 {
				t, err := ColumnType(f)
				if err != nil {
					return conform.ColumnErr(strings.Join(child(f.Name), "."), conform.ErrTypeMismatch,
						"cannot add a field of type %s: %v", f.Type, err)
				}
				*out = append(*out, Change{Path: child(f.Name), Add: t})
				continue
			}
			if err := planField(out, child(f.Name), f.Type, tt.FieldList[idx], key); err != nil {
				return err
			}
		}
	case *ice.ListType:
		var elem arrow.DataType
		switch lt := in.(type) {
		case *arrow.ListType:
			elem = lt.Elem()
		case *arrow.LargeListType:
			elem = lt.Elem()
		case *arrow.FixedSizeListType:
			elem = lt.Elem()
		default:
			return nil
		}
		return planField(out, child("element"), elem, tt.ElementField(), key)
	case *ice.MapType:
		if mt, ok := in.(*arrow.MapType); ok {
			return planField(out, child("value"), mt.ItemType(), tt.ValueField(), key)
		}
	case ice.Int32Type:
		if in.ID() == arrow.INT64 || in.ID() == arrow.UINT32 || in.ID() == arrow.UINT64 {
			*out = append(*out, Change{Path: path, Promote: ice.PrimitiveTypes.Int64})
		}
	case ice.Float32Type:
		if in.ID() == arrow.FLOAT64 {
			*out = append(*out, Change{Path: path, Promote: ice.PrimitiveTypes.Float64})
		}
	case ice.DecimalType:
		if dt, ok := in.(arrow.DecimalType); ok && int(dt.GetScale()) == tt.Scale() &&
			int(dt.GetPrecision()) > tt.Precision() && dt.GetPrecision() <= 38 {
			*out = append(*out, Change{Path: path, Promote: ice.DecimalTypeOf(int(dt.GetPrecision()), tt.Scale())})
		}
	}
	return nil
}

// ColumnType is the Iceberg type of a column added for an Arrow field: every nested field optional.
func ColumnType(f arrow.Field) (ice.Type, error) {
	f.Nullable = true
	sc, err := table.ArrowSchemaToIcebergWithFreshIDs(arrow.NewSchema([]arrow.Field{f}, nil), true)
	if err != nil {
		return nil, err
	}
	return optionalType(sc.Field(0).Type), nil
}

func optionalType(t ice.Type) ice.Type {
	switch tt := t.(type) {
	case *ice.StructType:
		fields := make([]ice.NestedField, len(tt.FieldList))
		for i, f := range tt.FieldList {
			f.Required = false
			f.Type = optionalType(f.Type)
			fields[i] = f
		}
		return &ice.StructType{FieldList: fields}
	case *ice.ListType:
		l := *tt
		l.ElementRequired = false
		l.Element = optionalType(l.Element)
		return &l
	case *ice.MapType:
		m := *tt
		m.ValueRequired = false
		m.ValueType = optionalType(m.ValueType)
		return &m
	}
	return t
}

// maxExactDefault is the largest integer iceberg-go reads back exactly from a default's JSON number (float64).
const maxExactDefault = 1 << 53

// DefaultValue is lit as the value of a default of a column of type typ, in the form iceberg-go both checks
// (UpdateSchema) and reads back from the table metadata (its scanner fills the default from that).
func DefaultValue(typ ice.Type, lit ice.Literal) (any, error) {
	if _, ok := typ.(ice.PrimitiveType); !ok {
		return nil, errors.New("a nested column takes no default")
	}
	lit, err := lit.To(typ)
	if err != nil {
		return nil, err
	}
	exact := func(n int64) error {
		if n > maxExactDefault || n < -maxExactDefault {
			return fmt.Errorf("%d is beyond ±2^53, which iceberg-go's table metadata does not hold exactly", n)
		}
		return nil
	}
	switch v := lit.Any().(type) {
	case int64:
		return v, exact(v)
	case ice.Timestamp:
		if err := exact(int64(v)); err != nil {
			return nil, err
		}
		if _, tz := typ.(ice.TimestampTzType); tz {
			// iceberg-go's check takes a Timestamp value for a timestamp column only; a float64 passes
			// it, and is what its scanner reads back from the metadata anyway.
			return float64(v), nil
		}
		return v, nil
	case ice.Decimal:
		return v.Val.ToString(int32(v.Scale)), nil // iceberg-go reads a decimal default back from a string
	case ice.TimestampNano:
		return nil, errors.New("nanosecond timestamps take no default here")
	default:
		return v, nil
	}
}

// Tx stages on branch the changes plan finds missing from tbl's schema (nil: none), and sets changes to them.
func Tx(tbl *table.Table, branch string, plan Plan, changes *[]Change) (*table.Transaction, error) {
	var err error
	if *changes, err = plan(tbl.Schema()); err != nil || len(*changes) == 0 {
		return nil, err
	}
	tx := tbl.NewTransactionOnBranch(branch)
	us := tx.UpdateSchema(true, false)
	for _, c := range *changes {
		switch {
		case c.Add != nil && c.Initial != nil:
			// UnionByNameWith, not AddColumn: AddColumn wants a literal of the column's exact type, which
			// iceberg-go has none of for timestamptz or a decimal of precision other than 9.
			us.UnionByNameWith(ice.NewSchema(0, ice.NestedField{Name: c.Path[0], Type: c.Add,
				InitialDefault: c.Initial, WriteDefault: c.Initial}))
		case c.Add != nil:
			us.AddColumn(c.Path, c.Add, "", false, nil)
		case c.Promote != nil:
			us.UpdateColumn(c.Path, table.ColumnUpdate{FieldType: ice.Optional[ice.Type]{Valid: true, Val: c.Promote}})
		case c.Relax:
			us.UpdateColumn(c.Path, table.ColumnUpdate{Required: ice.Optional[bool]{Valid: true, Val: false}})
		}
	}
	if err := us.Commit(); err != nil {
		return nil, fmt.Errorf("%w: %v: %w", conform.ErrEvolve, *changes, err)
	}
	return tx, nil
}

// Relax is the change that makes the required field at path of sc optional (nulls arrived in it), none when it
// is optional already, missing, or a key column or inside one (keys as For takes them).
func Relax(sc *ice.Schema, path []string, keys []string) []Change {
	f, ok := sc.FindFieldByName(strings.Join(path, "."))
	if !ok || !f.Required || isKey(keys, sc, path[0], f.ID) {
		return nil
	}
	if top, ok := TopField(sc, path[0]); ok && isKey(keys, sc, path[0], top.ID) {
		return nil
	}
	return []Change{{Path: path, Relax: true}}
}
