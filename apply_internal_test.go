package iceberg

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/table"
	"github.com/icewriter/iceberg/internal/changes"
	"github.com/icewriter/iceberg/internal/keyindex/keyenc"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// TestVersionMapLoad reads the versions of the keys a table holds (deleted keys have none), up to genCap keys.
func TestVersionMapLoad(t *testing.T) {
	ctx := context.Background()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "lsn", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	w, err := NewWriter(ctx, tabletest.TempCatalog(t), table.Identifier{"v", "t"},
		WithCreate(schema, IdentifierFields("id"), FormatVersion(2)), WithFlushInterval(0),
		WithChangeColumns(ChangeColumns{Version: "lsn"}))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	for i := int64(0); i < 500; i++ {
		b.Field(0).(*array.Int64Builder).Append(i)
		b.Field(1).(*array.Int64Builder).Append(2 * i)
	}
	rec := b.NewRecordBatch()
	b.Release()
	if err := w.Write(ctx, rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	kb := array.NewRecordBuilder(memory.DefaultAllocator, w.keys.spec.schema)
	kb.Field(0).(*array.Int64Builder).AppendValues([]int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, nil)
	keys := kb.NewRecordBatch()
	kb.Release()
	if err := w.Delete(ctx, keys); err != nil {
		t.Fatal(err)
	}
	keys.Release()
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	m := changes.NewVersions(2*changes.BytesPerKey*1000, "lsn", true)
	if err := m.LoadOnce(ctx, w.Table(), w.env.branch, w.keys.spec.names); err != nil {
		t.Fatal(err)
	}
	if m.Size() != 490 {
		t.Fatalf("%d versions loaded, want the 490 keys the table holds", m.Size())
	}
	if _, ok := m.Get(changes.Hash(tabletest.EncodedKey(t, 5))); ok {
		t.Fatal("deleted key 5 has a version")
	}
	if v, ok := m.Get(changes.Hash(tabletest.EncodedKey(t, 20))); !ok || v != 40 {
		t.Fatalf("key 20: version %d, %v, want 40", v, ok)
	}
	small := changes.NewVersions(2*changes.BytesPerKey*50, "lsn", true)
	if err := small.LoadOnce(ctx, w.Table(), w.env.branch, w.keys.spec.names); err != nil {
		t.Fatal(err)
	}
	if small.Size() != 50 {
		t.Fatalf("%d versions loaded within a budget of 50 keys", small.Size())
	}
}

// TestVersionBudgetFromMemoryLimit: the versions' budget comes out of the memory limit's row budget.
func TestVersionBudgetFromMemoryLimit(t *testing.T) {
	o := defaultOptions()
	base := rowBudget(&o)
	o.keyed.changes = ChangeColumns{Version: "lsn"}.withDefaults(o.flush.memoryLimit)
	if o.keyed.changes.VersionBytes != o.flush.memoryLimit/4 {
		t.Fatalf("default VersionBytes %d, want a quarter of %d", o.keyed.changes.VersionBytes, o.flush.memoryLimit)
	}
	if got := rowBudget(&o); got != base-o.flush.memoryLimit/4 {
		t.Fatalf("row budget %d with versions, want %d less than %d", got, o.flush.memoryLimit/4, base)
	}
}

// TestApplyResolveCollisions: Apply resolves a call's changes by key hashes (resolveHash, which the batch's
// resolve reuses) checked against the key bytes; with every key hashing alike, a call of inserts, key-changing
// updates, deletes and re-inserts of the same keys reads back exactly as with the real hash. (changes.Hash keys
// only the version map, which has no key bytes to check against: changes.TestVersionsBound.)
func TestApplyResolveCollisions(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "op", Type: arrow.BinaryTypes.String},
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "before_id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	type change struct {
		op         string
		id, before int64 // -1: null
		name       string
	}
	changes := []change{
		{"c", 1, -1, "a"}, {"c", 2, -1, "b"}, {"c", 3, -1, "c"}, {"u", 4, 2, "b2"}, {"d", 1, -1, ""},
		{"c", 5, -1, "e"}, {"d", -1, 3, ""}, {"c", 1, -1, "a2"}, {"u", 5, 5, "e2"}, {"c", 6, -1, "f"}, {"d", 6, -1, ""},
	}
	want := map[int64][]string{0: {"n"}, 1: {"a2"}, 4: {"b2"}, 5: {"e2"}, 7: {"n"}}
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for _, c := range changes {
		b.Field(0).(*array.StringBuilder).Append(c.op)
		for f, v := range map[int]int64{1: c.id, 3: c.before} {
			if v < 0 {
				b.Field(f).AppendNull()
			} else {
				b.Field(f).(*array.Int64Builder).Append(v)
			}
		}
		b.Field(2).(*array.StringBuilder).Append(c.name)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	run := func(t *testing.T) map[int64][]string {
		ctx := context.Background()
		w := idNameWriter(t, 1, 8, WithCreate(idNameSchema, IdentifierFields("id")))
		if err := w.Apply(ctx, rec); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		return readNamed(t, w)
	}
	real := run(t)
	saved := resolveHash
	resolveHash = func([]byte) uint64 { return 7 }
	defer func() { resolveHash = saved }()
	collided := run(t)
	if fmt.Sprint(real) != fmt.Sprint(want) || fmt.Sprint(collided) != fmt.Sprint(want) {
		t.Fatalf("read back\n with the key hash:      %v\n with every hash alike:  %v\n want:                   %v", real, collided, want)
	}
}

