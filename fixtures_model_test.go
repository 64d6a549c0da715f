package iceberg_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
)

// The sequential models the tests compare a table with: the seed rows by id, and the keyed kv model with its
// random operations.

// assertIDs fails unless counts holds exactly the ids from..to-1, each once.
func assertIDs(t *testing.T, counts map[int64]int, from, to int64) {
	t.Helper()
	if len(counts) != int(to-from) {
		t.Fatalf("table has %d ids, want %d (ids %d..%d)", len(counts), to-from, from, to-1)
	}
	for id := from; id < to; id++ {
		if counts[id] != 1 {
			t.Fatalf("id %d appears %d times", id, counts[id])
		}
	}
}

// seedModel is the rows a seed-table test expects, by id: each id's newest row, as readRows returns them.
type seedModel map[int64]map[string]any

// put records rec's rows (a write or an upsert: the newest row of an id wins).
func (m seedModel) put(rec arrow.RecordBatch) {
	ids := rec.Column(rec.Schema().FieldIndices("id")[0]).(*array.Int64)
	for r := 0; r < int(rec.NumRows()); r++ {
		row := map[string]any{}
		for c, f := range rec.Schema().Fields() {
			row[f.Name] = cellValue(rec.Column(c), r)
		}
		m[ids.Value(r)] = row
	}
}

// check fails unless the table read back with iceberg-go's scanner holds every id of m once, with m's values.
func (m seedModel) check(t *testing.T, cat icecatalog.Catalog, ident table.Identifier) {
	t.Helper()
	counts, got := readRows(t, cat, ident)
	if len(counts) != len(m) {
		t.Fatalf("table has %d ids, want %d", len(counts), len(m))
	}
	for id, want := range m {
		if counts[id] != 1 {
			t.Fatalf("id %d appears %d times", id, counts[id])
		}
		for col, v := range want {
			if got[id][col] != v {
				t.Fatalf("id %d: %s = %v, want %v", id, col, got[id][col], v)
			}
		}
	}
}

// kvModel is the sequential model: Write inserts, Upsert replaces every row of the key, Delete removes them.
type kvModel map[int64][]int64

func (m kvModel) insert(id, v int64) { m[id] = append(m[id], v) }

func (m kvModel) upsert(id, v int64) { m[id] = []int64{v} }

func (m kvModel) del(id int64) { delete(m, id) }

// commitIDs writes and commits ids 0..n-1 (value = id) and returns the model of the table it leaves.
func commitIDs(t *testing.T, ctx context.Context, w *iceberg.Writer, n int64) kvModel {
	t.Helper()
	model := kvModel{}
	var ids []int64
	for id := int64(0); id < n; id++ {
		ids = append(ids, id)
		model.insert(id, id)
	}
	must(t, w.Write(ctx, kvBatch(ids, ids)))
	must(t, w.Flush(ctx))
	return model
}

// compareKV fails unless the table read back (readKV) holds, per id, exactly the model's values.
func compareKV(t *testing.T, got map[int64][]int64, want kvModel) {
	t.Helper()
	for id, vs := range want {
		w := slices.Clone(vs)
		slices.Sort(w)
		if !slices.Equal(got[id], w) {
			t.Fatalf("id %d: table has v=%v, model %v", id, got[id], w)
		}
	}
	for id, vs := range got {
		if _, ok := want[id]; !ok {
			t.Fatalf("id %d: table has v=%v, model has no row", id, vs)
		}
	}
}

// kvOps draws the random operations of the keyed model tests: a Write, Upsert or Delete of 1 to maxRows keys
// below keySpace (repeats allowed, inside a batch too), each row with a value no row had before; with changes
// set, a quarter of the operations are an Apply of 1 to 2*maxRows changes instead (randomChanges).
type kvOps struct {
	rng      *rand.Rand
	keySpace int64
	maxRows  int
	writes   int   // a draw of 0..9 below writes is a Write, below 8 an Upsert, else a Delete
	next     int64 // the last value given
	// rows and keys build the batches of an operation; nil: kvBatch and keyBatch.
	rows func(ids, vs []int64) arrow.RecordBatch
	keys func(ids []int64) arrow.RecordBatch
	// changes builds Apply's batches; nil: no Apply.
	changes func(chs []kvChange) arrow.RecordBatch
}

// kvKind is the kind of a random keyed operation.
type kvKind int

const (
	kvWrite kvKind = iota
	kvUpsert
	kvDelete
	kvApply
)

// kvOp is one operation kvOps drew: its kind, keys and (Write, Upsert) values; for an Apply, the keys it
// upserted or deleted (their last change in the call) and the rows the writer accepted (one per key).
type kvOp struct {
	kind    kvKind
	ids, vs []int64
	changed map[int64]kvKind // Apply: kvUpsert or kvDelete per key
	rows    int64
}

// kvTarget is what kvOps applies operations to: a Writer, or one table of a Router (routedTable).
type kvTarget interface {
	Write(context.Context, arrow.RecordBatch) error
	Upsert(context.Context, arrow.RecordBatch) error
	Delete(context.Context, arrow.RecordBatch) error
	Apply(context.Context, arrow.RecordBatch) error
}

// apply draws one operation and applies it to w and to model, failing the test on an error; it returns the
// operation.
func (o *kvOps) apply(t *testing.T, ctx context.Context, w kvTarget, model kvModel) kvOp {
	t.Helper()
	if o.changes != nil && o.rng.IntN(4) == 0 {
		chs := o.randomChanges(1 + o.rng.IntN(2*o.maxRows))
		rec := o.changes(chs)
		err := w.Apply(ctx, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		changed, _ := model.applyChanges(chs, nil)
		return kvOp{kind: kvApply, changed: changed, rows: int64(len(changed))}
	}
	n := 1 + o.rng.IntN(o.maxRows)
	op := kvOp{ids: make([]int64, n), vs: make([]int64, n), rows: int64(n)}
	for i := range op.ids {
		op.ids[i] = o.rng.Int64N(o.keySpace)
		o.next++
		op.vs[i] = o.next
	}
	rows, keys := o.rows, o.keys
	if rows == nil {
		rows = kvBatch
	}
	if keys == nil {
		keys = keyBatch
	}
	var rec arrow.RecordBatch
	var call func(context.Context, arrow.RecordBatch) error
	switch k := o.rng.IntN(10); {
	case k < o.writes:
		op.kind, rec, call = kvWrite, rows(op.ids, op.vs), w.Write
		for i := range op.ids {
			model.insert(op.ids[i], op.vs[i])
		}
	case k < 8:
		op.kind, rec, call = kvUpsert, rows(op.ids, op.vs), w.Upsert
		for i := range op.ids {
			model.upsert(op.ids[i], op.vs[i])
		}
	default:
		op.kind, rec, call = kvDelete, keys(op.ids), w.Delete
		for i := range op.ids {
			model.del(op.ids[i])
		}
	}
	err := call(ctx, rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	return op
}
