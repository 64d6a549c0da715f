package iceberg_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// Apply's own cases: the op spellings, bad input, versions and replays, options. Random interleaved streams in
// both modes and every format version run in the model harness (TestModel draws Apply operations).

// lsnSchema is kvSchema with a version column, lsn, that the table keeps.
var lsnSchema = arrow.NewSchema(append(slices.Clone(kvSchema.Fields()),
	arrow.Field{Name: "lsn", Type: arrow.PrimitiveTypes.Int64, Nullable: true}), nil)

// applyCase is a mode and format version Apply runs on.
type applyCase struct {
	mode    iceberg.Mode
	version int
}

func (c applyCase) String() string {
	return fmt.Sprintf("%s/v%d", map[iceberg.Mode]string{iceberg.MergeOnRead: "mor", iceberg.CopyOnWrite: "cow"}[c.mode], c.version)
}

var applyCases = []applyCase{
	{iceberg.MergeOnRead, 2}, {iceberg.MergeOnRead, 3}, {iceberg.CopyOnWrite, 2}, {iceberg.CopyOnWrite, 3},
}

// openApplyWriter opens a writer on the table at ident keyed by id, creating it with schema, in c's mode and
// format version; it is closed with the test.
func openApplyWriter(t *testing.T, cat icecatalog.Catalog, ident table.Identifier, c applyCase, schema *arrow.Schema, opts ...iceberg.Option) *iceberg.Writer {
	t.Helper()
	ctx := context.Background()
	w, err := iceberg.NewWriter(ctx, cat, ident, append([]iceberg.Option{
		iceberg.WithCreate(schema, iceberg.IdentifierFields("id"), iceberg.FormatVersion(c.version)),
		iceberg.WithMode(c.mode), iceberg.WithFlushInterval(0)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close(ctx) })
	return w
}

// applyChanges applies chs in one call, failing the test on an error.
func applyChanges(t *testing.T, w *iceberg.Writer, chs []kvChange, cc changeColumns) {
	t.Helper()
	rec := changeBatch(chs, cc)
	defer rec.Release()
	if err := w.Apply(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
}

func flush(t *testing.T, w *iceberg.Writer) {
	t.Helper()
	if err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestApplyOps applies every op spelling, key-changing updates, a delete by before image only and a re-insert,
// in every mode and format version: the table holds what the sequential model says, and each call hands the
// writer one row per key it changed.
func TestApplyOps(t *testing.T) {
	t.Parallel() // see TestMain
	first := []kvChange{
		{op: "c", id: 1, v: 10, before: -1}, {op: "r", id: 2, v: 20, before: -1},
		{op: "INSERT", id: 3, v: 30, before: -1}, {op: "Insert", id: 4, v: 40, before: -1},
		{op: "u", id: 1, v: 11, before: 1}, {op: "UPDATE", id: 5, v: 50, before: 2}, // 2 becomes 5
		{op: "d", id: 3, before: -1}, {op: "DELETE", id: 4, before: 4, noKey: true}, // 4 by its before image
		{op: "insert", id: 3, v: 31, before: -1}, {op: "R", id: 7, v: 70, before: -1},
	}
	second := []kvChange{
		{op: "delete", id: 5, before: -1}, {op: "U", id: 6, v: 60, before: 1}, // 1 becomes 6
		{op: "D", id: 7, before: -1}, {op: "C", id: 7, v: 71, before: -1}, {op: "update", id: 3, v: 32, before: -1},
	}
	want := kvModel{3: {32}, 6: {60}, 7: {71}}
	for _, c := range applyCases {
		t.Run(c.String(), func(t *testing.T) {
			cat, ident := openCatalog(t), table.Identifier{"apply", "ops"}
			w := openApplyWriter(t, cat, ident, c, kvSchema)
			model := kvModel{}
			var rows int64
			for _, chs := range [][]kvChange{first, second} {
				applyChanges(t, w, chs, changeColumns{})
				changed, _ := model.applyChanges(chs, nil)
				rows += int64(len(changed))
				flush(t, w)
				compareKV(t, readKV(t, cat, ident), model)
			}
			compareKV(t, readKV(t, cat, ident), want)
			if st := w.Stats(); st.RowsAccepted != rows || rows != 11 {
				t.Fatalf("%d rows accepted, want one per key changed per call (%d, model: 11)", st.RowsAccepted, rows)
			}
		})
	}
}

// TestApplyOpLayouts takes the op column as a large string and dictionary-encoded.
func TestApplyOpLayouts(t *testing.T) {
	ctx := context.Background()
	cat, ident := openCatalog(t), table.Identifier{"apply", "layouts"}
	w := openApplyWriter(t, cat, ident, applyCases[0], kvSchema)
	chs := []kvChange{{op: "c", id: 1, v: 1, before: -1}, {op: "c", id: 2, v: 2, before: -1}, {op: "d", id: 1, before: -1},
		{op: "u", id: 2, v: 3, before: -1}}
	mem := memory.NewGoAllocator()
	large := array.NewLargeStringBuilder(mem)
	dict := array.NewDictionaryBuilder(mem, &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8,
		ValueType: arrow.BinaryTypes.String}).(*array.BinaryDictionaryBuilder)
	for _, c := range chs {
		large.Append(c.op)
		if err := dict.AppendString(c.op); err != nil {
			t.Fatal(err)
		}
	}
	for _, op := range []arrow.Array{large.NewArray(), dict.NewArray()} {
		rec := replaceColumn(changeBatch(chs, changeColumns{}), "op", op)
		if err := w.Apply(ctx, rec); err != nil {
			t.Fatalf("op column of %s: %v", op.DataType(), err)
		}
		rec.Release()
		op.Release()
	}
	flush(t, w)
	compareKV(t, readKV(t, cat, ident), kvModel{2: {3}})
}

// replaceColumn returns rec (released) with its column name replaced by col (appended when it has none).
func replaceColumn(rec arrow.RecordBatch, name string, col arrow.Array) arrow.RecordBatch {
	defer rec.Release()
	fields, cols := slices.Clone(rec.Schema().Fields()), slices.Clone(rec.Columns())
	f := arrow.Field{Name: name, Type: col.DataType(), Nullable: true}
	if idx := rec.Schema().FieldIndices(name); len(idx) > 0 {
		fields[idx[0]], cols[idx[0]] = f, col
	} else {
		fields, cols = append(fields, f), append(cols, col)
	}
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, rec.NumRows())
}

// dropColumn returns rec (released) without its column name.
func dropColumn(rec arrow.RecordBatch, name string) arrow.RecordBatch {
	defer rec.Release()
	var fields []arrow.Field
	var cols []arrow.Array
	for i, f := range rec.Schema().Fields() {
		if f.Name != name {
			fields, cols = append(fields, f), append(cols, rec.Column(i))
		}
	}
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, rec.NumRows())
}

