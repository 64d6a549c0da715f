package iceberg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/icewriter/iceberg/internal/pipeline"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/icewriter/iceberg/internal/keyindex"
	"github.com/icewriter/iceberg/internal/keyindex/keyenc"
	"github.com/icewriter/iceberg/internal/tabletest"

	"github.com/icewriter/iceberg/internal/commit"
)

// The key stage driven without a Writer: batches encoded through the stage's hooks as the writer's encoder
// does, runs committed through the default committer, compactions committed with iceberg-go, and the table
// read back against a model after every step.

// stageEnv is an idNameSchema table keyed by id, with what the key stage needs around it.
type stageEnv struct {
	t      *testing.T
	ctx    context.Context
	cat    icecatalog.Catalog
	ident  table.Identifier
	o      options
	tbl    *table.Table
	target *arrow.Schema
	c      *catalogCommitter
	seq    int64
	model  map[int64][]string // the sequential model of the commits so far
	ops    map[*batch]func()  // what each encoded batch does to the model once committed
}

func newStageEnv(t *testing.T, version int, opts ...Option) *stageEnv {
	t.Helper()
	return newStageEnvOn(t, tabletest.TempCatalog(t), version, opts...)
}

// newStageEnvOn is newStageEnv on the catalog cat (e.g. tabletest.CountedCatalog's, to count file reads).
func newStageEnvOn(t *testing.T, cat icecatalog.Catalog, version int, opts ...Option) *stageEnv {
	t.Helper()
	ctx := context.Background()
	o := defaultOptions()
	WithCreate(idNameSchema, IdentifierFields("id"), FormatVersion(version))(&o)
	for _, f := range opts {
		f(&o)
	}
	o.writerID = "key-stage-test"
	o.logger = slog.New(slog.DiscardHandler)
	ident := table.Identifier{"b", "t"}
	tbl, _, err := loadOrCreate(ctx, cat, ident, &o)
	if err != nil {
		t.Fatal(err)
	}
	target, err := table.SchemaToArrowSchema(tbl.Schema(), nil, true, false)
	if err != nil {
		t.Fatal(err)
	}
	return &stageEnv{t: t, ctx: ctx, cat: cat, ident: ident, o: o, tbl: tbl, target: target,
		c: newCatalogCommitter(cat, tbl, o.logger, time.Minute, nil), model: map[int64][]string{}, ops: map[*batch]func(){}}
}

// stage opens a key stage on the table as it is now (cow: copy-on-write mode).
func (e *stageEnv) stage(cow bool) *keyStage {
	e.t.Helper()
	k, err := newKeyStage(e.tbl, e.target, &e.o, cow)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := k.load(e.ctx, e.tbl); err != nil {
		e.t.Fatal(err)
	}
	return k
}

// encode makes a sealed batch of one operation and encodes it as the writer's encoder does: resolve, route the
// keys (stageDeletes), write the data files (on format version 3 with the _row_id column: encodeRowIDs), read
// their keys back while the index is on. The model follows at commit.
func (e *stageEnv) encode(k *keyStage, kind opKind, ids []int64, name string) *batch {
	e.t.Helper()
	e.seq++
	rows := namedRows(ids, name)
	defer rows.Release()
	var rec arrow.RecordBatch
	if kind == opDelete {
		rec = array.NewRecordBatch(k.spec.schema, []arrow.Array{rows.Column(0)}, rows.NumRows())
	} else {
		rec = array.NewRecordBatch(e.target, rows.Columns(), rows.NumRows())
	}
	b := &batch{}
	b.Seq, b.Rows = e.seq, rec.NumRows()
	b.In = pipeline.Rows{Recs: []arrow.RecordBatch{rec}, Kinds: []opKind{kind}, Keyed: kind != opInsert, Schema: e.target}
	indexed := k.indexed()
	res, err := k.resolve(e.ctx, b, memory.DefaultAllocator)
	if err != nil {
		e.t.Fatal(err)
	}
	rec.Release()
	b.In.Recs = res.data
	if b.enc.deletes, err = k.stageDeletes(e.ctx, e.tbl, b, res.deletes, indexed); err != nil {
		e.t.Fatal(err)
	}
	schema := e.target
	if indexed {
		if schema, err = k.encodeRowIDs(e.tbl, schema, b, res); err != nil {
			e.t.Fatal(err)
		}
	}
	recs := func(yield func(arrow.RecordBatch, error) bool) {
		for _, r := range b.In.Recs {
			if !yield(r, nil) {
				return
			}
		}
	}
	for df, err := range table.WriteRecords(e.ctx, e.tbl, schema, recs, b.writeOptions()...) {
		if err != nil {
			e.t.Fatal(err)
		}
		b.enc.files = append(b.enc.files, df)
	}
	b.In.Recs = nil
	if indexed {
		if b.keys.fileKeys, err = k.readKeys(e.ctx, e.tbl, b.enc.files); err != nil {
			e.t.Fatal(err)
		}
	}
	b.enc.written, b.enc.keyedSet = res.keySets()
	b.Staged = true
	e.ops[b] = func() {
		for _, id := range ids {
			switch kind {
			case opInsert:
				e.model[id] = append(e.model[id], name)
				slices.Sort(e.model[id])
			case opUpsert:
				e.model[id] = []string{name}
			case opDelete:
				delete(e.model, id)
			}
		}
	}
	return b
}

