package iceberg_test

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/catalog"
	"github.com/icewriter/iceberg/internal/seed"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// The fixtures the tests of several subjects share: catalogs and tables, batches, the sequential model of keyed
// writes and its random operations, and reading a table back with iceberg-go's scanner. Fakes that inject
// faults live in slowcatalog_test.go.

// TestMain keeps the writers' Info lines (one per commit) out of the output of tests and benchmarks; the tests
// of what is logged give their writers loggers of their own.
//
// Parallel tests: every test over a few seconds calls t.Parallel(), unless it sets a package hook (resolveHash,
// changeHash, testHook*, HoldRewritesForTest), measures memory or time, or stalls storage. Go runs the parallel
// ones only after every other test of the package has ended, two at a time (GOMAXPROCS), so they never overlap
// the tests that do; on two cores this lets one test's waits on commits overlap another's encoding.
func TestMain(m *testing.M) {
	slog.SetLogLoggerLevel(slog.LevelWarn)
	os.Exit(m.Run())
}

// Seeds of the random tests.

// seedFlag pins the seed of the random tests that draw one per run (runSeed).
var seedFlag = flag.Uint64("seed", 0, "random tests (runSeed): the seed to use (0: a new one each run, logged)")

// runSeed returns the seed of a random test: -seed when given, else one drawn for this run, so that runs cover
// different operation sequences where a fixed seed would repeat one. It logs the seed, and on failure how to
// rerun with it. Only tests whose assertions hold for every seed use it.
func runSeed(t testing.TB) uint64 {
	t.Helper()
	s := *seedFlag
	if s == 0 {
		s = rand.Uint64()
	}
	t.Logf("seed %d", s)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("rerun with go test -run '^%s$' -seed=%d", t.Name(), s)
		}
	})
	return s
}

// Catalogs and tables.

// openCatalog opens a fresh embedded catalog in a temporary folder.
func openCatalog(t testing.TB) icecatalog.Catalog {
	t.Helper()
	return openCatalogAt(t, filepath.Join(t.TempDir(), "catalog.db"))
}

// openCatalogAt opens the embedded catalog whose database is at path.
func openCatalogAt(t testing.TB, path string) icecatalog.Catalog {
	t.Helper()
	cat, err := catalog.Open(context.Background(), "sqlite://"+path)
	if err != nil {
		t.Fatalf("open catalog: %v", err)
	}
	t.Cleanup(func() {
		if c, ok := cat.(icecatalog.Closer); ok {
			_ = c.Close()
		}
	})
	return cat
}

// createTable creates the table at ident (a writer that creates it and closes at once).
func createTable(t testing.TB, ctx context.Context, cat icecatalog.Catalog, ident table.Identifier, schema *arrow.Schema, create ...iceberg.CreateOption) {
	t.Helper()
	setup, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(schema, create...))
	if err != nil {
		t.Fatal(err)
	}
	_ = setup.Close(ctx)
}

