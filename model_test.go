package iceberg_test

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// The model harness: one writer (or one writer ID, reopened) applies random Write, Upsert, Delete and (keyed
// modes) Apply calls to a table and to the sequential model of them (kvModel), and the table read back with
// iceberg-go's scanner must equal the model after every Flush, every restart and at the end. A modelCase picks
// the write mode, the format version, the partition spec, whether commits are held so that batches coalesce
// into runs, whether the writer is closed and reopened with the same WithWriterID mid-trial, and whether runs go
// straight to the catalog or, serialized, through a coordinator's NewCatalogCommitter.
//
// Besides the rows, every check asserts: after Flush and Close the writer committed every row it accepted and
// holds nothing; on format version 3, the row lineage (checkLineage: unique, non-null row ids; rows the
// operations did not touch keep theirs, through copy-on-write rewrites and compactions; copy-on-write updates
// keep the updated row's id); in copy-on-write mode no snapshot has a delete file; a coalesced trial had
// commits held and a commit of several batches; a serialized one sent its runs through the coordinator.

var (
	modelSeed = flag.Uint64("model.seed", 0, "TestModel: seed of every case (0: each case's own, new every run)")
	modelFull = flag.Bool("model.full", false, "TestModel: every combination of the parameters, not the covering matrix")
	modelOps  = flag.Float64("model.ops", 1, "TestModel: multiplies each case's operation count (a soak run: -model.ops=4)")
)

// modelMode is what the harness's operations may do.
type modelMode int

const (
	appendOnly  modelMode = iota // Write only, on a table without keys
	mergeOnRead                  // Write, Upsert, Delete and Apply; iceberg.MergeOnRead
	copyOnWrite                  // Write, Upsert, Delete and Apply; iceberg.CopyOnWrite
)

func (m modelMode) String() string { return [...]string{"append", "mor", "cow"}[m] }

// versions are the format versions the mode runs on (merge-on-read needs delete files: v2 and later).
func (m modelMode) versions() []int {
	if m == mergeOnRead {
		return []int{2, 3}
	}
	return []int{1, 2, 3}
}

// modelCase is one combination of the harness's parameters.
type modelCase struct {
	mode    modelMode
	version int
	// part is the partition spec: "" (unpartitioned) or a key of modelSpecs.
	part string
	// coalesced holds commits at a gate for a few operations at a time, so that the batches sealed meanwhile
	// coalesce into one run (split into segments where an operation's kind changes).
	coalesced bool
	// restart closes the writer once or twice mid-trial and reopens it with the same WithWriterID.
	restart bool
	// serialized hands runs to the writer's committer through MarshalBinary and UnmarshalBinary (forwarder),
	// to a NewCatalogCommitter shared by the writer's incarnations, as a coordinator would.
	serialized bool
}

// String names the case by its parameters: mode/version[/spec][/coalesced][/restart]/(direct|serialized).
func (c modelCase) String() string {
	parts := []string{c.mode.String(), fmt.Sprintf("v%d", c.version)}
	if c.part != "" {
		parts = append(parts, c.part)
	}
	if c.coalesced {
		parts = append(parts, "coalesced")
	}
	if c.restart {
		parts = append(parts, "restart")
	}
	if c.serialized {
		parts = append(parts, "serialized")
	} else {
		parts = append(parts, "direct")
	}
	return strings.Join(parts, "/")
}

// modelSpecs are the partition specs a case may use. The day and identity specs partition by ts, which the
// keyed modes then add to the key (a key's rows must stay in one partition); ts is a function of id.
var modelSpecs = map[string][]string{
	"bucket":   {"bucket(4, id)"},
	"day":      {"day(ts)"},
	"identity": {"identity(ts)"},
}