// commit forms a run of one segment from the batch and commits it as the run loop does: apply, Commit,
// committed.
func (e *stageEnv) commit(k *keyStage, b *batch) (*Run, *CommitResult) {
	e.t.Helper()
	return e.commitOn(k, b, e.tbl)
}

// commitOn is commit with the run placed in the index on placeOn, a table older than the head when the test
// changes the table between placing a run and committing it.
func (e *stageEnv) commitOn(k *keyStage, b *batch, placeOn *table.Table) (*Run, *CommitResult) {
	e.t.Helper()
	run := &Run{Table: e.ident, Branch: e.o.branch, WriterID: e.o.writerID, Epoch: 1, FirstSeq: b.Seq, LastSeq: b.Seq,
		BaseSnapshotID: commit.HeadID(placeOn.Metadata(), e.o.branch), Rows: b.Rows,
		Segments: []Segment{{DataFiles: b.enc.files, DeleteFiles: b.enc.deletes, DeleteKeys: b.keys.cowKeys, LastSeq: b.Seq, Rows: b.Rows}}}
	commit.Describe(run, placeOn.Metadata().Version(), placeOn.Spec(), placeOn.Schema())
	dvs, err := k.apply(e.ctx, placeOn, run, []*batch{b})
	if err != nil {
		e.t.Fatal(err)
	}
	res, err := e.c.Commit(e.ctx, run)
	if err != nil {
		e.t.Fatal(err)
	}
	k.committed(e.ctx, run, res, dvs)
	e.tbl = res.Table
	e.ops[b]()
	delete(e.ops, b)
	return run, res
}

// do encodes and commits one operation.
func (e *stageEnv) do(k *keyStage, kind opKind, ids []int64, name string) (*Run, *CommitResult) {
	e.t.Helper()
	return e.commit(k, e.encode(k, kind, ids, name))
}

// outsideAppend appends rows with iceberg-go alone, as another writer or tool would.
func (e *stageEnv) outsideAppend(ids []int64, name string) {
	e.t.Helper()
	rows := namedRows(ids, name)
	defer rows.Release()
	rec := array.NewRecordBatch(e.target, rows.Columns(), rows.NumRows())
	defer rec.Release()
	rdr, err := array.NewRecordReader(e.target, []arrow.RecordBatch{rec})
	if err != nil {
		e.t.Fatal(err)
	}
	defer rdr.Release()
	tx := e.tbl.NewTransaction()
	if err := tx.Append(e.ctx, rdr, nil); err != nil {
		e.t.Fatal(err)
	}
	if e.tbl, err = tx.Commit(e.ctx); err != nil {
		e.t.Fatal(err)
	}
	for _, id := range ids {
		e.model[id] = append(e.model[id], name)
		slices.Sort(e.model[id])
	}
}