// TestApplyBadInput: a bad op value, a missing or mistyped change column, a null key or version, an unknown
// column: each is a *ColumnError naming the column (and the row, for a row's problem), nothing of the call is
// accepted, and the writer goes on.
func TestApplyBadInput(t *testing.T) {
	ctx := context.Background()
	cat, ident := openCatalog(t), table.Identifier{"apply", "bad"}
	cc := changeColumns{version: "lsn"}
	w := openApplyWriter(t, cat, ident, applyCases[1], lsnSchema, iceberg.WithChangeColumns(iceberg.ChangeColumns{Version: "lsn"}))
	good := []kvChange{{op: "c", id: 1, v: 1, before: -1, ver: 1}, {op: "c", id: 2, v: 2, before: -1, ver: 2},
		{op: "c", id: 3, v: 3, before: -1, ver: 3}}
	model, vers := kvModel{}, map[int64]int64{}
	applyChanges(t, w, good, cc)
	model.applyChanges(good, vers)
	mem := memory.NewGoAllocator()
	column := func(f func(b *array.RecordBuilder)) arrow.Array {
		rec := buildRecord(t, []arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, f)
		defer rec.Release()
		col := rec.Column(0)
		col.Retain()
		return col
	}
	nullAt := func(typ arrow.DataType, n, null int) arrow.Array {
		b := array.NewBuilder(mem, typ)
		defer b.Release()
		for i := 0; i < n; i++ {
			if i == null {
				b.AppendNull()
			} else if err := b.AppendValueFromString(map[arrow.Type]string{arrow.STRING: "u", arrow.INT64: "9"}[typ.ID()]); err != nil {
				t.Fatal(err)
			}
		}
		return b.NewArray()
	}
	next := []kvChange{{op: "u", id: 1, v: 11, before: -1, ver: 4}, {op: "d", id: 2, before: -1, ver: 5},
		{op: "c", id: 4, v: 14, before: -1, ver: 6}}
	batch := func() arrow.RecordBatch { return changeBatch(next, cc) }
	withOp := func(row int, op string) arrow.RecordBatch {
		chs := slices.Clone(next)
		chs[row].op = op
		return changeBatch(chs, cc)
	}
	cases := []struct {
		name, column, row string
		sentinel          error
		rec               func() arrow.RecordBatch
	}{
		{"unknown op", "op", "row 2", iceberg.ErrUnknownOperation, func() arrow.RecordBatch { return withOp(2, "upsert") }},
		{"truncate", "op", "row 0", iceberg.ErrUnknownOperation, func() arrow.RecordBatch { return withOp(0, "t") }},
		{"empty op", "op", "row 1", iceberg.ErrUnknownOperation, func() arrow.RecordBatch { return withOp(1, "") }},
		{"null op", "op", "row 1", iceberg.ErrUnknownOperation, func() arrow.RecordBatch {
			return replaceColumn(batch(), "op", nullAt(arrow.BinaryTypes.String, 3, 1))
		}},
		{"op of integers", "op", "", iceberg.ErrTypeMismatch, func() arrow.RecordBatch {
			return replaceColumn(batch(), "op", column(func(b *array.RecordBuilder) {
				b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2, 3}, nil)
			}))
		}},
		{"no op column", "op", "", iceberg.ErrMissingColumn, func() arrow.RecordBatch { return dropColumn(batch(), "op") }},
		{"no key column", "id", "", iceberg.ErrMissingColumn, func() arrow.RecordBatch { return dropColumn(batch(), "id") }},
		{"no version column", "lsn", "", iceberg.ErrMissingColumn, func() arrow.RecordBatch { return dropColumn(batch(), "lsn") }},
		{"null version", "lsn", "row 2", iceberg.ErrNullInRequired, func() arrow.RecordBatch {
			return replaceColumn(batch(), "lsn", nullAt(arrow.PrimitiveTypes.Int64, 3, 2))
		}},
		{"version of strings", "lsn", "", iceberg.ErrTypeMismatch, func() arrow.RecordBatch {
			return replaceColumn(batch(), "lsn", nullAt(arrow.BinaryTypes.String, 3, -1))
		}},
		{"null key of an upsert", "id", "row 0", iceberg.ErrNullInRequired, func() arrow.RecordBatch {
			return replaceColumn(batch(), "id", nullAt(arrow.PrimitiveTypes.Int64, 3, 0))
		}},
		{"null key of a delete without before image", "id", "row 1", iceberg.ErrNullInRequired, func() arrow.RecordBatch {
			return replaceColumn(batch(), "id", nullAt(arrow.PrimitiveTypes.Int64, 3, 1))
		}},
		{"key of another type", "id", "", iceberg.ErrTypeMismatch, func() arrow.RecordBatch {
			return replaceColumn(batch(), "id", nullAt(arrow.BinaryTypes.String, 3, -1))
		}},
		{"unknown column", "extra", "", iceberg.ErrUnknownColumn, func() arrow.RecordBatch {
			return replaceColumn(batch(), "extra", nullAt(arrow.PrimitiveTypes.Int64, 3, -1))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := w.Stats()
			rec := c.rec()
			err := w.Apply(ctx, rec)
			rec.Release()
			var ce *iceberg.ColumnError
			if !errors.As(err, &ce) || ce.Column != c.column || !errors.Is(err, c.sentinel) {
				t.Fatalf("error %v, want a *ColumnError on %q wrapping %v", err, c.column, c.sentinel)
			}
			if !strings.Contains(err.Error(), c.row) {
				t.Fatalf("error %q does not name the %s", err, c.row)
			}
			if after := w.Stats(); after.RowsAccepted != before.RowsAccepted || after.ChangesSkipped != before.ChangesSkipped {
				t.Fatalf("a failed Apply accepted rows or skipped changes: %+v, then %+v", before, after)
			}
		})
	}
	// Nothing of the failed calls counted: their versions (up to 6) were not recorded, so the same changes apply.
	applyChanges(t, w, next, cc)
	if _, skipped := model.applyChanges(next, vers); skipped != 0 || w.Stats().ChangesSkipped != 0 {
		t.Fatalf("changes skipped: model %d, writer %d", skipped, w.Stats().ChangesSkipped)
	}
	flush(t, w)
	compareKV(t, readKV(t, cat, ident), model)
}