// cowTable writes m files of perFile rows each (one batch, one file) with ids 0..m*perFile-1, sorted or
// shuffled across files, and returns the writer (copy-on-write mode) and which file index holds each id.
func cowTable(t testing.TB, ctx context.Context, m, perFile int, shuffled bool, opts ...iceberg.Option) (*iceberg.Writer, map[int64]int, *slowCatalog, table.Identifier) {
	cat := &slowCatalog{Catalog: openCatalog(t)}
	ident := table.Identifier{"cow", "t"}
	ids := make([]int64, m*perFile)
	for i := range ids {
		ids[i] = int64(i)
	}
	if shuffled {
		rng := rand.New(rand.NewPCG(9, 9))
		rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	}
	w, err := iceberg.NewWriter(ctx, cat, ident, append([]iceberg.Option{
		iceberg.WithCreate(kvSchema, iceberg.IdentifierFields("id")), iceberg.WithMode(iceberg.CopyOnWrite),
		iceberg.WithFlushRows(perFile), iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompactionEvery(0)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	holder := map[int64]int{}
	for f := 0; f < m; f++ {
		chunk := ids[f*perFile : (f+1)*perFile]
		vs := make([]int64, len(chunk))
		for i, id := range chunk {
			holder[id] = f
			vs[i] = id
		}
		if err := w.Write(ctx, kvBatch(chunk, vs)); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return w, holder, cat, ident
}

// waitStaged waits until w has written at least files data files and every sealed batch is staged for a
// commit (10 s at most), on the writer's own state changes.
func waitStaged(t *testing.T, w *iceberg.Writer, files int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	staged := func() bool { return w.Stats().FilesWritten >= files && iceberg.Staged(w) }
	if err := iceberg.WaitFor(ctx, w, staged); err != nil {
		t.Fatalf("%d data files not staged within 10 s: %+v", files, w.Stats())
	}
}

// takeOver opens a writer with the ID of a running one, which fences that one (NewWriter bumps the ID's epoch),
// and closes it when the test ends.
func takeOver(t testing.TB, ctx context.Context, cat icecatalog.Catalog, ident table.Identifier, id string) *iceberg.Writer {
	t.Helper()
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithWriterID(id), iceberg.WithFlushInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close(ctx) })
	return w
}

// metadataFile is the metadata file the catalog has for the table: it changes with every commit, so equal
// files mean that no commit happened in between.
func metadataFile(t testing.TB, cat icecatalog.Catalog, ident table.Identifier) string {
	t.Helper()
	tbl, err := cat.LoadTable(context.Background(), ident)
	if err != nil {
		t.Fatal(err)
	}
	return tbl.MetadataLocation()
}

// rollbackTo rolls the table's main branch back to the snapshot, as an operator would.
func rollbackTo(t testing.TB, cat icecatalog.Catalog, ident table.Identifier, snapshotID int64) {
	t.Helper()
	ctx := context.Background()
	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	tx := tbl.NewTransaction()
	if err := tx.RollbackToSnapshot(snapshotID); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// localDir is the local folder of a file:// location (tables of the embedded catalog).
func localDir(t testing.TB, location string) string {
	t.Helper()
	u, err := url.Parse(location)
	if err != nil || u.Scheme != "file" {
		t.Fatalf("not a local location: %q", location)
	}
	return u.Path
}

// positionFiles lists the side files of source positions in the table's metadata folder (local tables), sorted.
func positionFiles(t testing.TB, cat icecatalog.Catalog, ident table.Identifier) []string {
	t.Helper()
	tbl, err := cat.LoadTable(context.Background(), ident)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(localDir(t, tbl.Location()), "metadata")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "icewriter-positions-") {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

// logRecords collects the records of a logger (WithLogger(slog.New(l))) for a test to look through.
type logRecords struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecords) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecords) WithGroup(string) slog.Handler            { return l }
func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r.Clone())
	return nil
}

// errs returns the errors logged with message msg (attribute "err").
func (l *logRecords) errs(msg string) []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []error
	for _, r := range l.recs {
		if r.Message != msg {
			continue
		}
		r.Attrs(func(a slog.Attr) bool {
			if err, ok := a.Value.Any().(error); ok && a.Key == "err" {
				out = append(out, err)
			}
			return true
		})
	}
	return out
}

// The seed events (internal/seed): append-only tables.