// TestApplyKeyHashes: Apply hands each record's key hashes on with its rows (the key stage's resolve then hashes
// no key twice), and they are the hashes the key stage computes itself (resolveHash of the key's encoding), for a
// one-integer key and for a key of two columns with a before image: key-changing updates and a delete by its
// before image included. Read back, the table holds what the changes say, next to an Upsert in the same batch.
func TestApplyKeyHashes(t *testing.T) {
	type change struct {
		op       string
		id       int64 // -1: null
		name     string
		beforeID int64 // -1: no before image
	}
	for _, tc := range []struct {
		name    string
		keys    []string
		before  bool
		changes []change
		want    map[int64][]string
	}{
		{"id", nil, false,
			[]change{{"c", 1, "a", -1}, {"c", 2, "b", -1}, {"u", 1, "a2", -1}, {"d", 3, "", -1}, {"c", 9, "z", -1}},
			map[int64][]string{0: {"n"}, 1: {"a2"}, 2: {"b"}, 4: {"u"}, 9: {"z"}}},
		{"id+name", []string{"id", "name"}, true,
			[]change{{"c", 1, "a", -1}, {"u", 5, "a", 1}, {"d", -1, "", 0}, {"c", 2, "b", -1}, {"d", 2, "b", -1}},
			map[int64][]string{4: {"u"}, 5: {"a"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			w := idNameWriter(t, 1, 1, WithCreate(idNameSchema, IdentifierFields("id")), WithKeys(tc.keys...))
			if err := w.Upsert(ctx, namedRows([]int64{4}, "u")); err != nil {
				t.Fatal(err)
			}
			fields := []arrow.Field{{Name: "op", Type: arrow.BinaryTypes.String},
				{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
				{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true}}
			if tc.before {
				fields = append(fields, arrow.Field{Name: "before_id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
					arrow.Field{Name: "before_name", Type: arrow.BinaryTypes.String, Nullable: true})
			}
			b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema(fields, nil))
			defer b.Release()
			for _, c := range tc.changes {
				b.Field(0).(*array.StringBuilder).Append(c.op)
				if c.id < 0 {
					b.Field(1).AppendNull()
					b.Field(2).AppendNull()
				} else {
					b.Field(1).(*array.Int64Builder).Append(c.id)
					b.Field(2).(*array.StringBuilder).Append(c.name)
				}
				if tc.before && c.beforeID < 0 {
					b.Field(3).AppendNull()
					b.Field(4).AppendNull()
				} else if tc.before {
					b.Field(3).(*array.Int64Builder).Append(c.beforeID)
					b.Field(4).(*array.StringBuilder).Append(map[int64]string{0: "n", 1: "a"}[c.beforeID])
				}
			}
			rec := b.NewRecordBatch()
			defer rec.Release()
			if err := w.Apply(ctx, rec); err != nil {
				t.Fatal(err)
			}
			carried := 0
			w.pipe.InspectOpen(func(o *batch) {
				for i, r := range o.In.Recs {
					hs := o.In.Hashes[i]
					if hs == nil {
						continue
					}
					carried++
					enc, err := keyenc.NewEncoder(keyColumns(r, w.keys.spec, o.In.Kinds[i] == opDelete))
					if err != nil {
						t.Fatal(err)
					}
					for row := 0; row < int(r.NumRows()); row++ {
						if want := resolveHash(enc.AppendKey(nil, row)); hs[row] != want {
							t.Errorf("record %d (%v) row %d: hash %x handed on, the key stage's is %x", i, o.In.Kinds[i], row, hs[row], want)
						}
					}
				}
			})
			if carried != 2 {
				t.Fatalf("%d records brought their hashes, want Apply's 2 (deletes, upserts)", carried)
			}
			if err := w.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if got := readNamed(t, w); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("read back %v, want %v", got, tc.want)
			}
		})
	}
}

// TestApplyKeepsLargeCallsUncopied: an Apply call whose columns need no conversion hands its record on
// uncopied, with the rows it upserts (sel): the call allocates next to nothing in the writer's memory (it
// copied every upserted row before), while the memory limit counts every buffer it pins, whole. A call on a
// slice of a much larger batch, which would pin all of it, is copied instead. Read back, the table holds what
// the changes say.
func TestApplyKeepsLargeCallsUncopied(t *testing.T) {
	ctx := context.Background()
	mem := newCountingAllocator()
	w := idNameWriter(t, 0, 0, WithCreate(idNameSchema, IdentifierFields("id")), func(o *options) { o.mem = mem })
	schema := arrow.NewSchema([]arrow.Field{{Name: "op", Type: arrow.BinaryTypes.String},
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	model := map[int64][]string{}
	// changes makes n changes from id from: inserts, every tenth a delete of a key no other row has.
	changes := func(from, n int) arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.NewGoAllocator(), schema)
		defer b.Release()
		for i := from; i < from+n; i++ {
			op, id, name := "c", int64(i), fmt.Sprintf("name-%06d-%s", i, strings.Repeat("x", i%13))
			if i%10 == 9 {
				op, id = "d", int64(1_000_000+i)
			}
			b.Field(0).(*array.StringBuilder).Append(op)
			b.Field(1).(*array.Int64Builder).Append(id)
			b.Field(2).(*array.StringBuilder).Append(name)
		}
		return b.NewRecordBatch()
	}
	pinned := func(rec arrow.RecordBatch) (n int64) {
		for _, col := range rec.Columns()[1:] {
			for _, b := range col.Data().Buffers() {
				if b != nil {
					n += int64(b.Cap())
				}
			}
		}
		return n
	}
	upserted := func(rec arrow.RecordBatch) (n int64) { // what a copy of the upserted rows holds
		ops, names := rec.Column(0).(*array.String), rec.Column(2).(*array.String)
		for i := range int(rec.NumRows()) {
			if ops.Value(i) == "c" {
				n += 8 + 4 + int64(len(names.Value(i)))
				model[rec.Column(1).(*array.Int64).Value(i)] = []string{names.Value(i)}
			}
		}
		return n
	}
	openBytes := func() int64 {
		var n int64
		w.pipe.InspectOpen(func(o *batch) { n = o.Bytes })
		return n
	}

	whole := changes(0, 1000)
	copySize, pins := upserted(whole), pinned(whole)
	before := mem.allocated.Load()
	if err := w.Apply(ctx, whole); err != nil {
		t.Fatal(err)
	}
	whole.Release()
	if got := mem.allocated.Load() - before; got > copySize/8 {
		t.Fatalf("the call allocated %d bytes in the writer's memory; a copy of its upserted rows holds %d", got, copySize)
	}
	if sel := SelectedRowsForTest(w); sel != 900 {
		t.Fatalf("%d rows kept by selection, want the call's 900 upserts", sel)
	}
	if got := openBytes(); got < pins {
		t.Fatalf("the open buffer counts %d bytes; the call's record pins %d", got, pins)
	}

	large := changes(1000, 20_000)
	slice := large.NewSlice(5000, 6000)
	large.Release()
	copySize, pins = upserted(slice), pinned(slice)
	before, held := mem.allocated.Load(), openBytes()
	if err := w.Apply(ctx, slice); err != nil {
		t.Fatal(err)
	}
	slice.Release()
	if got := mem.allocated.Load() - before; got < copySize {
		t.Fatalf("a slice of a larger batch: the call allocated %d bytes, want a copy of its upserted rows (%d)", got, copySize)
	}
	if got := openBytes() - held; got > pins/4 {
		t.Fatalf("a slice of a larger batch: the open buffer grew by %d bytes, near what the whole batch pins (%d)", got, pins)
	}
	if sel := SelectedRowsForTest(w); sel != 900 {
		t.Fatalf("%d rows kept by selection after the slice's call, want the first call's 900", sel)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readNamed(t, w); fmt.Sprint(got) != fmt.Sprint(model) {
		t.Fatalf("read back %d keys, want %d: %v", len(got), len(model), got)
	}
}
