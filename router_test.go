package iceberg_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/atomicread"
	"github.com/icewriter/iceberg/internal/seed"
)

// routedTable is one table of a Router as a kvTarget, for the keyed model's random operations.
type routedTable struct {
	r     *iceberg.Router
	ident table.Identifier
}

func (t routedTable) Write(ctx context.Context, rec arrow.RecordBatch) error {
	return t.r.Write(ctx, t.ident, rec)
}

func (t routedTable) Upsert(ctx context.Context, rec arrow.RecordBatch) error {
	return t.r.Upsert(ctx, t.ident, rec)
}

func (t routedTable) Delete(ctx context.Context, rec arrow.RecordBatch) error {
	return t.r.Delete(ctx, t.ident, rec)
}

func (t routedTable) Apply(ctx context.Context, rec arrow.RecordBatch) error {
	return t.r.Apply(ctx, t.ident, rec)
}

// keyedTables is the table config of the router tests: every table but the events has key id; kv_part is
// partitioned too.
func keyedTables(_ context.Context, ident table.Identifier, _ *arrow.Schema) (iceberg.TableConfig, error) {
	switch ident[len(ident)-1] {
	case "events":
		return iceberg.TableConfig{}, nil
	case "kv_part":
		return iceberg.TableConfig{Create: []iceberg.CreateOption{iceberg.IdentifierFields("id"), iceberg.PartitionBy("bucket(4, id)")}}, nil
	}
	return iceberg.TableConfig{Create: []iceberg.CreateOption{iceberg.IdentifierFields("id")}}, nil
}