// compact rewrites every data file with its deletes applied, committed as the writer's compaction is (under
// its writer ID), and rebases the stage on it.
func (e *stageEnv) compact(k *keyStage) {
	e.t.Helper()
	pre := e.tbl
	tasks := tabletest.LiveDataFiles(e.t, pre)
	g := table.CompactionTaskGroup{Tasks: tasks}
	rewritten := map[string]struct{}{}
	for _, t := range tasks {
		g.TotalSizeBytes += t.File.FileSizeBytes()
		rewritten[t.File.FilePath()] = struct{}{}
	}
	tx := pre.NewTransaction()
	if _, err := tx.RewriteDataFiles(e.ctx, []table.CompactionTaskGroup{g}, table.RewriteDataFilesOptions{
		SnapshotProps: ice.Properties{summaryWriterID: e.o.writerID, summaryOperation: "compact"},
	}); err != nil {
		e.t.Fatal(err)
	}
	post, err := tx.Commit(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	k.rebase(e.ctx, pre, post, rewritten)
	e.tbl = post
	e.c.SetLatest(e.ident, post)
}

// check compares the table with the model, and a live index with one loaded from the table as it is now.
func (e *stageEnv) check(k *keyStage) {
	e.t.Helper()
	if got := readNamedTable(e.t, e.tbl); !maps.EqualFunc(got, e.model, slices.Equal) {
		e.t.Fatalf("table holds %v, want %v", got, e.model)
	}
	idx := k.idx.Load()
	if idx == nil {
		return
	}
	// The reference is loaded without a budget: the index under test may hold more than its budget, spilled.
	loaded := keyindex.New(keyindex.Config{Columns: k.spec.columns(), Limit: 1 << 40}, nil)
	defer loaded.Close()
	if reason, err := loaded.Load(e.ctx, e.tbl, e.o.branch, 2); err != nil || reason != "" {
		e.t.Fatalf("load the index: %v %s", err, reason)
	}
	if idx.Base() != loaded.Base() {
		e.t.Fatalf("index base %d, the table's head %d", idx.Base(), loaded.Base())
	}
	if got, want := placements(idx), placements(loaded); !maps.Equal(got, want) {
		e.t.Fatalf("the index places\n%v\nloaded from the table:\n%v", got, want)
	}
}

// placements are where an index places each key: data file and row position.
func placements(idx *keyindex.Index) map[string]string {
	locs := map[string][]string{}
	for k, l := range idx.Store().All() {
		key := fmt.Sprintf("%x", k)
		locs[key] = append(locs[key], fmt.Sprintf("%s#%d", filepath.Base(idx.File(l.File).Path()), l.Pos))
	}
	out := map[string]string{}
	for k, s := range locs {
		slices.Sort(s)
		out[k] = strings.Join(s, ",")
	}
	return out
}

// deleteFiles counts the table's live equality delete files and deletion vectors.
func (e *stageEnv) deleteFiles() (eq, dvs int) {
	e.t.Helper()
	l := tabletest.LiveDeleteFiles(e.t, e.tbl)
	return l.Eq, l.DVs
}

func ids(from, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(from + i)
	}
	return out
}