// TestApplyWithoutKeys: Apply needs a key, as Upsert does.
func TestApplyWithoutKeys(t *testing.T) {
	ctx := context.Background()
	w, err := iceberg.NewWriter(ctx, openCatalog(t), table.Identifier{"apply", "nokeys"}, iceberg.WithCreate(kvSchema))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	rec := changeBatch([]kvChange{{op: "c", id: 1, v: 1, before: -1}}, changeColumns{})
	defer rec.Release()
	if err := w.Apply(ctx, rec); !errors.Is(err, iceberg.ErrNoKeys) {
		t.Fatalf("Apply without keys: %v, want ErrNoKeys", err)
	}
}

// TestApplyVersions replays a change stream with a version column the table keeps: once more in the same
// writer (in other call sizes, and reversed), then after a restart. A replay never takes a key back to an
// older row: after every commit of the replay in the same writer the table is the stream's end state; after a
// restart the keys the table holds are (their versions come from the table), while deleted keys may come back
// until the replay deletes them again (their versions did not survive), and the end state is the same. The
// stream is 120 changes over 30 keys (ICEWRITER_SOAK=1: 200).
func TestApplyVersions(t *testing.T) {
	t.Parallel() // see TestMain
	cc := changeColumns{version: "lsn"}
	opt := iceberg.WithChangeColumns(iceberg.ChangeColumns{Version: "lsn"})
	for i, c := range applyCases {
		t.Run(c.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(i), 13))
			ops := &kvOps{rng: rng, keySpace: 30}
			stream := ops.randomChanges(iceberg.SoakForTest(t, 120, 200))
			final := kvModel{}
			if _, skipped := final.applyChanges(stream, map[int64]int64{}); skipped != 0 {
				t.Fatalf("the stream's versions rise, yet the model skipped %d changes", skipped)
			}
			calls := func(chs []kvChange, each func(part []kvChange)) {
				for len(chs) > 0 {
					n := min(len(chs), 1+rng.IntN(80))
					each(chs[:n])
					chs = chs[n:]
				}
			}
			cat, ident := openCatalog(t), table.Identifier{"apply", "versions"}
			w := openApplyWriter(t, cat, ident, c, lsnSchema, opt)
			calls(stream, func(part []kvChange) { applyChanges(t, w, part, cc) })
			flush(t, w)
			compareKV(t, readKV(t, cat, ident), final)

			calls(stream, func(part []kvChange) {
				applyChanges(t, w, part, cc)
				flush(t, w)
				compareKV(t, readKV(t, cat, ident), final)
			})
			reversed := slices.Clone(stream)
			slices.Reverse(reversed)
			applyChanges(t, w, reversed, cc)
			flush(t, w)
			compareKV(t, readKV(t, cat, ident), final)
			if s := w.Stats().ChangesSkipped; s < int64(len(stream)) {
				t.Fatalf("%d changes skipped in two replays of %d", s, len(stream))
			}
			if err := w.Close(context.Background()); err != nil {
				t.Fatal(err)
			}

			w = openApplyWriter(t, cat, ident, c, lsnSchema, opt)
			calls(stream, func(part []kvChange) {
				applyChanges(t, w, part, cc)
				flush(t, w)
				got := readKV(t, cat, ident)
				for id, vs := range final {
					if !slices.Equal(got[id], vs) {
						t.Fatalf("after a restart, a replay took id %d from v=%v to v=%v", id, vs, got[id])
					}
				}
			})
			compareKV(t, readKV(t, cat, ident), final)
			if w.Stats().ChangesSkipped == 0 {
				t.Fatal("no change skipped after a restart: the versions were not read from the table")
			}
		})
	}
}