// modelMatrix is the set of cases TestModel runs: per mode, six cases in which every format version meets
// both values of each of partitioned, coalesced, restart and serialized, and every two of those four meet in
// all four combinations (a pairwise covering array), plus two chosen cases. The partitioned cases of a mode
// take the specs in turn. Every mode and format version goes through a coordinator (serialized) at least once.
func modelMatrix() []modelCase {
	if *modelFull {
		return modelAll()
	}
	// Bits: partitioned, coalesced, restart, serialized. Complementary pairs give each version both values of
	// each parameter; the three pairs give every two parameters both equal and different values.
	patterns := []string{"0000", "1111", "0011", "1100", "0101", "1010"}
	specs := []string{"bucket", "day", "identity"}
	var cases []modelCase
	for _, mode := range []modelMode{appendOnly, mergeOnRead, copyOnWrite} {
		vs := mode.versions()
		spec := 0
		for i, p := range patterns {
			c := modelCase{mode: mode, version: vs[i*len(vs)/len(patterns)],
				coalesced: p[1] == '1', restart: p[2] == '1', serialized: p[3] == '1'}
			if p[0] == '1' {
				c.part = specs[spec%len(specs)]
				spec++
			}
			cases = append(cases, c)
		}
	}
	// Two more where the pipeline's parts meet most: a coalesced copy-on-write run on v3 committed directly (split
	// segments carrying row ids over), and deletion vectors sent through the coordinator by a writer whose key
	// index was rebuilt on reopening.
	return append(cases,
		modelCase{mode: copyOnWrite, version: 3, part: "bucket", coalesced: true},
		modelCase{mode: mergeOnRead, version: 3, part: "bucket", restart: true, serialized: true})
}

// modelAll is every combination of the parameters (-model.full).
func modelAll() []modelCase {
	var cases []modelCase
	for _, mode := range []modelMode{appendOnly, mergeOnRead, copyOnWrite} {
		for _, v := range mode.versions() {
			for _, part := range []string{"", "bucket", "day", "identity"} {
				for bits := 0; bits < 8; bits++ {
					cases = append(cases, modelCase{mode: mode, version: v, part: part,
						coalesced: bits&1 != 0, restart: bits&2 != 0, serialized: bits&4 != 0})
				}
			}
		}
	}
	return cases
}

// modelRunSeed makes each run's case seeds new: a case runs a few dozen operations, so coverage comes from the
// runs drawing different ones (a failing case logs its seed).
var modelRunSeed = rand.Uint64()

// TestModel runs the harness over modelMatrix (-model.full: every combination; -model.seed: one seed for
// every case, as printed by a failing case).
func TestModel(t *testing.T) {
	for _, c := range modelMatrix() {
		t.Run(c.String(), func(t *testing.T) {
			t.Parallel()
			seed := *modelSeed
			if seed == 0 {
				h := fnv.New64a()
				h.Write([]byte(c.String()))
				seed = h.Sum64() ^ modelRunSeed
			}
			t.Logf("seed %d", seed)
			runModel(t, c, seed)
		})
	}
}

// TestModelMatrix checks what modelMatrix's comment promises: per mode, every format version meets both values
// of each of partitioned, coalesced, restart and serialized (serialized: every mode and version goes through a
// coordinator), and every two of those meet in all four combinations.
func TestModelMatrix(t *testing.T) {
	bits := func(c modelCase) [4]bool { return [4]bool{c.part != "", c.coalesced, c.restart, c.serialized} }
	names := [4]string{"partitioned", "coalesced", "restart", "serialized"}
	for _, mode := range []modelMode{appendOnly, mergeOnRead, copyOnWrite} {
		seen := map[string]bool{}
		for _, c := range modelMatrix() {
			if c.mode != mode {
				continue
			}
			b := bits(c)
			for i := range b {
				seen[fmt.Sprintf("v%d %s=%v", c.version, names[i], b[i])] = true
				for j := i + 1; j < len(b); j++ {
					seen[fmt.Sprintf("%s=%v %s=%v", names[i], b[i], names[j], b[j])] = true
				}
			}
		}
		for i := range names {
			for _, x := range []bool{false, true} {
				for _, v := range mode.versions() {
					if k := fmt.Sprintf("v%d %s=%v", v, names[i], x); !seen[k] {
						t.Errorf("%s: no case with %s", mode, k)
					}
				}
				for j := i + 1; j < len(names); j++ {
					for _, y := range []bool{false, true} {
						if k := fmt.Sprintf("%s=%v %s=%v", names[i], x, names[j], y); !seen[k] {
							t.Errorf("%s: no case with %s", mode, k)
						}
					}
				}
			}
		}
	}
}

// The model table: kvSchema's id, v and s, plus ts, a function of id (modelTS) for the time partition specs.

var modelSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
}, nil)

var modelKeySchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
}, nil)

// modelTS is the ts of id's rows: four values eleven hours apart, over two days.
func modelTS(id int64) arrow.Timestamp {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return arrow.Timestamp(start.Add(time.Duration(id%4) * 11 * time.Hour).UnixMicro())
}

// modelRows makes modelSchema rows (ids[i], vs[i]): kvBatch's, with ts.
func modelRows(ids, vs []int64) arrow.RecordBatch {
	return withTS(kvBatch(ids, vs), modelSchema, ids)
}

// modelKeys makes the key batch of a Delete: id and ts, whichever of them the key is.
func modelKeys(ids []int64) arrow.RecordBatch {
	return withTS(keyBatch(ids), modelKeySchema, ids)
}

// withTS returns rec (released) with the ts column of ids appended, as a batch of schema (one schema for all
// batches: the writer ends a buffer where the schema changes).
func withTS(rec arrow.RecordBatch, schema *arrow.Schema, ids []int64) arrow.RecordBatch {
	defer rec.Release()
	b := array.NewTimestampBuilder(memory.NewGoAllocator(), schema.Field(schema.NumFields()-1).Type.(*arrow.TimestampType))
	defer b.Release()
	for _, id := range ids {
		b.Append(modelTS(id))
	}
	ts := b.NewArray()
	defer ts.Release()
	return array.NewRecordBatch(schema, append(slices.Clone(rec.Columns()), ts), rec.NumRows())
}

// What the operations since the last check did to a key (bits).
const (
	touchWrite = 1 << iota
	touchUpsert
	touchDelete
)

// modelTrial is one run of the harness: the table, the model and what the checks compare across a Flush.
type modelTrial struct {
	c     modelCase
	cat   *slowCatalog
	ident table.Identifier
	model kvModel
	// touched marks the keys the operations since the last check wrote, upserted or deleted.
	touched map[int64]int
	// lineage is the table's row lineage at the last check (format version 3).
	lineage lineageState
	// accepted counts the rows (deleted keys included) the current writer accepted.
	accepted int64
}