// writeSeed writes the generator's next n rows.
func writeSeed(t *testing.T, w *iceberg.Writer, g *seed.Generator, n int) {
	t.Helper()
	rec := g.Batch(n)
	defer rec.Release()
	if err := w.Write(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
}

// commitSeed makes commits commits of the generator's next rows rows each (Write, then Flush).
func commitSeed(t *testing.T, w *iceberg.Writer, g *seed.Generator, commits, rows int) {
	t.Helper()
	for i := 0; i < commits; i++ {
		writeSeed(t, w, g, rows)
		if err := w.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// seedCommit writes the generator's next rows rows and flushes them: one commit. It returns the error, so that
// writers on goroutines of their own can call it.
func seedCommit(ctx context.Context, w *iceberg.Writer, g *seed.Generator, rows int) error {
	rec := g.Batch(rows)
	err := w.Write(ctx, rec)
	rec.Release()
	if err != nil {
		return err
	}
	return w.Flush(ctx)
}

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

// readRows scans the table with iceberg-go's scanner and returns, per id, how many rows carry it, plus each
// id's row as a map of column values (the last one seen).
func readRows(t testing.TB, cat icecatalog.Catalog, ident table.Identifier) (map[int64]int, map[int64]map[string]any) {
	t.Helper()
	ctx := context.Background()
	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		t.Fatalf("load table: %v", err)
	}
	counts := map[int64]int{}
	rows := map[int64]map[string]any{}
	if tbl.CurrentSnapshot() == nil {
		return counts, rows
	}
	sc, it, err := tbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	idIdx := sc.FieldIndices("id")[0]
	for rec, err := range it {
		if err != nil {
			t.Fatalf("scan: %v", err)
		}
		ids := rec.Column(idIdx).(*array.Int64)
		for r := 0; r < int(rec.NumRows()); r++ {
			id := ids.Value(r)
			counts[id]++
			row := map[string]any{}
			for c, f := range sc.Fields() {
				row[f.Name] = cellValue(rec.Column(c), r)
			}
			rows[id] = row
		}
		rec.Release()
	}
	return counts, rows
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

// cellValue is row r of a as the Go value readRows and the models compare (timestamps as int64).
func cellValue(a arrow.Array, r int) any {
	if a.IsNull(r) {
		return nil
	}
	switch c := a.(type) {
	case *array.Int64:
		return c.Value(r)
	case *array.Int32:
		return int64(c.Value(r))
	case *array.Float64:
		return c.Value(r)
	case *array.String:
		return c.Value(r)
	case *array.LargeString:
		return c.Value(r)
	case *array.Timestamp:
		return int64(c.Value(r))
	case *array.Boolean:
		return c.Value(r)
	}
	return a.ValueStr(r)
}

// Keyed kv tables and their sequential model.

// kvSchema is the keyed tables' schema: a key, a value, and a string derived from both (readKV checks it).
var kvSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// kvBatch makes kvSchema rows (ids[i], vs[i]).
func kvBatch(ids, vs []int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.NewGoAllocator(), kvSchema)
	defer b.Release()
	for i := range ids {
		b.Field(0).(*array.Int64Builder).Append(ids[i])
		b.Field(1).(*array.Int64Builder).Append(vs[i])
		b.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("row-%d-%d", ids[i], vs[i]))
	}
	return b.NewRecordBatch()
}

// keyBatch makes a batch of keys only, for Delete.
func keyBatch(ids []int64) arrow.RecordBatch {
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewRecordBuilder(memory.NewGoAllocator(), sc)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues(ids, nil)
	return b.NewRecordBatch()
}

// liveDataFiles loads the table and plans its current snapshot: one task per live data file.
func liveDataFiles(t testing.TB, cat icecatalog.Catalog, ident table.Identifier) (*table.Table, []table.FileScanTask) {
	t.Helper()
	ctx := context.Background()
	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return tbl, tasks
}

// holdFirstPass holds the writer's first background compaction pass after it wrote its files, before it takes
// the commit queue: held is closed once it waits, letGo releases it (later passes run through). Defer letGo
// after the writer's Close, so that a failed test does not leave Close waiting for the held pass.
func holdFirstPass(t *testing.T) (held <-chan struct{}, letGo func()) {
	h, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	t.Cleanup(iceberg.HoldRewritesForTest(func() {
		select {
		case <-h:
			return
		default:
		}
		close(h)
		<-release
	}))
	return h, func() { once.Do(func() { close(release) }) }
}

// hasPositionDeletes reports whether any planned data file has a deletion vector or position delete files.
func hasPositionDeletes(tasks []table.FileScanTask) bool {
	for _, t := range tasks {
		if len(t.DeleteFiles)+len(t.DeletionVectorFiles) > 0 {
			return true
		}
	}
	return false
}

// readKV returns, per id, the sorted v values of its rows.
func readKV(t *testing.T, cat icecatalog.Catalog, ident table.Identifier) map[int64][]int64 {
	t.Helper()
	ctx := context.Background()
	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64][]int64{}
	if tbl.CurrentSnapshot() == nil {
		return out
	}
	sc, it, err := tbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	iid, iv, is := sc.FieldIndices("id")[0], sc.FieldIndices("v")[0], sc.FieldIndices("s")[0]
	for rec, err := range it {
		if err != nil {
			t.Fatal(err)
		}
		ids, vs, ss := rec.Column(iid).(*array.Int64), rec.Column(iv).(*array.Int64), rec.Column(is).(*array.String)
		for r := 0; r < int(rec.NumRows()); r++ {
			if want := fmt.Sprintf("row-%d-%d", ids.Value(r), vs.Value(r)); ss.Value(r) != want {
				t.Fatalf("row %d: s=%q, want %q", ids.Value(r), ss.Value(r), want)
			}
			out[ids.Value(r)] = append(out[ids.Value(r)], vs.Value(r))
		}
		rec.Release()
	}
	for k := range out {
		slices.Sort(out[k])
	}
	return out
}