// TestApplyVersionOrder: inside a call and across calls, a change older than its key's last is skipped, a
// deleted key's version included; equal versions apply.
func TestApplyVersionOrder(t *testing.T) {
	cc := changeColumns{version: "seq"}
	cat, ident := openCatalog(t), table.Identifier{"apply", "order"}
	w := openApplyWriter(t, cat, ident, applyCases[0], kvSchema, iceberg.WithChangeColumns(iceberg.ChangeColumns{Version: "seq"}))
	calls := [][]kvChange{
		{{op: "c", id: 1, v: 5, before: -1, ver: 5}, {op: "u", id: 1, v: 3, before: -1, ver: 3}, // 3 skipped
			{op: "c", id: 2, v: 1, before: -1, ver: 1}, {op: "d", id: 2, before: -1, ver: 2}},
		{{op: "c", id: 2, v: 11, before: -1, ver: 1}, // older than its delete: skipped
			{op: "u", id: 1, v: 4, before: -1, ver: 4},   // skipped
			{op: "u", id: 3, v: 6, before: 1, ver: 4},    // the delete of 1 is skipped, 3 is new
			{op: "u", id: 1, v: 55, before: -1, ver: 5}}, // equal: applies
		{{op: "d", id: 3, before: -1, ver: 2}, {op: "c", id: 2, v: 12, before: -1, ver: 3}}, // skipped; applies
	}
	model, vers := kvModel{}, map[int64]int64{}
	skippedModel := 0
	for _, chs := range calls {
		applyChanges(t, w, chs, cc)
		_, s := model.applyChanges(chs, vers)
		skippedModel += s
	}
	flush(t, w)
	want := kvModel{1: {55}, 2: {12}, 3: {6}}
	compareKV(t, readKV(t, cat, ident), want)
	compareKV(t, readKV(t, cat, ident), model)
	if s := w.Stats().ChangesSkipped; s != 5 || skippedModel != 5 {
		t.Fatalf("%d changes skipped (model: %d), want 5", s, skippedModel)
	}
	tbl := tabletest.Load(t, cat, ident)
	if _, ok := tbl.Schema().FindFieldByName("seq"); ok {
		t.Fatal("the version column, not a table column, was written")
	}
}