func runModel(t *testing.T, c modelCase, seed uint64) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d: rerun with go test -run 'TestModel/%s$' -model.seed=%d", seed, c, seed)
		}
	})
	rng := rand.New(rand.NewPCG(seed, 0x6d6f64656c))
	ctx := context.Background()
	m := &modelTrial{c: c, cat: &slowCatalog{Catalog: openCatalog(t)}, ident: table.Identifier{"model", "kv"},
		model: kvModel{}, touched: map[int64]int{}}

	create := []iceberg.CreateOption{iceberg.FormatVersion(c.version)}
	if c.part != "" {
		create = append(create, iceberg.PartitionBy(modelSpecs[c.part]...))
	}
	// The workload: append-only trials write fewer, larger batches; coalesced trials seal small batches (so that
	// the operations of one hold seal several) over fewer keys and operations, which keeps a copy-on-write
	// trial's rewrites within the time of the others. The keyed counts keep a trial to a few seconds of -race
	// CPU (the suite runs twenty): a trial still flushes and checks a few times, and new seeds every run
	// (modelRunSeed) cover more than longer trials of fixed seeds did. A Flush opens the gate, so a coalesced
	// trial flushes no more often than before (1 in 12 operations), or its holds would seal too few batches.
	ops := &kvOps{rng: rng, rows: modelRows, keys: modelKeys}
	nOps, flushEvery, flushRows := 60, 12, 1+rng.IntN(60)
	var opts []iceberg.Option
	switch {
	case c.mode == appendOnly:
		ops.keySpace, ops.maxRows, ops.writes = 5000, 1+rng.IntN(800), 10
		nOps, flushEvery, flushRows = 30, 6, 1+rng.IntN(3000)
		if c.coalesced {
			flushRows = 1 + rng.IntN(ops.maxRows)
		}
	case c.coalesced:
		ops.keySpace, ops.maxRows, ops.writes = int64(20+rng.IntN(40)), 5, 3
		nOps, flushEvery, flushRows = 40, 12, 1+rng.IntN(8)
	default:
		ops.keySpace, ops.maxRows, ops.writes = int64(20+rng.IntN(200)), 12, 3
	}
	// Half the operations unless ICEWRITER_SOAK=1 (CI's soak step runs the full counts).
	nOps = max(1, int(float64(nOps)**modelOps*float64(iceberg.SoakForTest(t, 1, 2))/2))
	opts = append(opts, iceberg.WithFlushRows(flushRows),
		iceberg.WithFlushInterval(time.Duration(rng.IntN(5))*time.Millisecond))
	if c.mode != appendOnly {
		keys := []string{"id"}
		if c.part == "day" || c.part == "identity" {
			keys = append(keys, "ts")
		}
		create = append(create, iceberg.IdentifierFields(keys...))
		cc := changeColumns{ts: true, beforeTS: len(keys) > 1}
		ops.changes = func(chs []kvChange) arrow.RecordBatch { return changeBatch(chs, cc) }
		mode := iceberg.MergeOnRead
		if c.mode == copyOnWrite {
			mode = iceberg.CopyOnWrite
		}
		opts = append(opts, iceberg.WithMode(mode))
		if c.mode == mergeOnRead && rng.IntN(3) == 0 {
			opts = append(opts, iceberg.WithAutoCompactEvery(1+rng.IntN(5)))
		}
	}
	opts = append(opts, iceberg.WithCreate(modelSchema, create...), iceberg.WithMaxInFlight(1+rng.IntN(4)))
	if rng.IntN(3) == 0 {
		opts = append(opts, iceberg.WithFlushBytes(int64(2_000+rng.IntN(50_000))))
	}
	var coalesced atomic.Int64 // the most batches one commit took
	opts = append(opts, iceberg.WithOnCommit(func(ci iceberg.CommitInfo) {
		for n := int64(ci.Batches); ; {
			if old := coalesced.Load(); old >= n || coalesced.CompareAndSwap(old, n) {
				break
			}
		}
	}))
	runs := 0
	if c.serialized {
		coord := iceberg.NewCatalogCommitter(m.cat, time.Minute)
		opts = append(opts, iceberg.WithCommitter(forwarder{coord: coord, mu: &sync.Mutex{}, runs: &runs}))
	}
	restartAt := map[int]bool{}
	if c.restart {
		opts = append(opts, iceberg.WithWriterID("model"))
		restartAt[rng.IntN(nOps)] = true
		restartAt[rng.IntN(nOps)] = true
	}

	open := func() *iceberg.Writer {
		t.Helper()
		w, err := iceberg.NewWriter(ctx, m.cat, m.ident, opts...)
		if err != nil {
			t.Fatal(err)
		}
		m.accepted = 0
		return w
	}
	w := open()
	// The gate's schedule draws from its own source: the operations and Flush calls a seed gives do not depend
	// on when commits reach the gate.
	gateRng := rand.New(rand.NewPCG(seed, 0x67617465))
	// While holding: arrived says a commit waits at the gate; from then, after counts the operations left and
	// sealed is the writer's batch count when it arrived. The gate opens once after reaches 0 and two more batches
	// sealed: they queue behind the held commit and coalesce into the next run.
	holding, arrived, after, sealed := false, false, 0, int64(0)
	fresh := true // no operation since the writer opened or flushed: hold there, and at random
	release := func() {
		m.cat.release()
		holding = false
	}
	// A restart or Flush opens the gate, so one drawn while a commit waits there is put off until the gate opens
	// on its own, and the trial runs past nOps until it has: otherwise a seed whose Flush calls come often could
	// open every hold before anything queued behind it, and the trial would show no coalesced commit.
	coalescing := func() bool { return holding && arrived }
	restartDue, flushDue := false, false
	for op := 0; op < nOps || coalescing(); op++ {
		if c.coalesced && !holding && (fresh || gateRng.IntN(10) == 0) {
			m.cat.hold()
			holding, arrived = true, false
		}
		if holding && w.Stats().UncommittedBatches >= iceberg.DefaultMaxUncommitted-8 {
			release() // the next Write could block until a commit lands
		}
		o := ops.apply(t, ctx, w, m.model)
		fresh = false
		m.accepted += o.rows
		touch := [...]int{kvWrite: touchWrite, kvUpsert: touchUpsert, kvDelete: touchDelete}
		for _, id := range o.ids {
			m.touched[id] |= touch[o.kind]
		}
		for id, kind := range o.changed {
			m.touched[id] |= touch[kind]
		}
		switch {
		case !holding:
		case !arrived:
			// Once a sealed batch's commit waits at the gate, the batches the next operations seal queue
			// behind it.
			if st := w.Stats(); st.UncommittedBatches > 0 {
				if m.cat.held(10 * time.Second) {
					arrived, after, sealed = true, 1+gateRng.IntN(8), w.Stats().Batches
				} else {
					release()
				}
			}
		default:
			if after--; after <= 0 && w.Stats().Batches >= sealed+2 {
				// The commit loop takes only staged batches: opened while the queued ones still encode (a
				// starved machine), the gate would let them commit one by one.
				sctx, cancel := context.WithTimeout(ctx, gateLimit)
				err := iceberg.WaitFor(sctx, w, func() bool { return iceberg.Staged(w) })
				cancel()
				if err != nil {
					t.Fatalf("the batches queued behind the held commit were not staged: %v", err)
				}
				release()
			}
		}
		restartDue = restartDue || restartAt[op]
		flushDue = flushDue || (!restartDue && op < nOps && rng.IntN(flushEvery) == 0)
		switch {
		case coalescing():
		case restartDue:
			release()
			m.close(t, ctx, w)
			m.check(t, fmt.Sprintf("after op %d, the writer closed", op))
			w = open()
			fresh, restartDue, flushDue = true, false, false
		case flushDue:
			release()
			if err := w.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if st := w.Stats(); st.RowsCommitted != m.accepted {
				t.Fatalf("after Flush %d rows committed, want %d: %+v", st.RowsCommitted, m.accepted, st)
			}
			m.check(t, fmt.Sprintf("after op %d and Flush", op))
			fresh, flushDue = true, false
		}
	}
	release()
	m.close(t, ctx, w)
	m.check(t, "at the end")
	waits, late := m.cat.gateCounts()
	st := w.Stats()
	t.Logf("last writer: %d commits of %d batches, %d files rewritten; at most %d batches in a commit; %d commits held, %d serialized",
		st.Commits, st.Batches, st.FilesRewritten, coalesced.Load(), waits, runs)

	if late > 0 {
		t.Fatalf("%d commits waited %s at the gate", late, gateLimit)
	}
	if n := coalesced.Load(); c.coalesced && (waits == 0 || n < 2) {
		t.Fatalf("no commit coalesced batches behind a held one (%d commits held, at most %d batches in a commit)", waits, n)
	}
	if c.serialized && runs == 0 {
		t.Fatal("no run went through the coordinator")
	}
	if c.mode == copyOnWrite {
		noDeleteFiles(t, m.cat, m.ident)
	}
}