// kvModel is the sequential model: Write inserts, Upsert replaces every row of the key, Delete removes them.
type kvModel map[int64][]int64

func (m kvModel) insert(id, v int64) { m[id] = append(m[id], v) }
func (m kvModel) upsert(id, v int64) { m[id] = []int64{v} }
func (m kvModel) del(id int64)       { delete(m, id) }

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

// apply draws one operation and applies it to w and to model, failing the test on an error; it returns the
// operation.
// kvTarget is what kvOps applies operations to: a Writer, or one table of a Router (routedTable).
type kvTarget interface {
	Write(context.Context, arrow.RecordBatch) error
	Upsert(context.Context, arrow.RecordBatch) error
	Delete(context.Context, arrow.RecordBatch) error
	Apply(context.Context, arrow.RecordBatch) error
}

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

// Change streams (Apply).

// kvChange is one row of an Apply batch: its op value, key, value, before-image key and version.
type kvChange struct {
	op     string
	id, v  int64
	before int64 // the before-image key; -1: none
	noKey  bool  // the key columns are null (a Debezium delete: only the before image names the key)
	ver    int64
}

// Op spellings Apply accepts, by what they do.
var (
	upsertOps = []string{"insert", "INSERT", "Insert", "c", "C", "r", "R", "update", "UPDATE", "u", "U"}
	deleteOps = []string{"delete", "DELETE", "d", "D"}
)

// isDeleteOp reports whether an op value kvChange uses deletes.
func isDeleteOp(op string) bool { return slices.Contains(deleteOps, op) }

// randomChanges draws n changes over the key space, values fresh as kvOps gives them: inserts, updates (a
// third of them change the key, a third carry the same key as before image), deletes (a fifth of them with
// only the before image), re-inserts of deleted keys happening by chance. Versions are the values.
func (o *kvOps) randomChanges(n int) []kvChange {
	chs := make([]kvChange, n)
	for i := range chs {
		o.next++
		c := kvChange{id: o.rng.Int64N(o.keySpace), v: o.next, before: -1, ver: o.next}
		switch k := o.rng.IntN(10); {
		case k < 4:
			c.op = upsertOps[o.rng.IntN(7)]
		case k < 7:
			c.op = upsertOps[7+o.rng.IntN(4)]
			switch o.rng.IntN(3) {
			case 0:
				c.before = o.rng.Int64N(o.keySpace)
			case 1:
				c.before = c.id
			}
		default:
			c.op = deleteOps[o.rng.IntN(len(deleteOps))]
			if o.rng.IntN(5) == 0 {
				c.before, c.noKey = c.id, true
			}
		}
		chs[i] = c
	}
	return chs
}

// applyChanges applies changes to the model in order, as Apply does: an upsert op deletes its before-image key
// when that differs, then upserts its key; a delete removes its key (the before image's when it has none).
// With vers (key -> version of its last change, updated here), a change older than its key's is skipped. It
// returns what the changes applied did to each key (its last change) and how many were skipped.
func (m kvModel) applyChanges(chs []kvChange, vers map[int64]int64) (map[int64]kvKind, int) {
	changed := map[int64]kvKind{}
	skipped := 0
	apply := func(id int64, c kvChange, kind kvKind) {
		if vers != nil {
			if v, ok := vers[id]; ok && c.ver < v {
				skipped++
				return
			}
			vers[id] = c.ver
		}
		changed[id] = kind
		if kind == kvDelete {
			m.del(id)
		} else {
			m.upsert(id, c.v)
		}
	}
	for _, c := range chs {
		switch {
		case isDeleteOp(c.op) && c.noKey:
			apply(c.before, c, kvDelete)
		case isDeleteOp(c.op):
			apply(c.id, c, kvDelete)
		default:
			if c.before >= 0 && c.before != c.id {
				apply(c.before, c, kvDelete)
			}
			apply(c.id, c, kvUpsert)
		}
	}
	return changed, skipped
}