// TestApplyOptions: bad WithChangeColumns values fail NewWriter with an error naming the option.
func TestApplyOptions(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cases := map[string]iceberg.ChangeColumns{
		"op and version one column": {Op: "x", Version: "x"},
		"negative VersionBytes":     {Version: "lsn", VersionBytes: -1},
		"VersionBytes over half":    {Version: "lsn", VersionBytes: iceberg.DefaultMemoryLimit/2 + 1},
		"op column is the key":      {Op: "id"},
		"version column is the key": {Version: "id"},
		"op column not a string":    {Op: "v"},
		"version column a string":   {Version: "s"},
	}
	for name, cc := range cases {
		t.Run(name, func(t *testing.T) {
			w, err := iceberg.NewWriter(ctx, openCatalog(t), table.Identifier{"apply", "opts"},
				iceberg.WithCreate(kvSchema, iceberg.IdentifierFields("id")), iceberg.WithChangeColumns(cc))
			if err == nil {
				_ = w.Close(ctx)
			}
			if !errors.Is(err, iceberg.ErrInvalidOption) || !strings.Contains(fmt.Sprint(err), "WithChangeColumns") {
				t.Fatalf("WithChangeColumns(%+v): %v, want ErrInvalidOption naming the option", cc, err)
			}
		})
	}
}