// close closes w and checks its counters: everything it accepted committed, nothing held.
func (m *modelTrial) close(t *testing.T, ctx context.Context, w *iceberg.Writer) {
	t.Helper()
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.RowsCommitted != m.accepted || st.UncommittedBatches != 0 || st.BufferedBytes != 0 {
		t.Fatalf("stats after Close (%d rows accepted): %+v", m.accepted, st)
	}
}

// check reads the table back and compares it with the model; on format version 3 it checks the row lineage
// against the previous check (checkLineage).
func (m *modelTrial) check(t *testing.T, when string) {
	t.Helper()
	defer func() {
		if t.Failed() {
			t.Logf("(the check %s)", when)
		}
	}()
	var got map[int64][]int64
	var now lineageState
	if m.c.version >= 3 {
		got, now = readLineageState(t, m.cat, m.ident)
	} else {
		got = readKV(t, m.cat, m.ident)
	}
	compareKV(t, got, m.model)
	if m.c.version >= 3 {
		checkLineage(t, m.lineage, now, m.touched, m.c.mode == copyOnWrite)
		m.lineage = now
	}
	clear(m.touched)
}

// lineageState is the row lineage of a v3 table's rows.
type lineageState struct {
	byKey   map[int64][]lineage // the lineage of each key's rows, sorted
	owner   map[int64]int64     // _row_id -> the key of the row holding it
	lastSeq int64               // the table's last sequence number
}