// changeColumns are the columns of a change batch beyond the table's (changeBatch).
type changeColumns struct {
	version  string // the version column ("": none)
	beforeTS bool   // ts is part of the key: a ts column and its before image (modelSchema)
	ts       bool   // the table has ts (modelSchema)
}

// changeBatch makes an Apply batch on kvSchema (with ts: modelSchema) tables: op, id, v, s[, ts], before_id[,
// before_ts][, version]. A delete row has null v and s (and a null ts unless ts is part of the key); a
// keyless delete has null key columns.
func changeBatch(chs []kvChange, cc changeColumns) arrow.RecordBatch {
	return changeBatchIn(memory.NewGoAllocator(), chs, cc)
}

// changeBatchIn is changeBatch with its buffers allocated from mem.
func changeBatchIn(mem memory.Allocator, chs []kvChange, cc changeColumns) arrow.RecordBatch {
	tsType := &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	fields := []arrow.Field{
		{Name: "op", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	}
	if cc.ts {
		fields = append(fields, arrow.Field{Name: "ts", Type: tsType, Nullable: true})
	}
	fields = append(fields, arrow.Field{Name: "before_id", Type: arrow.PrimitiveTypes.Int64, Nullable: true})
	if cc.beforeTS {
		fields = append(fields, arrow.Field{Name: "before_ts", Type: tsType, Nullable: true})
	}
	if cc.version != "" {
		fields = append(fields, arrow.Field{Name: cc.version, Type: arrow.PrimitiveTypes.Int64, Nullable: true})
	}
	b := array.NewRecordBuilder(mem, arrow.NewSchema(fields, nil))
	defer b.Release()
	for _, c := range chs {
		f := 0
		next := func() array.Builder { f++; return b.Field(f - 1) }
		del := isDeleteOp(c.op)
		next().(*array.StringBuilder).Append(c.op)
		appendOr := func(bl array.Builder, null bool, add func()) {
			if null {
				bl.AppendNull()
			} else {
				add()
			}
		}
		idB := next().(*array.Int64Builder)
		appendOr(idB, c.noKey, func() { idB.Append(c.id) })
		vB := next().(*array.Int64Builder)
		appendOr(vB, del, func() { vB.Append(c.v) })
		sB := next().(*array.StringBuilder)
		appendOr(sB, del, func() { sB.Append(fmt.Sprintf("row-%d-%d", c.id, c.v)) })
		if cc.ts {
			tsB := next().(*array.TimestampBuilder)
			appendOr(tsB, c.noKey || (del && !cc.beforeTS), func() { tsB.Append(modelTS(c.id)) })
		}
		bB := next().(*array.Int64Builder)
		appendOr(bB, c.before < 0, func() { bB.Append(c.before) })
		if cc.beforeTS {
			btB := next().(*array.TimestampBuilder)
			appendOr(btB, c.before < 0, func() { btB.Append(modelTS(c.before)) })
		}
		if cc.version != "" {
			next().(*array.Int64Builder).Append(c.ver)
		}
	}
	return b.NewRecordBatch()
}

// Row lineage (format version 3).

// lineage is one row's row-lineage pair as the scanner reports it.
type lineage struct{ rowID, seq int64 }

// lineageRow is one row read back with its lineage.
type lineageRow struct {
	id, v int64
	lineage
}

// readLineage scans the table with row lineage and returns every row. It fails on a null _row_id or
// _last_updated_sequence_number (the scanner must resolve both for every row of a v3 table) and on a row whose
// s column does not match its id and v.
func readLineage(t *testing.T, cat icecatalog.Catalog, ident table.Identifier) []lineageRow {
	t.Helper()
	ctx := context.Background()
	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		t.Fatalf("load table: %v", err)
	}
	if tbl.CurrentSnapshot() == nil {
		return nil
	}
	sc, it, err := tbl.Scan(table.WithRowLineage()).ToArrowRecords(ctx)
	if err != nil {
		t.Fatalf("scan with row lineage: %v", err)
	}
	col := func(name string) int { return tabletest.Column(t, sc, name) }
	iid, iv, is, irow, iseq := col("id"), col("v"), col("s"), col("_row_id"), col("_last_updated_sequence_number")
	var out []lineageRow
	for rec, err := range it {
		if err != nil {
			t.Fatalf("scan with row lineage: %v", err)
		}
		ids, vs, ss := rec.Column(iid).(*array.Int64), rec.Column(iv).(*array.Int64), rec.Column(is).(*array.String)
		rowIDs, ok := rec.Column(irow).(*array.Int64)
		if !ok {
			t.Fatalf("_row_id is %s, want int64", rec.Column(irow).DataType())
		}
		seqs, ok := rec.Column(iseq).(*array.Int64)
		if !ok {
			t.Fatalf("_last_updated_sequence_number is %s, want int64", rec.Column(iseq).DataType())
		}
		for r := 0; r < int(rec.NumRows()); r++ {
			id := ids.Value(r)
			if want := fmt.Sprintf("row-%d-%d", id, vs.Value(r)); ss.Value(r) != want {
				t.Fatalf("row %d: s=%q, want %q", id, ss.Value(r), want)
			}
			if rowIDs.IsNull(r) {
				t.Fatalf("row id=%d has a null _row_id", id)
			}
			if seqs.IsNull(r) {
				t.Fatalf("row id=%d has a null _last_updated_sequence_number", id)
			}
			out = append(out, lineageRow{id: id, v: vs.Value(r), lineage: lineage{rowIDs.Value(r), seqs.Value(r)}})
		}
		rec.Release()
	}
	return out
}

