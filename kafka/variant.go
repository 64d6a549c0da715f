package kafka

import (
	"encoding/json"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/icewriter/iceberg/shred"
)

// JSONVariant puts each value, one JSON document of any shape, into the variant column named column (a v3
// table's variant column, arrow-go's extensions.VariantType), which must be the table's only value column (the
// others being metadata columns). A nil value (a tombstone) is null; a value that is not one JSON document
// (invalid UTF-8 in a string and nesting past 1000 levels included), or holds a number no variant holds exactly
// (more than 38 digits that are not a double's, past a double's range: the error wraps shred.ErrInexactNumber),
// is a bad record (ErrDecode). Objects keep their keys (a key given twice: its last value), integers become the
// smallest variant integer that holds them, other numbers decimals of up to 38 digits, else doubles
// (shred.AppendVariantJSONWithOptions with LastKeyWins and ExactNumbers).
func JSONVariant(column string) Decoder { return variantDecoder{column: column} }

// JSONVariantField is JSONVariant for one top-level field: each value must be a JSON object, and the variant
// column named column receives the value of its key field. A missing key (or a nil value) is null, a JSON null
// the variant null; a value that is not a JSON object is a bad record (ErrDecode).
func JSONVariantField(column, field string) Decoder {
	return variantDecoder{column: column, field: field, byField: true}
}

// variantJSON are the rules of every JSON document the sink puts into a variant: a key given twice keeps its
// last value, as encoding/json (which reads the rest of a JSON event) does; a number no variant holds exactly
// is a bad record, never rounded.
var variantJSON = shred.VariantJSONOptions{LastKeyWins: true, ExactNumbers: true}

type variantDecoder struct {
	column, field string
	byField       bool
}

func (d variantDecoder) name() string {
	if d.byField {
		return fmt.Sprintf("JSONVariantField(%q, %q)", d.column, d.field)
	}
	return fmt.Sprintf("JSONVariant(%q)", d.column)
}

func (d variantDecoder) check(schema *arrow.Schema) error {
	if schema.NumFields() != 1 || schema.Field(0).Name != d.column {
		return fmt.Errorf("%w: %s: the table's value columns are %v, want only %q (others must be metadata columns)",
			ErrConfig, d.name(), fieldNames(schema), d.column)
	}
	if _, ok := schema.Field(0).Type.(*extensions.VariantType); !ok {
		return fmt.Errorf("%w: %s: column %q is %s, want variant (a format version 3 table)",
			ErrConfig, d.name(), d.column, schema.Field(0).Type)
	}
	return nil
}

func (d variantDecoder) Decode(mem memory.Allocator, values [][]byte, schema *arrow.Schema) (arrow.RecordBatch, int, error) {
	b := extensions.NewVariantBuilder(mem, schema.Field(0).Type.(*extensions.VariantType))
	defer b.Release()
	for i, v := range values {
		doc := v
		if d.byField && v != nil {
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(v, &obj); err != nil {
				return nil, i, fmt.Errorf("%w: column %q: value is not a JSON object: %w", ErrDecode, d.column, err)
			}
			raw, ok := obj[d.field]
			switch {
			case !ok:
				doc = nil
			case raw == nil: // encoding/json stores a JSON null as a nil RawMessage
				doc = []byte("null")
			default:
				doc = raw
			}
		}
		if doc == nil {
			b.AppendNull()
			continue
		}
		if err := shred.AppendVariantJSONWithOptions(b, doc, variantJSON); err != nil {
			return nil, i, fmt.Errorf("%w: column %q: %w", ErrDecode, d.column, err)
		}
	}
	col := b.NewArray()
	defer col.Release()
	return array.NewRecordBatch(schema, []arrow.Array{col}, int64(len(values))), len(values), nil
}