// TestApplyConcurrent: Apply calls with versions from several goroutines (disjoint keys, each stream replayed
// once more) leave each goroutine's end state, with every replayed change but each key's last skipped.
func TestApplyConcurrent(t *testing.T) {
	cc := changeColumns{version: "lsn"}
	cat, ident := openCatalog(t), table.Identifier{"apply", "concurrent"}
	w := openApplyWriter(t, cat, ident, applyCases[1], lsnSchema, iceberg.WithChangeColumns(iceberg.ChangeColumns{Version: "lsn"}))
	const streams = 4
	models := make([]kvModel, streams)
	want := kvModel{}
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for g := 0; g < streams; g++ {
		ops := &kvOps{rng: rand.New(rand.NewPCG(uint64(g), 5)), keySpace: 20}
		stream := ops.randomChanges(200)
		for i := range stream { // keys of stream g: 100g..100g+19
			stream[i].id += int64(100 * g)
			if stream[i].before >= 0 {
				stream[i].before += int64(100 * g)
			}
		}
		models[g] = kvModel{}
		models[g].applyChanges(stream, map[int64]int64{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, chs := range [][]kvChange{stream[:120], stream[120:], stream[:120], stream[120:]} {
				rec := changeBatch(chs, cc)
				err := w.Apply(context.Background(), rec)
				rec.Release()
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, m := range models {
		for id, vs := range m {
			want[id] = vs
		}
	}
	flush(t, w)
	compareKV(t, readKV(t, cat, ident), want)
	if s := w.Stats().ChangesSkipped; s == 0 {
		t.Fatal("no replayed change skipped")
	}
}

// TestApplyVersionDeadLetter: a change whose row goes to the dead letter handler is not applied, so it records
// no version: an older change of its key in a later call (a replay from before it) still applies, while an
// older change of a key whose newer change was applied is skipped.
func TestApplyVersionDeadLetter(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	required := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "v", Type: arrow.PrimitiveTypes.Int64},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	in := arrow.NewSchema([]arrow.Field{
		{Name: "op", Type: arrow.BinaryTypes.String},
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "seq", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	// change upserts id with v at seq; v < 0: a null v, which the table's required v sends to the dead letters.
	type change struct{ id, v, seq int64 }
	apply := func(w *iceberg.Writer, chs ...change) {
		t.Helper()
		b := array.NewRecordBuilder(memory.NewGoAllocator(), in)
		defer b.Release()
		for _, c := range chs {
			b.Field(0).(*array.StringBuilder).Append("u")
			b.Field(1).(*array.Int64Builder).Append(c.id)
			if c.v < 0 {
				b.Field(2).AppendNull()
			} else {
				b.Field(2).(*array.Int64Builder).Append(c.v)
			}
			b.Field(3).(*array.StringBuilder).Append(fmt.Sprintf("row-%d-%d", c.id, c.v))
			b.Field(4).(*array.Int64Builder).Append(c.seq)
		}
		rec := b.NewRecordBatch()
		defer rec.Release()
		if err := w.Apply(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range applyCases {
		t.Run(c.String(), func(t *testing.T) {
			var dl deadLetters
			defer dl.release()
			cat, ident := openCatalog(t), table.Identifier{"apply", "dead_versions"}
			w := openApplyWriter(t, cat, ident, c, required,
				iceberg.WithChangeColumns(iceberg.ChangeColumns{Version: "seq"}), iceberg.WithDeadLetter(dl.fn))
			apply(w, change{id: 1, v: -1, seq: 10}, change{id: 2, v: 20, seq: 10})
			apply(w, change{id: 1, v: 5, seq: 5}, change{id: 2, v: 7, seq: 5})
			flush(t, w)
			compareKV(t, readKV(t, cat, ident), kvModel{1: {5}, 2: {20}})
			if len(dl.rows) != 1 {
				t.Fatalf("%d rows dead-lettered, want 1", len(dl.rows))
			}
			if s := w.Stats().ChangesSkipped; s != 1 {
				t.Fatalf("%d changes skipped, want 1 (id 2's older change)", s)
			}
		})
	}
}

// TestSourceAbortVersions: Source.Abort forgets the versions of the changes it drops, so the partition's replay
// from its committed position applies changes older than the dropped ones (which were never committed); a key
// that another partition changed since keeps that partition's version.
func TestSourceAbortVersions(t *testing.T) {
	t.Parallel() // see TestMain
	cc := changeColumns{version: "seq"}
	for _, c := range applyCases {
		t.Run(c.String(), func(t *testing.T) {
			ctx := context.Background()
			cat, ident := openCatalog(t), table.Identifier{"apply", "abort_versions"}
			w := openApplyWriter(t, cat, ident, c, kvSchema, iceberg.WithChangeColumns(iceberg.ChangeColumns{Version: "seq"}),
				iceberg.WithWriterID("abort-versions"), iceberg.WithCheckpoints())
			p, q := w.Source("p"), w.Source("q")
			apply := func(s *iceberg.Source, chs ...kvChange) {
				t.Helper()
				rec := changeBatch(chs, cc)
				defer rec.Release()
				if err := s.Apply(ctx, rec); err != nil {
					t.Fatal(err)
				}
			}
			checkpoint := func(s *iceberg.Source, pos string) {
				t.Helper()
				if err := s.Checkpoint(ctx, pos); err != nil {
					t.Fatal(err)
				}
			}
			apply(p, kvChange{op: "c", id: 1, v: 1, before: -1, ver: 1}, kvChange{op: "c", id: 2, v: 1, before: -1, ver: 1})
			checkpoint(p, "1")
			// Dropped by the abort: p's changes after its position 1.
			apply(p, kvChange{op: "u", id: 1, v: 5, before: -1, ver: 5}, kvChange{op: "d", id: 2, before: -1, ver: 5},
				kvChange{op: "c", id: 3, v: 5, before: -1, ver: 5}, kvChange{op: "c", id: 4, v: 5, before: -1, ver: 5})
			apply(q, kvChange{op: "u", id: 4, v: 6, before: -1, ver: 6})
			checkpoint(q, "q1")
			if err := p.Abort(ctx); err != nil {
				t.Fatal(err)
			}
			// The replay from position 1 holds other changes, older than the dropped ones.
			apply(p, kvChange{op: "u", id: 1, v: 3, before: -1, ver: 3}, kvChange{op: "u", id: 2, v: 3, before: -1, ver: 3},
				kvChange{op: "c", id: 3, v: 3, before: -1, ver: 3}, kvChange{op: "u", id: 4, v: 3, before: -1, ver: 3})
			checkpoint(p, "3")
			flush(t, w)
			compareKV(t, readKV(t, cat, ident), kvModel{1: {3}, 2: {3}, 3: {3}, 4: {6}})
			if s := w.Stats().ChangesSkipped; s != 1 {
				t.Fatalf("%d changes skipped, want 1 (p's replayed change of id 4, older than q's)", s)
			}
		})
	}
}

// TestApplyCallerBuffers: Apply keeps a large call's record uncopied (the rows it upserts are taken when the
// batch is sealed), yet the caller may release it as soon as the call returns, and the writer never writes into
// it. Calls of 100 to 400 random changes over many keys (key-changing updates, deletes by before image only,
// a replayed call whose older changes the version column skips), in every mode and format version, with the
// caller's records allocated from an allocator that poisons what is freed: released at once, the table still
// holds what the model says, and the writer released every reference by Close; kept, their bytes are what they
// were before the calls.
func TestApplyCallerBuffers(t *testing.T) {
	t.Parallel() // see TestMain
	cc := changeColumns{version: "lsn"}
	opt := iceberg.WithChangeColumns(iceberg.ChangeColumns{Version: "lsn"})
	for i, c := range applyCases {
		for _, release := range []bool{true, false} {
			name := c.String() + map[bool]string{true: "/released", false: "/kept"}[release]
			t.Run(name, func(t *testing.T) {
				ctx := context.Background()
				mem := newPoisonAllocator()
				cat, ident := openCatalog(t), table.Identifier{"apply", "caller"}
				w := openApplyWriter(t, cat, ident, c, lsnSchema, opt)
				ops := &kvOps{rng: rand.New(rand.NewPCG(uint64(i), 29)), keySpace: 20_000}
				model, vers := kvModel{}, map[int64]int64{}
				var kept []arrow.RecordBatch
				var prints []string
				selected := 0
				var last []kvChange
				for call := range 8 {
					chs := ops.randomChanges(100 + ops.rng.IntN(300))
					if call == 5 {
						chs = append(slices.Clone(last), chs...) // a replay: the older changes are skipped
					}
					last = chs
					rec := changeBatchIn(mem, chs, cc)
					print := bufferPrint(rec)
					if err := w.Apply(ctx, rec); err != nil {
						t.Fatal(err)
					}
					if got := bufferPrint(rec); got != print {
						t.Fatalf("call %d: Apply changed the caller's buffers", call)
					}
					selected = max(selected, iceberg.SelectedRowsForTest(w))
					if release {
						rec.Release()
					} else {
						kept = append(kept, rec)
						prints = append(prints, print)
					}
					model.applyChanges(chs, vers)
					if call%3 == 2 {
						flush(t, w)
						compareKV(t, readKV(t, cat, ident), model)
					}
				}
				if selected == 0 {
					t.Fatal("no call kept its record uncopied")
				}
				if err := w.Close(ctx); err != nil {
					t.Fatal(err)
				}
				compareKV(t, readKV(t, cat, ident), model)
				for j, rec := range kept {
					if bufferPrint(rec) != prints[j] {
						t.Fatalf("call %d: the caller's buffers changed after the call", j)
					}
					rec.Release()
				}
				mem.AssertSize(t, 0)
			})
		}
	}
}

// bufferPrint is a fingerprint of every byte of a record's buffers.
func bufferPrint(rec arrow.RecordBatch) string {
	h := fnv.New64a()
	var walk func(d arrow.ArrayData)
	walk = func(d arrow.ArrayData) {
		for _, b := range d.Buffers() {
			if b != nil {
				h.Write(b.Bytes())
			}
		}
		for _, ch := range d.Children() {
			walk(ch)
		}
	}
	for _, col := range rec.Columns() {
		walk(col.Data())
	}
	return fmt.Sprintf("%x", h.Sum64())
}

// TestApplyVersionColumnNewerThanSnapshot: a version column added to the table after its newest snapshot (no
// row written since) is read in the table's current schema when a writer loads the versions of keys: the first
// Apply works, and a later writer skips a replayed older change.
func TestApplyVersionColumnNewerThanSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"apply", "newlsn"}
	createTable(t, ctx, cat, ident, arrow.NewSchema([]arrow.Field{fID, fName}, nil), iceberg.IdentifierFields("id"))
	w := newEvolvingWriter(t, cat, ident, nil)
	writeMaps(t, w, []arrow.Field{fID, fName}, map[string]any{"id": 1, "name": "a"})
	must(t, w.Flush(ctx))
	must(t, w.AddColumn(ctx, arrow.Field{Name: "lsn", Type: arrow.PrimitiveTypes.Int64, Nullable: true}, nil))
	must(t, w.Close(ctx))
	fields := []arrow.Field{{Name: "op", Type: arrow.BinaryTypes.String}, fID, fName, {Name: "lsn", Type: arrow.PrimitiveTypes.Int64}}
	for _, ch := range []map[string]any{{"op": "u", "id": 1, "name": "b", "lsn": 5}, {"op": "u", "id": 1, "name": "old", "lsn": 3}} {
		w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithFlushInterval(0),
			iceberg.WithChangeColumns(iceberg.ChangeColumns{Version: "lsn"}))
		if err != nil {
			t.Fatal(err)
		}
		rec := mapsBatch(t, fields, ch)
		must(t, w.Apply(ctx, rec))
		rec.Release()
		must(t, w.Close(ctx))
	}
	if counts, rows := readRows(t, cat, ident); counts[1] != 1 || rows[1]["name"] != "b" || rows[1]["lsn"] != int64(5) {
		t.Fatalf("id 1: %d rows, last %v; want one, name b, lsn 5", counts[1], rows[1])
	}
}