// readRowIDs loads the table and reads each id's row with row lineage (its _row_id and v); it fails on a null
// _row_id and on an id held by two rows.
func readRowIDs(t *testing.T, cat tableLoader, ident table.Identifier) map[int64]tabletest.KeyRow {
	t.Helper()
	tbl, err := cat.LoadTable(context.Background(), ident)
	if err != nil {
		t.Fatal(err)
	}
	return tabletest.KeyRows(t, tbl, "v")
}

// Tables of any shape: batches, schemas, reading back.

// buildRecord makes a record of the fields given, filled by fill.
func buildRecord(t *testing.T, fields []arrow.Field, fill func(b *array.RecordBuilder)) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(memory.NewGoAllocator(), arrow.NewSchema(fields, nil))
	defer b.Release()
	fill(b)
	return b.NewRecordBatch()
}

// loadSchema returns the table's current schema.
func loadSchema(t testing.TB, cat icecatalog.Catalog, ident table.Identifier) *ice.Schema {
	t.Helper()
	tbl, err := cat.LoadTable(context.Background(), ident)
	if err != nil {
		t.Fatal(err)
	}
	return tbl.Schema()
}

// fieldOf returns the named field of sc, failing the test when there is none.
func fieldOf(t testing.TB, sc *ice.Schema, name string) ice.NestedField {
	t.Helper()
	f, ok := sc.FindFieldByName(name)
	if !ok {
		t.Fatalf("table has no field %q; schema:\n%s", name, sc)
	}
	return f
}

// readPairs scans the table and returns, per value of the int64 column key, the values of the int64 column val
// in its rows, in scan order.
func readPairs(t *testing.T, cat icecatalog.Catalog, ident table.Identifier, key, val string) map[int64][]int64 {
	t.Helper()
	ctx := context.Background()
	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64][]int64{}
	if tbl.CurrentSnapshot() == nil {
		return out
	}
	sc, it, err := tbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ik, iv := sc.FieldIndices(key)[0], sc.FieldIndices(val)[0]
	for rec, err := range it {
		if err != nil {
			t.Fatal(err)
		}
		ks, vs := rec.Column(ik).(*array.Int64), rec.Column(iv).(*array.Int64)
		for r := 0; r < int(rec.NumRows()); r++ {
			out[ks.Value(r)] = append(out[ks.Value(r)], vs.Value(r))
		}
		rec.Release()
	}
	return out
}