// readLineageState reads the table with row lineage (readLineage: no null _row_id or sequence number) and
// returns each key's values, as readKV does, and the lineage. It fails on a _row_id held by two rows, one
// outside [0, next-row-id) and a sequence number outside [1, last-sequence-number].
func readLineageState(t *testing.T, cat icecatalog.Catalog, ident table.Identifier) (map[int64][]int64, lineageState) {
	t.Helper()
	tbl := tabletest.Load(t, cat, ident)
	meta := tbl.Metadata()
	st := lineageState{byKey: map[int64][]lineage{}, owner: map[int64]int64{}, lastSeq: meta.LastSequenceNumber()}
	got := map[int64][]int64{}
	for _, r := range readLineage(t, cat, ident) {
		if other, dup := st.owner[r.rowID]; dup {
			t.Fatalf("_row_id %d is held by a row of id %d and by one of id %d: row ids must be unique", r.rowID, other, r.id)
		}
		if r.rowID < 0 || r.rowID >= meta.NextRowID() {
			t.Fatalf("id %d: _row_id %d outside [0, next-row-id %d)", r.id, r.rowID, meta.NextRowID())
		}
		if r.seq <= 0 || r.seq > st.lastSeq {
			t.Fatalf("id %d: _last_updated_sequence_number %d outside [1, %d]", r.id, r.seq, st.lastSeq)
		}
		st.owner[r.rowID] = r.id
		st.byKey[r.id] = append(st.byKey[r.id], r.lineage)
		got[r.id] = append(got[r.id], r.v)
	}
	for id := range got {
		slices.Sort(got[id])
		slices.SortFunc(st.byKey[id], func(a, b lineage) int { return cmp.Compare(a.rowID, b.rowID) })
	}
	return got, st
}

// checkLineage compares the row lineage across the operations since the previous check, which touched the keys
// in touched. Rows of an untouched key keep their _row_id and _last_updated_sequence_number, whatever file
// rewrites (copy-on-write, compaction) moved them. A touched key's rows are either rows it held before,
// unchanged, or rows with a sequence number newer than the previous check's and a _row_id that is fresh or
// one of the key's own. With updatesKeep (copy-on-write), a key that only Upsert touched, one row before and
// one row after, keeps its _row_id (an update keeps the row's lineage).
func checkLineage(t *testing.T, before, after lineageState, touched map[int64]int, updatesKeep bool) {
	t.Helper()
	for id, was := range before.byKey {
		if now := after.byKey[id]; touched[id] == 0 && !slices.Equal(now, was) {
			t.Fatalf("untouched id %d: lineage (_row_id, _last_updated_sequence_number) went from %v to %v", id, was, now)
		}
	}
	for id, now := range after.byKey {
		was := before.byKey[id]
		if touched[id] == 0 {
			if len(was) == 0 {
				t.Fatalf("id %d appeared without being written: lineage %v", id, now)
			}
			continue
		}
		for _, l := range now {
			if slices.Contains(was, l) {
				continue
			}
			if owner, held := before.owner[l.rowID]; held && owner != id {
				t.Fatalf("id %d got _row_id %d, which id %d held before: want its own or a fresh one", id, l.rowID, owner)
			}
			if l.seq <= before.lastSeq {
				t.Fatalf("id %d: a new or changed row has _last_updated_sequence_number %d, not newer than %d",
					id, l.seq, before.lastSeq)
			}
		}
		if updatesKeep && touched[id] == touchUpsert && len(was) == 1 && len(now) == 1 && now[0].rowID != was[0].rowID {
			t.Fatalf("id %d, only upserted: _row_id went from %d to %d, want it kept", id, was[0].rowID, now[0].rowID)
		}
	}
}

// noDeleteFiles fails if any snapshot of the table counts a delete file (copy-on-write writes none).
func noDeleteFiles(t *testing.T, cat icecatalog.Catalog, ident table.Identifier) {
	t.Helper()
	tbl := tabletest.Load(t, cat, ident)
	for _, snap := range tbl.Metadata().Snapshots() {
		if n := snap.Summary.Properties["total-delete-files"]; n != "" && n != "0" {
			t.Fatalf("snapshot %d has %s delete files in copy-on-write mode", snap.SnapshotID, n)
		}
	}
}
