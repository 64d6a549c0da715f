package shred

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/extensions"
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

// FuzzAppendVariantJSON checks AppendVariantJSON against encoding/json: valid
// JSON (without a key twice in an object) reads back with the same meaning,
// anything else (invalid UTF-8 too, which encoding/json replaces) is an
// error that appends nothing.
func FuzzAppendVariantJSON(f *testing.F) {
	for _, s := range []string{`{"a": [1, 2.5, {"b": null}], "c": "\u00e9"}`, `[1e5, -0.0, 123456789012345678901234567890]`,
		`"x"`, `{"a":1,"a":2}`, `[1,]`, `{"k\"": {"k\"": []}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		checkAgainstEncodingJSON(t, doc, AppendVariantJSON, func(err error) bool {
			return errors.Is(err, ErrOutOfRange) || strings.Contains(err.Error(), "duplicate") || strings.Contains(err.Error(), "too deep")
		})
	})
}

// checkAgainstEncodingJSON appends doc with appendDoc and checks the outcome against encoding/json's: valid JSON (and
// valid UTF-8, which the scanner insists on) reads back as encoding/json reads it unless refused with an error
// refusable allows; anything else is an error that appends nothing.
func checkAgainstEncodingJSON(t *testing.T, doc []byte, appendDoc func(*extensions.VariantBuilder, []byte) error, refusable func(error) bool) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	vb := newVariantBuilder(mem)
	defer vb.Release()
	err := appendDoc(vb, doc)
	var any0 any
	valid := json.Unmarshal(doc, &any0) == nil && utf8.Valid(doc)
	if err != nil {
		if vb.Len() != 0 {
			t.Fatalf("%q: error %v but %d values appended", doc, err, vb.Len())
		}
		if valid && !refusable(err) {
			t.Fatalf("%q: valid JSON refused: %v", doc, err)
		}
		return
	}
	if !valid {
		t.Fatalf("%q: invalid JSON accepted", doc)
	}
	arr := vb.NewArray()
	defer arr.Release()
	if got, want := variantCells(t, arr)[0], canonJSON(t, doc); got != want {
		t.Fatalf("%q reads back %s, want %s", doc, got, want)
	}
}

// FuzzAppendVariantJSONWithOptions checks the options against encoding/json:
// with LastKeyWins and ExactNumbers, valid JSON reads back as encoding/json
// reads it (the last value of a key given twice) unless a number has no
// exact variant value (ErrInexactNumber) or it nests too deep; anything else
// is an error that appends nothing.
func FuzzAppendVariantJSONWithOptions(f *testing.F) {
	for _, s := range []string{`{"a": [1, 2.5, {"b": null}], "a": "\u00e9"}`, `[1e5, -0.0, 1e-400, 1e400]`,
		`{"k": {"k": 1, "k": 2}, "k": 3}`, `{"a":1,"a":}`, `123456789012345678901234567890123456789012`} {
		f.Add([]byte(s))
	}
	opts := VariantJSONOptions{LastKeyWins: true, ExactNumbers: true}
	f.Fuzz(func(t *testing.T, doc []byte) {
		withOpts := func(vb *extensions.VariantBuilder, doc []byte) error {
			return AppendVariantJSONWithOptions(vb, doc, opts)
		}
		checkAgainstEncodingJSON(t, doc, withOpts, func(err error) bool {
			return errors.Is(err, ErrInexactNumber) || strings.Contains(err.Error(), "too deep")
		})
	})
}