// TestKeyStageApplyCommitRebase: upserts and deletes become deletion vectors on the files that hold the keys
// (a second vector on a file replaces the first, merged), a compaction moves the index to its new files, and
// the next upserts place vectors there. After every step the live index equals one loaded from the table.
func TestKeyStageApplyCommitRebase(t *testing.T) {
	t.Parallel() // see TestMain
	e := newStageEnv(t, 3)
	k := e.stage(false)
	if !k.indexed() {
		t.Fatal("no index on an empty v3 table")
	}
	e.do(k, opInsert, ids(0, 10), "a")
	e.do(k, opInsert, ids(10, 10), "b")
	e.check(k)

	run, _ := e.do(k, opUpsert, []int64{3, 12, 50}, "u1")
	seg := run.Segments[0]
	if run.IndexBase == nil || len(seg.DVFiles) != 2 || len(seg.DeleteFiles) != 0 || len(seg.RemovedDVs) != 0 {
		t.Fatalf("upsert of keys in two files: index base %v, %d vectors, %d equality deletes, %d replaced vectors",
			run.IndexBase, len(seg.DVFiles), len(seg.DeleteFiles), len(seg.RemovedDVs))
	}
	e.check(k)

	run, _ = e.do(k, opUpsert, []int64{4}, "u2") // the file of key 3 again: its vector is replaced, merged
	if seg := run.Segments[0]; len(seg.DVFiles) != 1 || len(seg.RemovedDVs) != 1 {
		t.Fatalf("second upsert on a file: %d vectors, %d replaced", len(seg.DVFiles), len(seg.RemovedDVs))
	}
	e.check(k)
	e.do(k, opDelete, []int64{13, 50}, "")
	e.check(k)

	e.compact(k)
	if !k.indexed() {
		t.Fatal("the index went off after the writer's own compaction")
	}
	for _, f := range k.idx.Load().Files() {
		if f.Vector() != nil {
			t.Fatalf("compacted file %s has a vector in the index", f.Path())
		}
	}
	e.check(k)

	run, _ = e.do(k, opUpsert, []int64{3, 15, 60}, "u3")
	if seg := run.Segments[0]; len(seg.DVFiles) == 0 || len(seg.DeleteFiles) != 0 {
		t.Fatalf("upsert after compaction: %d vectors, %d equality deletes", len(seg.DVFiles), len(seg.DeleteFiles))
	}
	e.check(k)
	if eq, _ := e.deleteFiles(); eq != 0 {
		t.Fatalf("%d equality delete files with the index on", eq)
	}
}

// TestKeyStageCollidingHashes: with every key's hash folded onto two values, upserts and deletes still delete
// exactly the rows of their keys (v2: position delete files, v3: deletion vectors), and the index places every
// row as one loaded from the table does.
func TestKeyStageCollidingHashes(t *testing.T) {
	for _, version := range []int{2, 3} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			t.Parallel()
			e := newStageEnv(t, version)
			k := e.stage(false)
			k.idx.Load().Store().SetHash(func(b []byte) uint64 { return keyenc.Hash(b) & 1 })
			e.do(k, opInsert, ids(0, 20), "a")
			e.do(k, opInsert, []int64{5, 25}, "dup") // a second row of key 5
			e.do(k, opUpsert, []int64{3, 5, 12, 40}, "u1")
			e.check(k)
			e.do(k, opDelete, []int64{4, 12, 25}, "")
			e.do(k, opUpsert, []int64{3, 4, 19}, "u2")
			e.check(k)
			if eq, _ := e.deleteFiles(); eq != 0 {
				t.Fatalf("%d equality delete files with the index on", eq)
			}
		})
	}
}

