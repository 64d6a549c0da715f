package shred_test

import (
	"encoding/json"
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