// mapsWithVariants is shred.MapsWithOptions for a schema that may have variant columns, which shred does not
// build: the other columns go through shred, each variant column is built here from its rows' values (taken
// out of the rows). A string is JSON text (Debezium's io.debezium.data.Json), nil null, any other value (a
// JSON event's object, number or bool) that value as JSON. A value that is not JSON, or whose numbers no variant
// holds exactly, is a *shred.FieldError naming the column and row.
func mapsWithVariants(mem memory.Allocator, rows []map[string]any, schema *arrow.Schema, opts shred.MapOptions) (arrow.RecordBatch, error) {
	if !hasVariant(schema) {
		return shred.MapsWithOptions(mem, rows, schema, opts)
	}
	doc := func(column string, r int) ([]byte, error) {
		x := rows[r][column]
		delete(rows[r], column)
		switch x := x.(type) {
		case nil:
			return nil, nil
		case string:
			return []byte(x), nil
		}
		return json.Marshal(x)
	}
	return withVariants(mem, schema, len(rows), doc, func(others *arrow.Schema) (arrow.RecordBatch, error) {
		return shred.MapsWithOptions(mem, rows, others, opts)
	})
}

// hasVariant reports whether schema (nil: none yet, a routed table's first records) has a variant column.
func hasVariant(schema *arrow.Schema) bool {
	if schema == nil {
		return false
	}
	for _, f := range schema.Fields() {
		if _, ok := f.Type.(*extensions.VariantType); ok {
			return true
		}
	}
	return false
}

// withVariants builds a batch of n rows in schema: each variant column from doc(column, row), JSON text (nil:
// null), through shred.AppendVariantJSONWithOptions (variantJSON's rules), then the other columns, as one batch in their order, from others (not called
// when there are none). A document that is not JSON, or whose numbers no variant holds exactly, is a
// *shred.FieldError naming the column and row.
func withVariants(mem memory.Allocator, schema *arrow.Schema, n int, doc func(column string, row int) ([]byte, error),
	others func(*arrow.Schema) (arrow.RecordBatch, error)) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, schema.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	var rest []arrow.Field
	for i, f := range schema.Fields() {
		vt, ok := f.Type.(*extensions.VariantType)
		if !ok {
			rest = append(rest, f)
			continue
		}
		b := extensions.NewVariantBuilder(mem, vt)
		for r := range n {
			d, err := doc(f.Name, r)
			switch {
			case err != nil:
			case d == nil:
				b.AppendNull()
			default:
				err = shred.AppendVariantJSONWithOptions(b, d, variantJSON)
			}
			if err != nil {
				b.Release()
				return nil, &shred.FieldError{Column: f.Name, Row: r, Err: err}
			}
		}
		cols[i] = b.NewArray()
		b.Release()
	}
	if len(rest) > 0 {
		rec, err := others(arrow.NewSchema(rest, nil))
		if err != nil {
			return nil, err
		}
		defer rec.Release()
		j := 0
		for i := range cols {
			if cols[i] == nil {
				cols[i] = rec.Column(j)
				cols[i].Retain()
				j++
			}
		}
	}
	return array.NewRecordBatch(schema, cols, int64(n)), nil
}

// variantSplit takes the variant columns' keys out of JSON objects, for the JSON decoder: shred.JSONLines
// decodes the rest.
type variantSplit struct {
	columns []string
	rest    bool                         // the schema has columns that are not variants
	docs    []map[string]json.RawMessage // by row: the variant columns' documents
}

func newVariantSplit(schema *arrow.Schema) *variantSplit {
	s := &variantSplit{}
	for _, f := range schema.Fields() {
		if _, ok := f.Type.(*extensions.VariantType); ok {
			s.columns = append(s.columns, f.Name)
		} else {
			s.rest = true
		}
	}
	return s
}

// take records the next row's variant documents and returns the object without them.
func (s *variantSplit) take(value []byte) ([]byte, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(value, &obj); err != nil {
		return nil, fmt.Errorf("value is not a JSON object: %w", err)
	}
	docs := map[string]json.RawMessage{}
	for _, c := range s.columns {
		if raw, ok := obj[c]; ok {
			if raw == nil { // encoding/json stores a JSON null as a nil RawMessage
				raw = json.RawMessage("null")
			}
			docs[c] = raw
			delete(obj, c)
		}
	}
	s.docs = append(s.docs, docs)
	if !s.rest {
		for k := range obj {
			return nil, fmt.Errorf("key %q has no column", k)
		}
	}
	return json.Marshal(obj)
}

// doc is a row's document of a variant column, nil for none.
func (s *variantSplit) doc(column string, row int) ([]byte, error) { return s.docs[row][column], nil }