// TestKeyStageFallbackWhenTableChangesOutside: a run applied to the index meets an append by someone else at
// commit: the committer writes equality deletes instead of its vectors, and the index stays on with its base,
// marked stale. A batch encoded for the index before then is applied on the head (the writer reloads it, see
// keyStage.wantsFresh): the index first catches up with the outside append and the fallback's equality deletes,
// then gives the batch vectors, and so does every batch after it. The table reads back as the model says.
func TestKeyStageFallbackWhenTableChangesOutside(t *testing.T) {
	t.Parallel() // see TestMain
	e := newStageEnv(t, 3)
	k := e.stage(false)
	e.do(k, opInsert, ids(0, 10), "a")
	first := e.encode(k, opUpsert, []int64{2, 100}, "u")
	second := e.encode(k, opUpsert, []int64{1, 101}, "late")
	if len(first.keys.keyRecs) == 0 || len(second.keys.keyRecs) == 0 || len(first.enc.deletes) != 0 {
		t.Fatal("batches encoded with the index on should keep their keys for apply")
	}
	placed := e.tbl // the run is placed in the index before the append, and committed after it
	e.outsideAppend([]int64{100, 101}, "out")

	run, res := e.commitOn(k, first, placed)
	if !res.IndexLost || !k.indexed() || !k.wantsFresh() {
		t.Fatalf("commit after an outside append: IndexLost %v, index on %v, wants a fresh table %v",
			res.IndexLost, k.indexed(), k.wantsFresh())
	}
	if run.IndexBase == nil || len(run.Segments[0].FallbackKeys) == 0 {
		t.Fatal("the run applied with the index on carries no index base or fallback keys")
	}
	// The table is right; the index is behind it (stale) until the next run catches it up.
	if got := readNamedTable(t, e.tbl); !maps.EqualFunc(got, e.model, slices.Equal) {
		t.Fatalf("table holds %v after the fallback, want %v", got, e.model)
	}

	run, res = e.commit(k, second) // e.tbl is the head: the fallback's commit made it
	if seg := run.Segments[0]; len(seg.DVFiles) == 0 || len(seg.DeleteFiles) != 0 || res.IndexLost || !k.indexed() {
		t.Fatalf("batch encoded for the index, applied after the catch-up: %d vectors, %d equality deletes, IndexLost %v, index on %v",
			len(seg.DVFiles), len(seg.DeleteFiles), res.IndexLost, k.indexed())
	}
	e.check(k)

	b := e.encode(k, opUpsert, []int64{5, 100}, "after")
	if len(b.keys.keyRecs) == 0 || len(b.enc.deletes) != 0 {
		t.Fatalf("encoded with the index on: %d key records, %d equality deletes", len(b.keys.keyRecs), len(b.enc.deletes))
	}
	e.commit(k, b)
	e.check(k)
}

// TestKeyStageRebaseDropsAfterOutsideChange: a compaction over a table someone else appended to since the
// index's base leaves the index off; later upserts are equality deletes and read back right.
func TestKeyStageRebaseDropsAfterOutsideChange(t *testing.T) {
	t.Parallel() // see TestMain
	e := newStageEnv(t, 3)
	k := e.stage(false)
	e.do(k, opInsert, ids(0, 10), "a")
	e.do(k, opUpsert, []int64{1}, "u")
	e.outsideAppend([]int64{3, 20}, "out")
	e.compact(k)
	if k.indexed() {
		t.Fatal("the index survived a compaction over an outside append")
	}
	e.check(k)
	e.do(k, opUpsert, []int64{3, 20, 1}, "v")
	e.check(k)
}

// TestKeyStageOverBudget: a run that takes the index past its budget spills its keys to a run on local disk and
// the index stays on: upserts and deletes of spilled keys are placed as an index loaded from the table places
// them, on format versions 2 and 3. The budget holds the files' metadata (a few KiB each) and about 300 keys; the
// runs insert 400 at a time. An index still past its budget after spilling (a budget smaller than a run's
// fences) commits its run, then goes off.
func TestKeyStageOverBudget(t *testing.T) {
	t.Parallel() // see TestMain
	const budget = 40 << 10
	for _, version := range []int{2, 3} {
		t.Run(fmt.Sprintf("v%d spills", version), func(t *testing.T) {
			e := newStageEnv(t, version, WithKeyIndexBytes(budget))
			k := e.stage(false)
			e.do(k, opInsert, ids(0, 400), "a")
			if !k.indexed() || k.spilledBytes() != 0 {
				t.Fatalf("index on %v, %d bytes spilled under its budget", k.indexed(), k.spilledBytes())
			}
			e.do(k, opInsert, ids(400, 400), "b")
			if !k.indexed() || k.spilledBytes() == 0 || k.indexBytes() > budget {
				t.Fatalf("past its budget: index on %v, %d bytes in memory, %d spilled", k.indexed(), k.indexBytes(), k.spilledBytes())
			}
			e.do(k, opUpsert, []int64{1, 401, 805}, "u")
			e.do(k, opDelete, []int64{2, 402}, "")
			e.do(k, opInsert, ids(1000, 400), "c")
			e.do(k, opUpsert, []int64{1, 3, 403, 1001}, "v")
			if !k.indexed() {
				t.Fatal("index off")
			}
			e.check(k)
		})
	}
	t.Run("still over", func(t *testing.T) {
		e := newStageEnv(t, 3, WithKeyIndexBytes(1))
		k := e.stage(false)
		e.do(k, opInsert, ids(0, 10), "a")
		if k.indexed() {
			t.Fatal("index still on past its budget after spilling")
		}
		e.do(k, opUpsert, []int64{1, 11}, "u")
		e.check(k)
	})
}