// TestRouterTablesMatchModel routes random writes, upserts, deletes and Apply calls over five tables (one that
// exists, four the router creates: by Write, Upsert, Apply, and a partitioned one), plus seed events whose
// schema gains a column halfway, under a memory budget far smaller than the rows, with buffers sealed only by
// the budget (no row, byte or interval policy trips): a table waiting for room must seal the others'. Every
// table read back with iceberg-go's scanner holds what the sequential model predicts, the shared budget is never
// exceeded by more than one record, and the per-table stats add up.
func TestRouterTablesMatchModel(t *testing.T) {
	t.Parallel() // a long test that mostly waits: see TestMain
	// A deadlock fails, not hangs.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cat := openCatalog(t)
	existing := table.Identifier{"db", "kv_open"}
	createTable(t, ctx, cat, existing, kvSchema, iceberg.IdentifierFields("id"))
	// The calls, the event rows after which the schema evolves, and the budget: half of each by default.
	calls, evolveAt := iceberg.SoakForTest(t, 160, 300), int64(iceberg.SoakForTest(t, 240, 750))
	budget := int64(iceberg.SoakForTest(t, 64<<10, 128<<10))
	r, err := iceberg.NewRouter(cat,
		iceberg.WithWriterOptions(iceberg.WithMemoryLimit(budget), iceberg.WithFlushRows(1<<30),
			iceberg.WithFlushBytes(1<<40), iceberg.WithFlushInterval(0), iceberg.WithSchemaEvolution()),
		iceberg.WithTableConfig(keyedTables))
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"kv_open", "kv_write", "kv_upsert", "kv_apply", "kv_part"}
	models := map[string]kvModel{}
	rng := rand.New(rand.NewPCG(runSeed(t), 1))
	ops := &kvOps{rng: rng, keySpace: 400, maxRows: 30, writes: 3,
		changes: func(chs []kvChange) arrow.RecordBatch { return changeBatch(chs, changeColumns{}) }}
	first := map[string]func(routedTable) kvOp{
		// The tables the router creates: each by its kind of call.
		"kv_write":  func(tt routedTable) kvOp { return firstCall(t, ctx, ops, tt, models["kv_write"], kvWrite) },
		"kv_upsert": func(tt routedTable) kvOp { return firstCall(t, ctx, ops, tt, models["kv_upsert"], kvUpsert) },
		"kv_part":   func(tt routedTable) kvOp { return firstCall(t, ctx, ops, tt, models["kv_part"], kvWrite) },
		"kv_apply":  func(tt routedTable) kvOp { return firstCall(t, ctx, ops, tt, models["kv_apply"], kvApply) },
	}
	for _, n := range names {
		models[n] = kvModel{}
	}
	events := table.Identifier{"db", "events"}
	g := seed.New(0, 3)
	var eventIDs int64
	var maxRecord int64
	check := func() {
		st := r.Stats()
		if st.MemoryUsed > st.MemoryBudget+maxRecord {
			t.Fatalf("shared memory %d bytes, budget %d plus one record of at most %d", st.MemoryUsed, st.MemoryBudget, maxRecord)
		}
	}
	started := map[string]bool{}
	// 160 calls: about 20 event batches (1,200 rows, the schema evolving after the fourth) and some 28 calls
	// per kv table, several times the 64 KiB budget in all. ICEWRITER_SOAK=1: 300 calls, about 37 event batches
	// (2,200 rows, the schema evolving after the first third) and some 50 calls per kv table, several times the
	// 128 KiB budget. The seed is new every run.
	for i := 0; i < calls; i++ {
		if rng.IntN(8) == 0 {
			rec := eventBatch(g, 60, eventIDs >= evolveAt)
			maxRecord = max(maxRecord, recordBytes(rec))
			eventIDs += rec.NumRows()
			err := r.Write(ctx, events, rec)
			rec.Release()
			if err != nil {
				t.Fatal(err)
			}
			check()
			continue
		}
		n := names[rng.IntN(len(names))]
		tt := routedTable{r, table.Identifier{"db", n}}
		if f, ok := first[n]; ok && !started[n] {
			f(tt)
		} else {
			ops.apply(t, ctx, tt, models[n])
		}
		started[n] = true
		maxRecord = max(maxRecord, 64<<10) // a kv record is well under it
		check()
		if rng.IntN(50) == 0 {
			if err := r.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		compareKV(t, readKV(t, cat, table.Identifier{"db", n}), models[n])
	}
	counts, rows := readRows(t, cat, events)
	assertIDs(t, counts, 0, eventIDs)
	if rows[eventIDs-1]["extra"] != eventIDs-1 || rows[0]["extra"] != nil {
		t.Fatalf("evolved column: first row %v, last row %v", rows[0]["extra"], rows[eventIDs-1]["extra"])
	}
	st := r.Stats()
	if len(st.Tables) != len(names)+1 {
		t.Fatalf("stats of %d tables, want %d", len(st.Tables), len(names)+1)
	}
	var sum int64
	for _, ts := range st.Tables {
		if ts.Stats.Commits == 0 {
			t.Fatalf("table %v: no commit in its stats", ts.Table)
		}
		sum += ts.Stats.RowsAccepted
	}
	if sum != st.Total.RowsAccepted || st.Total.RowsAccepted < eventIDs {
		t.Fatalf("total rows accepted %d, the tables' sum %d", st.Total.RowsAccepted, sum)
	}
	if st.MemoryUsed != 0 {
		t.Fatalf("closed router holds %d bytes", st.MemoryUsed)
	}
}

// firstCall makes the call that creates a table of the model test: a Write, an Upsert or an Apply of fresh keys.
func firstCall(t *testing.T, ctx context.Context, ops *kvOps, tt routedTable, m kvModel, kind kvKind) kvOp {
	t.Helper()
	ids := []int64{ops.rng.Int64N(ops.keySpace), ops.rng.Int64N(ops.keySpace)}
	ops.next += 2
	vs := []int64{ops.next - 1, ops.next}
	var err error
	switch kind {
	case kvApply:
		chs := []kvChange{{op: "c", id: ids[0], v: vs[0], before: -1}, {op: "u", id: ids[1], v: vs[1], before: -1}}
		rec := changeBatch(chs, changeColumns{})
		err = tt.Apply(ctx, rec)
		rec.Release()
		m.applyChanges(chs, nil)
	case kvUpsert:
		rec := kvBatch(ids, vs)
		err = tt.Upsert(ctx, rec)
		rec.Release()
		m.upsert(ids[0], vs[0])
		m.upsert(ids[1], vs[1])
	default:
		rec := kvBatch(ids, vs)
		err = tt.Write(ctx, rec)
		rec.Release()
		m.insert(ids[0], vs[0])
		m.insert(ids[1], vs[1])
	}
	if err != nil {
		t.Fatal(err)
	}
	return kvOp{kind: kind, ids: ids, vs: vs}
}