// writeIDs writes rows (id, v=id) for ids 0..n-1 with w, commits them, and adds them to model.
func writeIDs(t *testing.T, ctx context.Context, w *iceberg.Writer, model kvModel, n int) {
	t.Helper()
	writeIDFiles(t, ctx, w, model, 1, n)
}

// writeIDFiles writes rows (id, v=id) for ids 0..files*perFile-1 with w in files commits of perFile rows each
// (a data file each under the default file size), and adds them to model.
func writeIDFiles(t *testing.T, ctx context.Context, w *iceberg.Writer, model kvModel, files, perFile int) {
	t.Helper()
	for f := range files {
		ids := make([]int64, perFile)
		for i := range ids {
			ids[i] = int64(f*perFile + i)
			model.insert(ids[i], ids[i])
		}
		must(t, w.Write(ctx, kvBatch(ids, ids)))
		must(t, w.Flush(ctx))
	}
}

// must fails the test on err.
func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// posFilePathID is the field id of a position delete file's file_path column.
const posFilePathID = 2147483546

// liveDeleteSet describes the live delete files of a table, as iceberg-go's planner assigns them: equality
// delete files, position delete files and deletion vectors (each counted once).
type liveDeleteSet struct {
	eq, pos, dvs int
	unscoped     int              // position delete files scoped to no single data file
	perData      map[string]int   // data file -> live position delete files planned on it
	positions    map[string]int64 // data file -> rows of the largest of its position delete files
}

func liveDeletes(t *testing.T, cat tableLoader, ident table.Identifier) liveDeleteSet {
	t.Helper()
	out := liveDeleteSet{perData: map[string]int{}, positions: map[string]int64{}}
	eq, pos, dvs := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, task := range planTasks(t, cat, ident) {
		for _, f := range task.EqualityDeleteFiles {
			eq[f.FilePath()] = true
		}
		for _, f := range task.DeletionVectorFiles {
			var off int64
			if o := f.ContentOffset(); o != nil {
				off = *o
			}
			dvs[fmt.Sprint(f.FilePath(), "@", off)] = true
		}
		for _, f := range task.DeleteFiles {
			if f.ContentType() != ice.EntryContentPosDeletes {
				continue
			}
			// Format version 2 manifests have no referenced_data_file (iceberg-go writes it on v3 only): a
			// file-scoped position delete says so by file_path bounds with lower = upper, as Java's readers take it.
			path := task.File.FilePath()
			scoped := (f.ReferencedDataFile() != nil && *f.ReferencedDataFile() == path) ||
				(string(f.LowerBoundValues()[posFilePathID]) == path && string(f.UpperBoundValues()[posFilePathID]) == path)
			if !pos[f.FilePath()] && !scoped {
				out.unscoped++
			}
			pos[f.FilePath()] = true
			out.perData[task.File.FilePath()]++
			out.positions[task.File.FilePath()] = max(out.positions[task.File.FilePath()], f.Count())
		}
	}
	out.eq, out.pos, out.dvs = len(eq), len(pos), len(dvs)
	return out
}

// firstDataFile returns the path of the table's live data file of rows rows (the test writes one).
func firstDataFile(t *testing.T, cat tableLoader, ident table.Identifier, rows int64) string {
	t.Helper()
	for _, task := range planTasks(t, cat, ident) {
		if task.File.Count() == rows {
			return task.File.FilePath()
		}
	}
	t.Fatalf("no live data file of %d rows", rows)
	return ""
}

// planTasks plans a scan of the table's current snapshot.
func planTasks(t testing.TB, cat tableLoader, ident table.Identifier) []table.FileScanTask {
	t.Helper()
	tbl, err := cat.LoadTable(context.Background(), ident)
	if err != nil {
		t.Fatal(err)
	}
	return planFiles(t, tbl)
}

