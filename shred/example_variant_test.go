package shred_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/icewriter/iceberg/shred"
)

func ExampleAppendVariantJSON() {
	vb := extensions.NewVariantBuilder(memory.DefaultAllocator, extensions.NewDefaultVariantType())
	defer vb.Release()
	for _, doc := range []string{`{"user": {"id": 7, "tags": ["a", "b"]}, "score": 1.50}`, `null`, `{"oops": }`} {
		if err := shred.AppendVariantJSON(vb, []byte(doc)); err != nil {
			fmt.Println("refused:", err)
		}
	}
	vb.AppendNull() // a null row, not the variant null
	arr := vb.NewArray().(*extensions.VariantArray)
	defer arr.Release()
	for i := range arr.Len() {
		if arr.Storage().IsNull(i) {
			fmt.Println("null row")
			continue
		}
		v, _ := arr.Value(i)
		fmt.Println(v)
	}
	// Output:
	// refused: invalid JSON at offset 9: unexpected character
	// {"score":1.50,"user":{"id":7,"tags":["a","b"]}}
	// null
	// null row
}

// The rules of a source whose JSON comes from elsewhere (the Kafka sink's and the Postgres source's): a key
// given twice keeps its last value, a number no variant holds exactly is refused rather than rounded.
func ExampleAppendVariantJSONWithOptions() {
	vb := extensions.NewVariantBuilder(memory.DefaultAllocator, extensions.NewDefaultVariantType())
	defer vb.Release()
	opts := shred.VariantJSONOptions{LastKeyWins: true, ExactNumbers: true}
	for _, doc := range []string{`{"a": 1, "a": {"b": 2}}`, `[1.5e300, 1e-400]`, `123456789012345678901234567890123456789012`} {
		if err := shred.AppendVariantJSONWithOptions(vb, []byte(doc), opts); err != nil {
			fmt.Println("refused:", err, errors.Is(err, shred.ErrInexactNumber))
		}
	}
	arr := vb.NewArray()
	defer arr.Release()
	fmt.Println(arr)
	// Output:
	// refused: number 1e-400: JSON number has no exact variant value (the nearest double is 0) true
	// refused: number 123456789012345678901234567890123456789012: JSON number has no exact variant value (the nearest double is 1.2345678901234568e+41) true
	// VariantArray[{"a":{"b":2}}]
}

func ExampleAppendVariant() {
	vb := extensions.NewVariantBuilder(memory.DefaultAllocator, extensions.NewDefaultVariantType())
	defer vb.Release()
	values := []any{
		map[string]any{"id": 7, "tags": []string{"a", "b"}, "seen": time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)},
		json.RawMessage(`{"raw": true}`),
		map[string]any{"bad": complex(1, 2)},
	}
	for _, v := range values {
		if err := shred.AppendVariant(vb, v); err != nil {
			fmt.Println("refused:", err)
		}
	}
	arr := vb.NewArray()
	defer arr.Release()
	fmt.Println(arr)
	// Output:
	// refused: at bad: complex128 is not representable in a variant: unsupported type
	// VariantArray[{"id":7,"seen":"2025-01-01 00:00:00Z","tags":["a","b"]} {"raw":true}]
}

func ExampleStructs_variant() {
	type Event struct {
		ID      int64           `iceberg:"id,required"`
		At      time.Time       `iceberg:"at,ns"`
		Payload json.RawMessage `iceberg:"payload"`
		Attrs   map[string]any  `iceberg:"attrs"`
	}
	at := time.Date(2025, 1, 1, 12, 0, 0, 123456789, time.UTC)
	rows := []Event{
		{ID: 1, At: at, Payload: json.RawMessage(`{"kind": "click", "x": [1, 2]}`), Attrs: map[string]any{"ok": true}},
		{ID: 2, At: at, Payload: json.RawMessage(`[true]`)}, // Attrs nil: a null row
	}
	rec, err := shred.Structs(nil, rows, nil)
	if err != nil {
		panic(err)
	}
	defer rec.Release()
	for i, f := range rec.Schema().Fields() {
		fmt.Printf("%s %v: %v\n", f.Name, f.Type, rec.Column(i))
	}
	// Output:
	// id int64: [1 2]
	// at timestamp[ns, tz=UTC]: [1735732800123456789 1735732800123456789]
	// payload extension<arrow.parquet.variant>: VariantArray[{"kind":"click","x":[1,2]} [true]]
	// attrs extension<arrow.parquet.variant>: VariantArray[{"ok":true} (null)]
}