// eventBatch is n seed events, with a column extra (= id) when evolved.
func eventBatch(g *seed.Generator, n int, evolved bool) arrow.RecordBatch {
	rec := g.Batch(n)
	if !evolved {
		return rec
	}
	defer rec.Release()
	b := array.NewInt64Builder(memory.NewGoAllocator())
	defer b.Release()
	ids := rec.Column(0).(*array.Int64)
	for i := 0; i < ids.Len(); i++ {
		b.Append(ids.Value(i))
	}
	extra := b.NewArray()
	defer extra.Release()
	fields := append(rec.Schema().Fields(), arrow.Field{Name: "extra", Type: arrow.PrimitiveTypes.Int64, Nullable: true})
	cols := append(rec.Columns(), extra)
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, rec.NumRows())
}

// recordBytes is the Arrow size of a record, what the memory limit counts.
func recordBytes(rec arrow.RecordBatch) int64 {
	var n int64
	for _, c := range rec.Columns() {
		for _, b := range c.Data().Buffers() {
			if b != nil {
				n += int64(b.Len())
			}
		}
	}
	return n
}

// TestRouterBudgetSealsIdleTables fills the shared budget with one table's open buffer and then writes into
// another: without a row, byte or interval policy, the first table's buffer is sealed by the second table's
// wait for room (nothing else would ever seal it), and both tables get all their rows.
func TestRouterBudgetSealsIdleTables(t *testing.T) {
	t.Parallel() // see TestMain
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cat := openCatalog(t)
	r, err := iceberg.NewRouter(cat, iceberg.WithWriterOptions(iceberg.WithMemoryLimit(1<<20),
		iceberg.WithFlushRows(1<<30), iceberg.WithFlushBytes(1<<40), iceberg.WithFlushInterval(0)))
	if err != nil {
		t.Fatal(err)
	}
	a, b := table.Identifier{"db", "a"}, table.Identifier{"db", "b"}
	g := seed.New(0, 1)
	rec := g.Batch(1500) // ~220 KB: most of the 256 KiB budget
	if err := r.Write(ctx, a, rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	for i := 0; i < 10; i++ {
		rec := g.Batch(500)
		if err := r.Write(ctx, b, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	st := r.Stats()
	if st.Tables[0].Stats.Batches == 0 {
		t.Fatalf("table a's buffer was never sealed: %+v", st.Tables[0].Stats)
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	ca, _ := readRows(t, cat, a)
	cb, _ := readRows(t, cat, b)
	assertIDs(t, ca, 0, 1500)
	assertIDs(t, cb, 1500, 6500)
}

// TestRouterDeleteNeverCreates: a Delete on a missing table is an error wrapping catalog.ErrNoSuchTable and
// creates nothing; NoCreate makes a Write fail the same way; a config error names the table and fails the call.
func TestRouterDeleteNeverCreates(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	r, err := iceberg.NewRouter(cat, iceberg.WithTableConfig(
		func(_ context.Context, ident table.Identifier, _ *arrow.Schema) (iceberg.TableConfig, error) {
			switch ident[1] {
			case "bad":
				return iceberg.TableConfig{}, errors.New("no route")
			case "fixed":
				return iceberg.TableConfig{NoCreate: true}, nil
			}
			return iceberg.TableConfig{}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	keys := keyBatch([]int64{1})
	defer keys.Release()
	if err := r.Delete(ctx, table.Identifier{"db", "gone"}, keys); !errors.Is(err, icecatalog.ErrNoSuchTable) {
		t.Fatalf("Delete on a missing table: %v", err)
	}
	rows := kvBatch([]int64{1}, []int64{1})
	defer rows.Release()
	if err := r.Write(ctx, table.Identifier{"db", "fixed"}, rows); !errors.Is(err, icecatalog.ErrNoSuchTable) {
		t.Fatalf("Write with NoCreate: %v", err)
	}
	if err := r.Write(ctx, table.Identifier{"db", "bad"}, rows); err == nil ||
		!strings.Contains(err.Error(), "[db bad]") || !strings.Contains(err.Error(), "no route") {
		t.Fatalf("config error: %v", err)
	}
	if _, err := cat.LoadTable(ctx, table.Identifier{"db", "gone"}); !errors.Is(err, icecatalog.ErrNoSuchTable) {
		t.Fatalf("the Delete created the table: %v", err)
	}
	if len(r.Tables()) != 0 {
		t.Fatalf("tables open after failed opens: %v", r.Tables())
	}
}

// TestRouterSourceResumeExactlyOnce: one source partition routes rows to two tables, whose commits land at
// different moments (WithPerTableCommits: what a catalog without multi-table commits gives). Offsets 1..100 go to table a; 101..200 alternate between a and b (b sees the partition for
// the first time at 102, after the checkpoint at 100), checkpointed at 200; only a commits before the process
// dies. The restarted router resumes after the lowest position (b's 100, committed when b first saw the
// partition: without it b would have no position and the resume would start after 200, losing b's rows), and
// the replay skips what each table holds. Each table then holds each of its rows exactly once.
func TestRouterSourceResumeExactlyOnce(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := openCatalog(t)
	a, b := table.Identifier{"db", "a"}, table.Identifier{"db", "b"}
	open := func() *iceberg.Router {
		r, err := iceberg.NewRouter(cat, iceberg.WithPerTableCommits(),
			iceberg.WithWriterOptions(iceberg.WithWriterID("sink"), iceberg.WithCheckpoints(), iceberg.WithFlushInterval(0)))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	route := func(off int64) table.Identifier {
		if off <= 100 || off%2 == 1 {
			return a
		}
		return b
	}
	write := func(r *iceberg.Router, skip func(table.Identifier, string) bool, from, to int64) {
		src := r.Source("orders/0")
		for off := from; off <= to; off++ {
			ident := route(off)
			if skip != nil && skip(ident, strconv.FormatInt(off, 10)) {
				continue
			}
			rec := kvBatch([]int64{off}, []int64{off})
			err := src.Write(ctx, ident, rec)
			rec.Release()
			if err != nil {
				t.Fatal(err)
			}
			if off%50 == 0 {
				if err := src.Checkpoint(ctx, strconv.FormatInt(off, 10)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	r := open()
	write(r, nil, 1, 100)
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	write(r, nil, 101, 200)
	wa, _ := r.Writer(a)
	if err := wa.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Abort(ctx); err != nil { // the process dies: b's rows after its first position are lost
		t.Fatal(err)
	}

	r = open()
	if err := r.Open(ctx, a, b); err != nil {
		t.Fatal(err)
	}
	rp, err := r.Source("orders/0").Resume(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rp.FromStart || rp.Position != "100" || rp.Tables["db.a"] != "200" || rp.Tables["db.b"] != "100" {
		t.Fatalf("resume point %+v, want after 100 (a at 200, b at 100)", rp)
	}
	from, _ := strconv.ParseInt(rp.Position, 10, 64)
	write(r, rp.Covered, from+1, 250)
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, ident := range []table.Identifier{a, b} {
		got := readKV(t, cat, ident)
		want := kvModel{}
		for off := int64(1); off <= 250; off++ {
			if slices.Equal(route(off), ident) {
				want.insert(off, off)
			}
		}
		compareKV(t, got, want)
	}
}

// TestRouterWriteWaitingForCommitAsksForRound: a router's writers commit only in rounds, which run every flush
// interval (here an hour). A call that finds its writer's uncommitted batches at their cap waits for a commit,
// so it asks for a round instead of waiting for the tick: twenty calls, each sealing a batch with a cap of one
// uncommitted batch, end long before the next tick and commit every row.
func TestRouterWriteWaitingForCommitAsksForRound(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // waiting for the tick fails, not hangs
	defer cancel()
	cat := openCatalog(t)
	ident := table.Identifier{"db", "capped"}
	r, err := iceberg.NewRouter(cat, iceberg.WithWriterOptions(iceberg.WithFlushInterval(time.Hour),
		iceberg.WithFlushRows(2), iceberg.WithMaxUncommitted(1)))
	if err != nil {
		t.Fatal(err)
	}
	const calls = 20
	for i := int64(0); i < calls; i++ {
		rec := kvBatch([]int64{2 * i, 2*i + 1}, []int64{i, i})
		err := r.Write(ctx, ident, rec)
		rec.Release()
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	st := r.Stats()
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if st.Total.Commits < calls/2 {
		t.Fatalf("%d commits for %d calls at a cap of one uncommitted batch", st.Total.Commits, calls)
	}
	counts, _ := readRows(t, cat, ident)
	assertIDs(t, counts, 0, 2*calls)
}

// TestRouterRoundsAreAtomic writes one row per table into three tables per step, each step ended by a router
// checkpoint, while commit rounds run every few milliseconds and on a Flush every ten steps, after which the test
// waits for a read. A reader loads the tables one after
// the other, in both orders, all along: a table loaded later never holds fewer steps than one loaded before it,
// which a commit that landed in one table before another would break. The tables end with every row; the
// rounds went out as multi-table commits (the embedded SQLite catalog commits them in one database
// transaction).
func TestRouterRoundsAreAtomic(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := openCatalog(t)
	idents := []table.Identifier{{"db", "a"}, {"db", "b"}, {"db", "c"}}
	r, err := iceberg.NewRouter(cat, iceberg.WithWriterOptions(iceberg.WithWriterID("sink"), iceberg.WithCheckpoints(),
		iceberg.WithFlushInterval(5*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	// Six Flush rounds the reader reads between, and the timed rounds around them.
	const steps = 60
	for _, ident := range idents { // open them before the reader starts
		rec := kvBatch([]int64{0}, []int64{0})
		if err := r.Write(ctx, ident, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	if err := r.Checkpoint(ctx, "0"); err != nil {
		t.Fatal(err)
	}
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	reader := atomicread.Start(ctx, cat, idents)
	for k := int64(1); k <= steps; k++ {
		for _, ident := range idents {
			rec := kvBatch([]int64{k}, []int64{k})
			if err := r.Write(ctx, ident, rec); err != nil {
				t.Fatal(err)
			}
			rec.Release()
		}
		if err := r.Checkpoint(ctx, strconv.FormatInt(k, 10)); err != nil {
			t.Fatal(err)
		}
		if k%10 == 0 {
			if err := r.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			reader.Between(t)
		}
	}
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	_, seen := reader.Stop(t)
	st := r.Stats()
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if !st.AtomicCommits || st.MultiTableCommits < 2 {
		t.Fatalf("atomic %v, %d multi-table commits", st.AtomicCommits, st.MultiTableCommits)
	}
	if seen < steps/10 {
		t.Fatalf("the reader saw only %d distinct row counts: it never read between commits", seen)
	}
	for _, ident := range idents {
		counts, _ := readRows(t, cat, ident)
		assertIDs(t, counts, 0, steps+1)
	}
	t.Logf("%d multi-table commits; the reader saw %d distinct row counts", st.MultiTableCommits, seen)
}