// planFiles lists the table's data files.
func planFiles(t testing.TB, tbl *table.Table) []table.FileScanTask {
	t.Helper()
	tasks, err := tbl.Scan().PlanFiles(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return tasks
}

// tableLoader is what the helpers that read a table need of a catalog.
type tableLoader interface {
	LoadTable(context.Context, table.Identifier) (*table.Table, error)
}

// replaceSnapshots counts the table's "replace" snapshots: with compaction and conversion off, a v2 writer's
// removals of its superseded position delete files.
func replaceSnapshots(t *testing.T, cat tableLoader, ident table.Identifier) int {
	t.Helper()
	tbl, err := cat.LoadTable(context.Background(), ident)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range tbl.Metadata().Snapshots() {
		if s.Summary != nil && s.Summary.Operation == table.OpReplace {
			n++
		}
	}
	return n
}

// upsertDeleteRound upserts the keys given plus random ones below span until ups keys (value: base minus the
// key), deletes dels random keys below span that the round did not upsert, flushes, and fails the test when the
// writer's key index went off; model follows.
func upsertDeleteRound(t *testing.T, w *iceberg.Writer, model kvModel, rng *rand.Rand, keys []int64, span int64, ups, dels int, base int64) {
	t.Helper()
	ctx := context.Background()
	seen := map[int64]bool{}
	up := slices.Clone(keys)
	for _, id := range up {
		seen[id] = true
	}
	for len(up) < ups {
		if id := rng.Int64N(span); !seen[id] {
			seen[id] = true
			up = append(up, id)
		}
	}
	vs := make([]int64, len(up))
	for i, id := range up {
		vs[i] = base - id
		model.upsert(id, vs[i])
	}
	must(t, w.Upsert(ctx, kvBatch(up, vs)))
	var del []int64
	for len(del) < dels {
		if id := rng.Int64N(span); !seen[id] {
			seen[id] = true
			del = append(del, id)
			model.del(id)
		}
	}
	must(t, w.Delete(ctx, keyBatch(del)))
	must(t, w.Flush(ctx))
	if st := w.Stats(); st.KeyIndexBytes == 0 {
		t.Fatal("the key index went off")
	}
}

// assertPositionDeletesOnly fails the test unless the table's live deletes are all position deletes from a key
// index: no equality delete file, and position delete files (format version 2) or deletion vectors (3).
func assertPositionDeletesOnly(t *testing.T, cat tableLoader, ident table.Identifier, version int) {
	t.Helper()
	l := liveDeletes(t, cat, ident)
	if l.eq != 0 || (version == 2 && l.pos == 0) || (version == 3 && l.dvs == 0) {
		t.Fatalf("live delete files: %d equality, %d position, %d deletion vectors", l.eq, l.pos, l.dvs)
	}
}

// mergeOnReadV3Writer creates a format-v3 kvSchema table keyed by id and returns a merge-on-read writer on it
// (no flush interval, no small-file compaction) that has committed keys 0..99 with v = id.
func mergeOnReadV3Writer(t *testing.T, ctx context.Context, cat icecatalog.Catalog, ident table.Identifier) *iceberg.Writer {
	t.Helper()
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(kvSchema, iceberg.IdentifierFields("id"),
		iceberg.FormatVersion(3)), iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompactionEvery(0))
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for id := int64(0); id < 100; id++ {
		ids = append(ids, id)
	}
	must(t, w.Write(ctx, kvBatch(ids, ids)))
	must(t, w.Flush(ctx))
	return w
}

// poisonAllocator is a caller's allocator that overwrites memory as it is freed: a writer that read a buffer its
// caller released without holding a reference of its own (Retain) would read the poison. The checked allocator
// under it tells whether every reference was released in the end.
type poisonAllocator struct{ *memory.CheckedAllocator }

func newPoisonAllocator() *poisonAllocator {
	return &poisonAllocator{memory.NewCheckedAllocator(memory.NewGoAllocator())}
}

func (a *poisonAllocator) Free(b []byte) {
	for i := range b {
		b[i] = 0xA5
	}
	a.CheckedAllocator.Free(b)
}

func (a *poisonAllocator) Reallocate(size int, b []byte) []byte {
	out := a.Allocate(size)
	copy(out, b)
	a.Free(b)
	return out
}
