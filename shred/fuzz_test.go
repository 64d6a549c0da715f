package shred

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func FuzzJSONLines(f *testing.F) {
	f.Add([]byte(`{"id": 1, "user_id": 2, "event_type": "click", "value": 1.5, "info": "x", "ts": "2024-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"a": [1, {"b": null}], "c": "\u00e9\ud83d"}` + "\n" + `{"a": []}`))
	f.Add([]byte(`{"id": 99999999999999999999999, "x": -0.0e-5}`))
	f.Add([]byte("{}\n\n{\"s\":\"\\\"\"}"))
	target := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "user_id", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "event_type", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "value", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "info", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "ts", Type: TimestampType, Nullable: true},
		{Name: "a", Type: arrow.ListOf(arrow.StructOf(arrow.Field{Name: "b", Type: arrow.PrimitiveTypes.Int64, Nullable: true})), Nullable: true},
		{Name: "c", Type: &arrow.Decimal128Type{Precision: 20, Scale: 3}, Nullable: true},
	}, nil)
	f.Fuzz(func(t *testing.T, data []byte) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		for _, s := range []*arrow.Schema{nil, target} {
			rec, err := JSONLines(mem, data, s, MapOptions{OnRowError: func(int, error) {}})
			if err == nil {
				for _, c := range rec.Columns() {
					if v, ok := c.(interface{ ValidateFull() error }); ok {
						if err := v.ValidateFull(); err != nil {
							t.Fatalf("invalid column: %v", err)
						}
					}
					if c.Len() != int(rec.NumRows()) {
						t.Fatalf("column length %d, batch %d", c.Len(), rec.NumRows())
					}
				}
				rec.Release()
			}
			rec, err = JSONLines(mem, data, s)
			if err == nil {
				rec.Release()
			}
		}
		mem.AssertSize(t, 0)
	})
}
