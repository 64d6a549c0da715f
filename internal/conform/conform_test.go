package conform

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// testTarget is a table schema of a required int64, an optional string and an optional struct of an optional
// int64 and an optional list of int64.
func testTarget(bRequired bool) *arrow.Schema {
	inner := arrow.StructOf(
		arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true})
	return arrow.NewSchema([]arrow.Field{
		{Name: "b", Type: arrow.PrimitiveTypes.Int64, Nullable: !bRequired},
		{Name: "a", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "s", Type: inner, Nullable: true},
	}, nil)
}

// record builds a batch of schema sc from JSON rows.
func record(t *testing.T, mem memory.Allocator, sc *arrow.Schema, rows string) arrow.RecordBatch {
	t.Helper()
	rec, _, err := array.RecordFromJSON(mem, sc, strings.NewReader(rows))
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestConformReordersCastsAndFills(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	c := New(testTarget(true), nil, mem, nil, 0)
	in := arrow.NewSchema([]arrow.Field{
		{Name: "s", Type: arrow.StructOf(arrow.Field{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true}), Nullable: true},
		{Name: "b", Type: arrow.PrimitiveTypes.Int32},
	}, nil)
	rec := record(t, mem, in, `[{"s": {"l": [1, 2]}, "b": 7}, {"s": null, "b": 8}]`)
	defer rec.Release()
	out, size, dead, err := c.Conform(context.Background(), rec)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	if !out.Schema().Equal(c.Target()) || size <= 0 || dead != nil {
		t.Fatalf("schema %s, size %d, dead %v", out.Schema(), size, dead)
	}
	got, err := out.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"a":null,"b":7,"s":{"l":[1,2],"x":null}}
,{"a":null,"b":8,"s":null}
]`
	if string(got) != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

func TestConformColumnErrors(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	c := New(testTarget(true), nil, mem, nil, 0)
	for _, tc := range []struct {
		name   string
		fields []arrow.Field
		rows   string
		is     error
		msg    string
		rowLvl bool
	}{
		{"unknown", []arrow.Field{{Name: "b", Type: arrow.PrimitiveTypes.Int64}, {Name: "zz", Type: arrow.PrimitiveTypes.Int64}},
			`[{"b": 1, "zz": 2}]`, ErrUnknownColumn, `iceberg: column "zz": no such column in the table: table columns are b, a, s`, false},
		{"missing", []arrow.Field{{Name: "a", Type: arrow.BinaryTypes.String, Nullable: true}},
			`[{"a": "x"}]`, ErrMissingColumn, `iceberg: column "b": required column missing: the batch has no such column`, false},
		{"null", []arrow.Field{{Name: "b", Type: arrow.PrimitiveTypes.Int64, Nullable: true}},
			`[{"b": 1}, {"b": null}]`, ErrNullInRequired, `iceberg: column "b": null in a required column: 1 null value(s)`, true},
		{"type", []arrow.Field{{Name: "b", Type: arrow.BinaryTypes.String}},
			`[{"b": "1"}]`, ErrTypeMismatch, `iceberg: column "b": `, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := record(t, mem, arrow.NewSchema(tc.fields, nil), tc.rows)
			defer rec.Release()
			_, _, _, err := c.Conform(context.Background(), rec)
			var ce *ColumnError
			if !errors.As(err, &ce) || !errors.Is(err, tc.is) || !strings.HasPrefix(err.Error(), tc.msg) || isRowLevel(err) != tc.rowLvl {
				t.Fatalf("err %v (row level %v), want %v, message %q", err, isRowLevel(err), tc.is, tc.msg)
			}
		})
	}
}

func TestConformDeadLetter(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	var letters []string
	hooks := &Hooks{DeadLetter: func(row any, err error) {
		rec := row.(arrow.RecordBatch)
		letters = append(letters, rec.Column(1).ValueStr(0)+": "+err.Error())
	}}
	c := New(testTarget(true), nil, mem, hooks, 0)
	in := arrow.NewSchema([]arrow.Field{{Name: "b", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "a", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	rec := record(t, mem, in, `[{"b": 1, "a": "r0"}, {"b": null, "a": "r1"}, {"b": 2, "a": "r2"}, {"b": null, "a": "r3"}, {"b": 3, "a": "r4"}]`)
	defer rec.Release()
	out, _, dead, err := c.Conform(context.Background(), rec)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	if !slices.Equal(dead, []int64{1, 3}) || out.NumRows() != 3 {
		t.Fatalf("dead %v, %d rows kept", dead, out.NumRows())
	}
	want := []string{`r1: iceberg: column "b": null in a required column: 1 null value(s)`,
		`r3: iceberg: column "b": null in a required column: 1 null value(s)`}
	if !slices.Equal(letters, want) {
		t.Fatalf("dead letters %q, want %q", letters, want)
	}
}

func TestConformRelax(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	var relaxed []string
	hooks := &Hooks{}
	relaxedConf := New(testTarget(false), nil, mem, hooks, 0)
	hooks.Relax = func(_ context.Context, c *Conformer, path []string) (*Conformer, bool, error) {
		relaxed = append(relaxed, strings.Join(path, "."))
		return relaxedConf, c != relaxedConf, nil
	}
	c := New(testTarget(true), nil, mem, hooks, 0)
	in := arrow.NewSchema([]arrow.Field{{Name: "b", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	rec := record(t, mem, in, `[{"b": 1}, {"b": null}]`)
	defer rec.Release()
	out, _, dead, err := c.Conform(context.Background(), rec)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	if !out.Schema().Equal(relaxedConf.Target()) || out.NumRows() != 2 || dead != nil || !slices.Equal(relaxed, []string{"b"}) {
		t.Fatalf("schema %s, %d rows, dead %v, relaxed %v", out.Schema(), out.NumRows(), dead, relaxed)
	}
}