// TestKeyStageLoad: load opens the index only for a merge-on-read writer on a v2 or v3 table; on a table that
// holds rows it places the live rows (deletion vectors applied), spilling past the budget, and stays off when
// even its spilled runs exceed the budget.
func TestKeyStageLoad(t *testing.T) {
	t.Parallel() // see TestMain
	for _, c := range []struct {
		name    string
		version int
		cow     bool
		opts    []Option
		want    bool
	}{
		{"v2", 2, false, nil, true},
		{"v2 copy-on-write", 2, true, nil, false},
		{"v3 copy-on-write", 3, true, nil, false},
		{"v3 index off", 3, false, []Option{WithKeyIndexBytes(0)}, false},
		{"v3", 3, false, nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newStageEnv(t, c.version, c.opts...)
			if got := e.stage(c.cow).indexed(); got != c.want {
				t.Fatalf("index on %v, want %v", got, c.want)
			}
		})
	}
	t.Run("v3 with rows", func(t *testing.T) {
		e := newStageEnv(t, 3)
		k := e.stage(false)
		e.do(k, opInsert, ids(0, 10), "a")
		e.do(k, opUpsert, []int64{2, 3}, "u")
		e.do(k, opDelete, []int64{4}, "")
		reopened := e.stage(false)
		if !reopened.indexed() {
			t.Fatal("no index on reopening")
		}
		if got, want := placements(reopened.idx.Load()), placements(k.idx.Load()); !maps.Equal(got, want) {
			t.Fatalf("loaded %v, live %v", got, want)
		}
		e.do(reopened, opUpsert, []int64{2, 5}, "v") // merges with the vector it loaded
		e.check(reopened)
	})
	t.Run("v3 over budget", func(t *testing.T) {
		e := newStageEnv(t, 3)
		k := e.stage(false)
		e.do(k, opInsert, ids(0, 800), "a")
		e.do(k, opDelete, []int64{4}, "")
		e.o.keyed.indexBytes = 24 << 10 // the files' metadata and about half the keys: the load spills
		reopened := e.stage(false)
		if !reopened.indexed() || reopened.spilledBytes() == 0 || reopened.indexBytes() > e.o.keyed.indexBytes {
			t.Fatalf("past the budget: index on %v, %d bytes in memory, %d spilled", reopened.indexed(), reopened.indexBytes(), reopened.spilledBytes())
		}
		if got, want := placements(reopened.idx.Load()), placements(k.idx.Load()); !maps.Equal(got, want) {
			t.Fatalf("loaded %v, live %v", got, want)
		}
		e.do(reopened, opUpsert, []int64{2, 5}, "v")
		e.check(reopened)
		e.o.keyed.indexBytes = 1 // less than a run's bloom filter: over even spilled
		if e.stage(false).indexed() {
			t.Fatal("index on past the budget after spilling")
		}
	})
}

// TestKeyStageCheck: why Upsert and Delete cannot run, by key, layout, mode and format version.
func TestKeyStageCheck(t *testing.T) {
	spec := &keySpec{names: []string{"id"}}
	layout := errors.New("partition source not in the key")
	for _, c := range []struct {
		name    string
		k       *keyStage
		version int
		want    error
	}{
		{"no key", &keyStage{}, 3, ErrNoKeys},
		{"layout", &keyStage{spec: spec, layoutErr: layout}, 3, layout},
		{"merge-on-read v1", &keyStage{spec: spec}, 1, ErrNotSupported},
		{"merge-on-read v2", &keyStage{spec: spec}, 2, nil},
		{"copy-on-write v1", &keyStage{spec: spec, cow: true}, 1, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.k.check("Upsert", c.version)
			if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
				t.Fatalf("check: %v, want %v", err, c.want)
			}
		})
	}
}
