package tabletest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/parquet/variant"
)

// SQLNull is what Variant returns for a null cell (not the variant null, which is nil).
const SQLNull = "SQL NULL"

// JSONValue is a JSON document as a Go value to compare with Variant's (CanonicalJSON), failing the test on
// a document that does not parse.
func JSONValue(t testing.TB, doc []byte) any {
	t.Helper()
	v, err := CanonicalJSON(doc)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// CanonicalJSON is a JSON document as a Go value to compare: objects as maps (a key given twice: its last
// value), arrays as non-nil slices, numbers as exact rationals ("number 1/10"), so 0.10 and 0.1 are one number
// and 1 and "1" are not. json.Marshal of it is a canonical text (keys sorted).
func CanonicalJSON(doc []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%s: %w", doc, err)
	}
	return canonical(v)
}

func canonical(v any) (any, error) {
	var err error
	switch x := v.(type) {
	case json.Number:
		r, ok := new(big.Rat).SetString(x.String())
		if !ok {
			return nil, fmt.Errorf("number %s", x)
		}
		return "number " + r.RatString(), nil
	case []any:
		for i := range x {
			if x[i], err = canonical(x[i]); err != nil {
				return nil, err
			}
		}
	case map[string]any:
		for k := range x {
			if x[k], err = canonical(x[k]); err != nil {
				return nil, err
			}
		}
	}
	return v, nil
}

// Variant is cell i of a scanned variant column as CanonicalJSON has a document, SQLNull for a null cell,
// failing the test when the column is not a variant or the value does not decode.
func Variant(t testing.TB, col arrow.Array, i int) any {
	t.Helper()
	v, err := VariantValue(col, i)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// VariantValue is Variant's value, or an error.
func VariantValue(col arrow.Array, i int) (any, error) {
	va, ok := col.(*extensions.VariantArray)
	if !ok {
		return nil, fmt.Errorf("column is %T (%s), want a variant array", col, col.DataType())
	}
	if va.Storage().IsNull(i) { // va.IsNull is true for the variant null too
		return SQLNull, nil
	}
	v, err := va.Value(i)
	if err != nil {
		return nil, err
	}
	return variantValue(v)
}

// variantValue walks objects and arrays itself: arrow-go marshals an empty variant array as JSON null.
func variantValue(v variant.Value) (any, error) {
	switch v.Type() {
	case variant.Object:
		m := map[string]any{}
		for k, x := range v.Value().(variant.ObjectValue).Values() {
			xv, err := variantValue(x)
			if err != nil {
				return nil, err
			}
			m[k] = xv
		}
		return m, nil
	case variant.Array:
		xs := []any{}
		for x := range v.Value().(variant.ArrayValue).Values() {
			xv, err := variantValue(x)
			if err != nil {
				return nil, err
			}
			xs = append(xs, xv)
		}
		return xs, nil
	}
	b, err := v.MarshalJSON()
	if err != nil {
		return nil, err
	}
	return CanonicalJSON(b)
}
