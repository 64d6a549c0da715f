package variantjson_test

import (
	"errors"
	"math/big"
	"reflect"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/variant"

	"github.com/icewriter/iceberg/internal/tabletest"
	"github.com/icewriter/iceberg/internal/variantjson"
)

// TestParseKeepsNumbersExactly: every number Parse accepts reads back as the same number; the others are
// ErrInexact, never rounded or a panic.
func TestParseKeepsNumbersExactly(t *testing.T) {
	kept := []string{"0", "-0", "42", "-9223372036854775808", "9223372036854775807", "9223372036854775808",
		"12345678901234567890123456789012345678", "0.1", "-12.50", "1e-7", "1.0e-5", "1E+2", "1e20", "1.5e300",
		"0.00000000000000000000000000000000000001", "3.141592653589793", "1.7976931348623157e308"}
	for _, s := range kept {
		v, err := variantjson.Parse([]byte(s))
		if err != nil {
			t.Errorf("%s: %v", s, err)
			continue
		}
		b, err := v.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		got, _ := new(big.Rat).SetString(string(b))
		want, _ := new(big.Rat).SetString(s)
		if got == nil || got.Cmp(want) != 0 {
			t.Errorf("%s reads back as %s", s, b)
		}
	}
	for _, s := range []string{"1e400", "-1e400", "1e-400", "123456789012345678901234567890123456789012",
		"0.000000000000000000000000000000000000000001", "100000000000000000000000000000000000000000000.5",
		`{"a": [1, 0.1234567890123456789012345678901234567890123]}`, `{"x\\": 1e400}`} {
		if _, err := variantjson.Parse([]byte(s)); !errors.Is(err, variantjson.ErrInexact) {
			t.Errorf("%s: %v, want ErrInexact", s, err)
		}
	}
}

// readBack is v as tabletest.Variant reads it from a variant array.
func readBack(t *testing.T, v variant.Value) any {
	t.Helper()
	b := extensions.NewVariantBuilder(memory.DefaultAllocator, extensions.NewDefaultVariantType())
	defer b.Release()
	b.Append(v)
	arr := b.NewArray()
	defer arr.Release()
	return tabletest.Variant(t, arr, 0)
}

// TestParseDocuments: documents of every shape read back equal to their JSON (a key given twice: its last
// value); what is not one JSON document is an error.
func TestParseDocuments(t *testing.T) {
	for _, doc := range []string{`{"b":1,"a":{"y":[1,2],"x":null},"a":{"z":"last"}}`, `{}`, `[]`, `[[],{}]`, `null`,
		`"s \u00e9 \ud83d\ude00"`, `true`, " \n{\"pretty\": [1, 2]}\n ",
		`{"n": "1e400 -0.0000000000000000000000000000000000000000001", "\"1e400": 1}`} {
		v, err := variantjson.Parse([]byte(doc))
		if err != nil {
			t.Errorf("%s: %v", doc, err)
			continue
		}
		if got, want := readBack(t, v), tabletest.JSONValue(t, []byte(doc)); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: reads back %#v, want %#v", doc, got, want)
		}
	}
	for _, bad := range []string{``, ` `, `{"a":1`, `{"a":1} {"b":2}`, `nope`, `{"a":1,}`, `[1 2]`, `{"a"}`} {
		if _, err := variantjson.Parse([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
