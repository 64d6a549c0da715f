// Package evolve plans schema evolution: what a table schema lacks to take batches of an Arrow schema (added
// columns, promotions), making a required column optional, adding a column with a default, and the schema
// update that applies such a plan in a transaction. It computes from schemas only; committing the change is
// the caller's (the writer's commit queue).
package evolve

import (
	"errors"
	"fmt"
	"maps"
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

// Options are what For plans with besides the two schemas.
type Options struct {
	// Keys are the writer's key columns (WithKeys), which are never relaxed.
	Keys []string
	// Version is the table's format version: below 3 a nanosecond timestamp is added as microseconds and a
	// variant is refused (the format has neither).
	Version int
	// Defaults are initial-defaults and write-defaults of columns by path (a top-level name, or names joined
	// by dots for a field inside structs: "s.x"), given to such a column or field when For adds it, alone or
	// inside an added struct (format version 3 only: the caller refuses them below). A default for a field
	// inside a list or map is refused when the field is added.
	Defaults map[string]ice.Literal
}

// For lists the changes the table schema sc needs to take batches of schema in. Type differences that are not
// promotions are left to the conformer, which casts what it can and reports the rest.
func For(in *arrow.Schema, sc *ice.Schema, o Options) ([]Change, error) {
	var out []Change
	for _, f := range in.Fields() {
		tf, ok := TopField(sc, f.Name)
		if !ok {
			c, err := o.added([]string{f.Name}, f, false)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
			continue
		}
		key := isKey(o.Keys, sc, f.Name, tf.ID)
		if err := o.planField(&out, []string{f.Name}, f.Type, tf, key, false); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// added is the change that adds the field at path for f, with the defaults o names for it and for the fields
// of the structs inside it. inColl: path passes through a list or map, whose fields take no default here.
func (o Options) added(path []string, f arrow.Field, inColl bool) (Change, error) {
	t, err := addedType(path, f, o.Version)
	if err != nil {
		return Change{}, err
	}
	name := strings.Join(path, ".")
	if inColl {
		return Change{Path: path, Add: t}, o.refuseUnder(name, true)
	}
	c := Change{Path: path, Add: t}
	if lit := o.Defaults[name]; lit != nil {
		if c.Initial, err = DefaultValue(t, lit); err != nil {
			return Change{}, conform.ColumnErr(name, conform.ErrTypeMismatch, "default %s for a column of type %s: %v", lit, t, err)
		}
	}
	if len(o.Defaults) > 0 {
		c.Add, err = o.nestedDefaults(name, t)
	}
	return c, err
}

// nestedDefaults is t, the type of the added field at path, with the defaults o names for the fields of its
// structs set as their initial-default and write-default.
func (o Options) nestedDefaults(path string, t ice.Type) (ice.Type, error) {
	switch tt := t.(type) {
	case *ice.StructType:
		fields := slices.Clone(tt.FieldList)
		for i := range fields {
			p := path + "." + fields[i].Name
			if lit := o.Defaults[p]; lit != nil {
				v, err := DefaultValue(fields[i].Type, lit)
				if err != nil {
					return nil, conform.ColumnErr(p, conform.ErrTypeMismatch, "default %s for a field of type %s: %v", lit, fields[i].Type, err)
				}
				fields[i].InitialDefault, fields[i].WriteDefault = v, v
			}
			var err error
			if fields[i].Type, err = o.nestedDefaults(p, fields[i].Type); err != nil {
				return nil, err
			}
		}
		return &ice.StructType{FieldList: fields}, nil
	case *ice.ListType, *ice.MapType:
		return t, o.refuseUnder(path, false)
	}
	return t, nil
}

// refuseUnder is a *ColumnError wrapping ErrNotSupported for a default o names under path (at it too, when
// self), which passes through a list or map: iceberg-go adds such a field only by name inside structs.
func (o Options) refuseUnder(path string, self bool) error {
	for _, name := range slices.Sorted(maps.Keys(o.Defaults)) {
		if (self && name == path) || strings.HasPrefix(name, path+".") {
			return conform.ColumnErr(name, conform.ErrNotSupported, "a default for a field inside a list or map is not supported")
		}
	}
	return nil
}

// hasDefaults reports whether a field inside t has a default.
func hasDefaults(t ice.Type) bool {
	st, ok := t.(*ice.StructType)
	if !ok {
		return false
	}
	for _, f := range st.FieldList {
		if f.InitialDefault != nil || f.WriteDefault != nil || hasDefaults(f.Type) {
			return true
		}
	}
	return false
}

// addedType is the type of the column (or nested field) at path added for f, or a *ColumnError naming it.
func addedType(path []string, f arrow.Field, version int) (ice.Type, error) {
	name := strings.Join(path, ".")
	t, err := ColumnType(f, version)
	if err != nil {
		return nil, conform.ColumnErr(name, conform.ErrTypeMismatch, "cannot add a field of type %s: %v", f.Type, err)
	}
	if err := CheckVersion(name, t, version); err != nil {
		return nil, err
	}
	return t, nil
}

// CheckVersion returns a *ColumnError wrapping ErrNotSupported, naming the field of t (at path name) whose type
// a table of format version v cannot hold: variant and nanosecond timestamps need version 3. Nil when none.
func CheckVersion(name string, t ice.Type, v int) error {
	if v >= 3 {
		return nil
	}
	path, bad := v3Only(name, t)
	if bad == nil {
		return nil
	}
	return conform.ColumnErr(path, conform.ErrNotSupported, "type %s needs table format version 3, the table's is %d", bad, v)
}

// v3Only finds a type inside t that only format version 3 has, and its path.
func v3Only(path string, t ice.Type) (string, ice.Type) {
	switch tt := t.(type) {
	case ice.VariantType, ice.TimestampNsType, ice.TimestampTzNsType, ice.UnknownType:
		return path, t
	case *ice.StructType:
		for _, f := range tt.FieldList {
			if p, bad := v3Only(path+"."+f.Name, f.Type); bad != nil {
				return p, bad
			}
		}
	case *ice.ListType:
		return v3Only(path+".element", tt.Element)
	case *ice.MapType:
		if p, bad := v3Only(path+".key", tt.KeyType); bad != nil {
			return p, bad
		}
		return v3Only(path+".value", tt.ValueType)
	}
	return "", nil
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

// planField compares one input type with the table field at path, recursively. inColl: path passes through a
// list or map.
func (o Options) planField(out *[]Change, path []string, in arrow.DataType, tf ice.NestedField, key, inColl bool) error {
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
				c, err := o.added(child(f.Name), f, inColl)
				if err != nil {
					return err
				}
				*out = append(*out, c)
				continue
			}
			if err := o.planField(out, child(f.Name), f.Type, tt.FieldList[idx], key, inColl); err != nil {
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
		return o.planField(out, child("element"), elem, tt.ElementField(), key, true)
	case *ice.MapType:
		if mt, ok := in.(*arrow.MapType); ok {
			return o.planField(out, child("value"), mt.ItemType(), tt.ValueField(), key, true)
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

// ColumnType is the Iceberg type of a column added for an Arrow field to a table of format version v: every
// nested field optional; a nanosecond timestamp stays one on version 3, and becomes microseconds below (which
// have no other; the conformer refuses a value that is not a whole microsecond).
func ColumnType(f arrow.Field, v int) (ice.Type, error) {
	f.Nullable = true
	// No downcast here: iceberg-go's logs a warning on the default logger, outside WithLogger's.
	sc, err := table.ArrowSchemaToIcebergWithFreshIDs(arrow.NewSchema([]arrow.Field{f}, nil), false)
	if err != nil {
		return nil, err
	}
	return addedFieldType(sc.Field(0).Type, v), nil
}

// addedFieldType is t with every nested field optional, and below format version 3 nanosecond timestamps as
// microseconds.
func addedFieldType(t ice.Type, v int) ice.Type {
	switch tt := t.(type) {
	case *ice.StructType:
		fields := make([]ice.NestedField, len(tt.FieldList))
		for i, f := range tt.FieldList {
			f.Required = false
			f.Type = addedFieldType(f.Type, v)
			fields[i] = f
		}
		return &ice.StructType{FieldList: fields}
	case *ice.ListType:
		l := *tt
		l.ElementRequired = false
		l.Element = addedFieldType(l.Element, v)
		return &l
	case *ice.MapType:
		m := *tt
		m.ValueRequired = false
		m.KeyType = micros(m.KeyType, v) // a key stays as it is but for its precision
		m.ValueType = addedFieldType(m.ValueType, v)
		return &m
	}
	return micros(t, v)
}

// micros is t, but a nanosecond timestamp below format version 3 (which has none) is a microsecond one.
func micros(t ice.Type, v int) ice.Type {
	switch t.(type) {
	case ice.TimestampNsType:
		if v < 3 {
			return ice.PrimitiveTypes.Timestamp
		}
	case ice.TimestampTzNsType:
		if v < 3 {
			return ice.PrimitiveTypes.TimestampTz
		}
	}
	return t
}

// errNanosDefault refuses a timestamp_ns or timestamptz_ns default. The spec's JSON single-value serialization
// of these types is an ISO-8601 string with nine fraction digits ("2017-11-16T22:31:08.123456789"), but
// iceberg-go v0.7.0 writes a default as the Go value it holds (types.go:360, defaultValueToJSON: a
// TimestampNano becomes a JSON number) and reads it back from the metadata as a float64 (NestedField's
// InitialDefault is an `any`), which its scanner and writer turn into nanoseconds through float64
// (table/arrow_utils.go:922, numericDefault, also for a json.Number; defaultToScalar at :955). A float64 holds
// whole nanoseconds exactly only within ±2^53 ns of 1970 (about 104 days), and a spec string makes
// numericDefault panic (:936). TestNanosDefaultRoundTrip pins this.
var errNanosDefault = errors.New("iceberg-go v0.7.0 cannot store a nanosecond timestamp default exactly " +
	"(it keeps defaults as JSON numbers, read back as float64): a timestamp_ns or timestamptz_ns column takes no default")

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
	switch lit.(type) { // what To gives for a value out of the type's range
	case ice.AboveMaxLiteral, ice.BelowMinLiteral:
		return nil, fmt.Errorf("out of the range of %s", typ)
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
		return nil, errNanosDefault
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
		case c.Add != nil:
			_, variant := c.Add.(ice.VariantType)
			if c.Initial == nil && !variant && !hasDefaults(c.Add) {
				us.AddColumn(c.Path, c.Add, "", false, nil)
				continue
			}
			// UnionByNameWith, not AddColumn: AddColumn refuses a variant (not a primitive type) and defaults
			// inside a struct, and wants a default literal of the column's exact type, which iceberg-go has none
			// of for timestamptz or a decimal of precision other than 9.
			union, err := unionSchema(tbl.Schema(), c.Path, ice.NestedField{Name: c.Path[len(c.Path)-1], Type: c.Add,
				InitialDefault: c.Initial, WriteDefault: c.Initial})
			if err != nil {
				return nil, err
			}
			us.UnionByNameWith(union)
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

// unionSchema is the schema whose union with sc adds f at path: f inside its parents as sc has them, each of
// them a struct.
func unionSchema(sc *ice.Schema, path []string, f ice.NestedField) (*ice.Schema, error) {
	for i := len(path) - 1; i > 0; i-- {
		parent, ok := sc.FindFieldByName(strings.Join(path[:i], "."))
		if _, isStruct := parent.Type.(*ice.StructType); !ok || !isStruct {
			return nil, conform.ColumnErr(strings.Join(path, "."), conform.ErrNotSupported, "a variant or a field with a default is added only inside structs")
		}
		parent.Type = &ice.StructType{FieldList: []ice.NestedField{f}}
		f = parent
	}
	return ice.NewSchema(0, f), nil
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
