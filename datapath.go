package iceberg

// The data path of a Write, in the order a row takes it; each step is a call into the stage that owns it:
//
//  1. Writer.Write conforms the record to the table's schema (conformer.conformFor: internal/conform) and
//     hands it to the pipeline (Writer.accept).
//  2. The pipeline (internal/pipeline) buffers it, seals batches by the flush policy and asks its env, pipeEnv,
//     to encode each sealed batch: Writer.encode resolves keys (keyStage, for upserts and deletes) and writes
//     the Parquet files (internal/encode).
//  3. The pipeline's ordered commit loop asks pipeEnv to commit the longest staged prefix of its queue:
//     Writer.commit forms the Run (runStage.form), places a keyed run in the key index and hands it to the
//     Committer (internal/commit: CatalogCommitter over commit.Env.Commit, the one CommitTable loop).
//  4. Writer.committed, still in the commit queue, installs the table, queues the callbacks and runs the
//     maintenance due.

import (
	"context"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/icewriter/iceberg/internal/commit"
	"github.com/icewriter/iceberg/internal/commit/cow"
	"github.com/icewriter/iceberg/internal/conform"
	"github.com/icewriter/iceberg/internal/encode"
	"github.com/icewriter/iceberg/internal/keyindex"
	"github.com/icewriter/iceberg/internal/pipeline"
)

// Write appends the rows (insert: no key lookup). Columns are matched to the table by name; an unknown column
// is an error unless schema evolution is on (WithSchemaEvolution); missing optional columns are null. All validation happens here: an error returned by Write means
// nothing of this call was accepted, and the writer stays usable. Write copies what it keeps: the caller may
// reuse or Release the batch as soon as the call returns. Write blocks while the memory limit or the limit on
// uncommitted batches is reached, until ctx is done. A batch without rows is validated all the same (with
// schema evolution on, its new columns are added), then nothing is kept.
func (w *Writer) Write(ctx context.Context, rec arrow.RecordBatch) error {
	return w.write(ctx, "", rec)
}

// write is Write of a source partition's rows.
func (w *Writer) write(ctx context.Context, source string, rec arrow.RecordBatch) error {
	if err := w.pipe.Usable(); err != nil {
		return err
	}
	conf := w.view.conformer()
	if w.view.evolving() && rec != nil {
		var err error
		if conf, err = w.evolveFor(ctx, rec.Schema()); err != nil {
			return err
		}
	}
	r, err := conf.conformFor(ctx, rec, opInsert)
	if err != nil {
		return err
	}
	r.Source = source
	return w.accept(ctx, r)
}

// accept hands the pipeline a conformed record of one call. A record without rows was validated like any
// other (an empty batch with an unknown column is an error), but there is nothing to keep. The record is the
// pipeline's once accepted, unless it is a view, which the pipeline copies and which is released here.
func (w *Writer) accept(ctx context.Context, r batchRecord) error {
	if r.Rec.NumRows() == 0 {
		r.Rec.Release()
		return nil
	}
	err := w.pipe.Accept(ctx, r)
	if err != nil || r.View {
		r.Rec.Release()
	}
	return err
}

func (v *tableView) conformer() *conformer {
	_, c := v.get()
	return c
}

// evolving reports whether schema evolution is on (WithSchemaEvolution): the view's conformers may relax a
// column, and a call has the table take its input schema first (Writer.evolveFor).
func (v *tableView) evolving() bool { return v.hooks != nil && v.hooks.relax != nil }

// conformer is the conform.Conformer for the table's schema (casting, reordering, nullability, dead letters)
// with what the pipeline adds: whether small calls are gathered.
type conformer struct {
	*conform.Conformer
	target  *arrow.Schema // Conformer.Target()
	gathers bool          // small calls can be gathered (pipeline.Gatherable(target))
}

// newConformer returns the conformer for target (with the write-defaults defaults), reporting to v's hooks.
func (v *tableView) newConformer(target *arrow.Schema, defaults conform.Defaults) *conformer {
	return &conformer{Conformer: conform.New(target, defaults, v.mem, v.conformHooks, pipeline.GatherMaxRows),
		target: target, gathers: pipeline.Gatherable(target)}
}

// conformFor conforms one call's rows for the pipeline: a small call (under pipeline.GatherMaxRows rows, of types the
// gather copies) as a view the pipeline gathers, any other as an owned record.
func (c *conformer) conformFor(ctx context.Context, rec arrow.RecordBatch, kind opKind) (batchRecord, error) {
	view := rec != nil && rec.NumRows() < pipeline.GatherMaxRows && c.gathers
	out, size, _, err := c.ConformAs(ctx, rec, !view)
	if err != nil {
		return batchRecord{}, err
	}
	return batchRecord{Rec: out, Size: size, Kind: kind, View: view}, nil
}

// convert is Conformer.Convert, for the change stage's key and version columns.
func (c *conformer) convert(ctx context.Context, path []string, tf arrow.Field, col arrow.Array, mask []byte) (arrow.Array, error) {
	return c.Convert(ctx, path, tf, col, mask)
}

// pipeEnv is the writer as its pipeline sees it (pipeline.Env): the stages a batch goes through after its seal.
type pipeEnv struct{ w *Writer }

func (e pipeEnv) NewBatch() *batch { return &batch{} }

func (e pipeEnv) Encode(ctx context.Context, b *batch, slots pipeline.Slots) error {
	return e.w.encode(ctx, b, slots)
}

// BulkClosed gives the batch whose rows a closed bulk file holds that file, for its commit.
func (e pipeEnv) BulkClosed(c encode.ClosedSpan[*batch]) {
	held := fileMetaBytes(c.Schema)
	c.Holder.enc.files = append(c.Holder.enc.files, c.DF)
	c.Holder.enc.held += held
	c.Holder.enc.runHeld += held
}

func (e pipeEnv) Commit(ctx context.Context, batches []*batch) (func(context.Context, int64), error) {
	run, res, err := e.w.commit(ctx, batches)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, n int64) { e.w.committed(ctx, run, batches, res, n) }, nil
}

func (e pipeEnv) Failure(err error) error { return e.w.failure(err) }

func (e pipeEnv) RemoveFiles(ctx context.Context, paths []string) { e.w.removeFiles(ctx, paths) }

func (e pipeEnv) LoopDone() { e.w.loopDone() }

// encode writes a sealed batch's files for the pipeline. A keyed batch is resolved first (rows superseded
// inside it are dropped); what its upserted and deleted keys become is the key stage's choice
// (keyStage.stageDeletes): with the key index they wait for the commit loop to turn them into deletion vectors
// (and the keys of the batch's new data files go to the index: keyStage.fileKeys), in copy-on-write mode they go to
// the committer, which rewrites the files holding them, and otherwise they are written here as equality delete
// files.
func (w *Writer) encode(ctx context.Context, b *batch, slots pipeline.Slots) error {
	tbl, conf := w.view.get()
	schema := b.In.Schema
	if schema == nil {
		schema = conf.target
	}
	if b.Bulk.Closer {
		return w.files.CloseGen(ctx, tbl, &b.Bulk)
	}
	var files, deletes []ice.DataFile
	var res *resolved
	var err error
	indexed := w.keys.indexed()
	var delDone chan struct{}
	var delErr error
	if w.keys.spec != nil {
		res, err = w.keys.resolve(ctx, b, w.env.mem)
		if err == nil {
			for _, r := range b.In.Recs {
				r.Release()
			}
			b.In.Recs, b.In.Hashes, b.In.Sels = res.data, nil, nil
			// The deletes are staged, or written as equality delete files, while the data files are written: in
			// BenchmarkApply the delete file took an eighth of the batch's encoding, on one core of two.
			delDone = make(chan struct{})
			go func() {
				defer close(delDone)
				deletes, delErr = w.keys.stageDeletes(ctx, tbl, b, res.deletes, indexed)
			}()
		}
	}
	var packed *encode.PackedFiles
	// carries: the batch goes into an open bulk file (a Router's bulk phase).
	carries := func() bool { return w.files.Carries(tbl, !b.In.Keyed && b.Uncovered == nil) }
	if err == nil && indexed && !carries() {
		// Format version 3: the upserted rows' _row_id goes into the files now, not in a rewrite at commit.
		schema, err = w.keys.encodeRowIDs(tbl, schema, b, res)
	}
	if err == nil && len(b.In.Recs) > 0 {
		eb := &encode.Batch[*batch]{Recs: b.In.Recs, Seq: b.Seq, Self: b, Bulk: &b.Bulk, Lineage: b.keys.lineage}
		if carries() {
			err = w.files.WriteBulk(ctx, tbl, schema, eb) // its files come when they close
		} else {
			// Only the commit reads an inserts-only batch's files (a key index reads them too): packed until then.
			parts, release := 1, func() {}
			if tbl.Spec().IsUnpartitioned() && !w.files.Bulk() {
				parts, release = slots.Parts(recordsSize(b.In.Recs))
			}
			var out encode.Written
			out, err = w.files.Write(ctx, tbl, schema, eb, b.writeOptions(), !b.In.Keyed && !indexed, parts)
			files, packed, b.enc.rowMap = out.Files, out.Packed, rowMapOf(out.Rows)
			release()
		}
		b.In.Recs = eb.Recs
	}
	if delDone != nil {
		<-delDone
		if err == nil {
			err = delErr
		}
	}
	if err == nil && indexed {
		b.keys.fileKeys, err = w.keys.fileKeys(ctx, tbl, files, res, b.enc.rowMap)
	}
	var written, keyed map[uint64]struct{}
	if res != nil {
		written, keyed = res.keySets()
	}
	if err != nil {
		return err
	}
	b.enc.files, b.enc.deletes, b.enc.packed = files, deletes, packed
	b.enc.held = packed.MemBytes() + int64(len(files)+len(deletes))*fileMetaBytes(schema)
	b.enc.runHeld = int64(b.dataFileCount()+len(deletes)) * fileMetaBytes(schema)
	if res != nil {
		b.enc.written, b.enc.keyedSet = written, keyed
	}
	return nil
}

// fileMetaBytes estimates the memory one data or delete file's metadata holds as an iceberg-go DataFile: its
// path, partition maps and each column's statistics, once as Avro lists and, after any statistics accessor ran,
// again as maps (Go maps grow in steps: 9 columns cost as much as 12). TestFileMetadataMemory checks that the
// estimate covers what a file holds once read, for 2 to 64 columns, without overshooting it by more than half.
// A batch's files held this way until the commit count against the memory limit (pipeline.heldLocked), and a run
// takes batches up to a share of the limit of it (pipeline.runHeldCap): the files of inserts-only batches wait
// packed (heldfiles.go, about a tenth of it) and take this much only in the run that commits them.
func fileMetaBytes(schema *arrow.Schema) int64 {
	return 2560 + 416*int64(schema.NumFields())
}

// rowMapOf is the key stage's map of the rows of a batch's new data files, from the order the encoder wrote
// them in (nil: unknown).
func rowMapOf(o *encode.RowOrder) *keyindex.RowMap {
	switch {
	case o == nil:
		return nil
	case o.Order == nil:
		return keyindex.Unpartitioned
	}
	return keyindex.NewRowMap(o.Order, o.Ends)
}

// commit is the pipeline's commit of one run: the run formed from the batches, placed in the key index,
// committed by the Committer, then the index and the table brought up to date before the pipeline reports the
// batches committed. It runs inside the commit queue, on the writer's context.
func (w *Writer) commit(ctx context.Context, batches []*batch) (*Run, *CommitResult, error) {
	tbl := w.view.table()
	run, err := w.runs.form(tbl, batches)
	if err != nil {
		return nil, nil, err
	}
	placeOn := tbl
	if w.keys.wantsFresh() {
		// Others commit to the table: place the run on its head, so that the key index catches up with them
		// before the commit rather than after a fallback (a failed load costs the fallback, not the run).
		if fresh, err := w.env.cat.LoadTable(ctx, w.env.ident); err == nil {
			placeOn = w.env.tables.Loaded(fresh)
		}
	}
	dvs, err := w.keys.apply(ctx, placeOn, run, batches)
	var res *CommitResult
	if err == nil {
		res, err = w.runs.commit(ctx, run)
	}
	if err != nil {
		return run, nil, err
	}
	w.keys.committed(ctx, run, res, dvs)
	if res.Table != nil {
		_ = w.view.set(res.Table) // picks up schema changes made by others at the next batch
	}
	return run, res, nil
}

// runStage forms the Run of the batches the commit loop cut, hands it to the Committer and counts what the
// commits did. The commit loop drives it, one run at a time; its counters are atomic for Stats.
type runStage struct {
	env       *writerEnv
	committer Committer
	def       *catalogCommitter // the default committer (nil when WithCommitter replaced it)

	rows, commits, retries, conflicts, deleteFiles, rewritten atomic.Int64
	// lastAt is the latest commit's time (Unix ns), for Stats.LastCommit.
	lastAt atomic.Int64

	// bases are the positions the writer expects the table to hold per source partition (Run.PositionBases):
	// the one it resumed a partition from, then the one each of its commits left. basesMu guards them: resumes
	// come from the caller's goroutines (a rebalance callback), commits from the commit loop.
	basesMu sync.Mutex
	bases   map[string]string
}

// rebase makes positions (partition -> position, "" for none) the bases of their partitions.
func (r *runStage) rebase(positions map[string]string) {
	r.basesMu.Lock()
	defer r.basesMu.Unlock()
	if r.bases == nil {
		r.bases = map[string]string{}
	}
	maps.Copy(r.bases, positions)
}

// forget drops a partition's base: the writer released it (Source.Abort), so its next owner's commits are no
// longer this writer's business, and a later resume sets a new base.
func (r *runStage) forget(partition string) {
	r.basesMu.Lock()
	defer r.basesMu.Unlock()
	delete(r.bases, partition)
}

// basesOf returns the bases of the partitions of positions that have one (nil: none).
func (r *runStage) basesOf(positions map[string]string) map[string]string {
	r.basesMu.Lock()
	defer r.basesMu.Unlock()
	var out map[string]string
	for p := range positions {
		if b, ok := r.bases[p]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[p] = b
		}
	}
	return out
}

// newRunStage hands runs to c or, when c is nil, to a catalog committer of its own working from tbl, the table
// as NewWriter left it, that rewrites copy-on-write files as the writer encodes its own.
func newRunStage(env *writerEnv, c Committer, tbl *table.Table, cow cow.Config) *runStage {
	r := &runStage{env: env, committer: c}
	if c == nil {
		r.def = newCatalogCommitter(env.cat, tbl, env.log, env.timeout, env.tables)
		setCow(r.def, cow)
		if env.retryWaits != nil {
			r.def.MinWait, r.def.MaxWait = env.retryWaits[0], env.retryWaits[1]
		}
		r.def.Report = env.events
		r.committer = r.def
	}
	return r
}

// commit has the Committer commit run and counts it.
func (r *runStage) commit(ctx context.Context, run *Run) (*CommitResult, error) {
	res, err := r.committer.Commit(ctx, run)
	if err != nil {
		return nil, err
	}
	r.rebase(run.Positions)
	commit.SetCommitted(run, time.Now())
	r.lastAt.Store(commit.CommittedAt(run).UnixNano())
	r.commits.Add(1)
	r.rows.Add(run.Rows)
	if res.Attempts > 1 {
		r.retries.Add(int64(res.Attempts - 1))
	}
	r.conflicts.Add(int64(res.Conflicts))
	r.deleteFiles.Add(int64(commit.DeleteFileCount(run)))
	r.rewritten.Add(int64(res.FilesRewritten))
	return res, nil
}

// installed tells the default committer the table a transaction of the writer's own left, so that its next
// run builds on it.
func (r *runStage) installed(tbl *table.Table) {
	if r.def != nil {
		r.def.SetLatest(r.env.ident, tbl)
	}
}

// sideFiles is the default committer's cache of position side files (nil with WithCommitter).
func (r *runStage) sideFiles() *commit.PositionsCache {
	if r.def == nil {
		return nil
	}
	return r.def.SideFiles()
}

// form makes the run of consecutive staged batches the pipeline cut from its queue, on tbl, the table as the
// writer last saw it. Packed data files are decoded here (the error: one that does not decode).
func (r *runStage) form(tbl *table.Table, batches []*batch) (*Run, error) {
	e := r.env
	n := len(batches)
	run := &Run{
		Table: e.ident, Branch: e.branch, WriterID: e.id, StableID: e.stableID, Epoch: e.epoch,
		FirstSeq: batches[0].Seq, LastSeq: batches[n-1].Seq,
		BaseSnapshotID: commit.HeadID(tbl.Metadata(), e.branch),
	}
	commit.Describe(run, tbl.Metadata().Version(), tbl.Spec(), tbl.Schema())
	commit.SetFormed(run, time.Now())
	// Batches coalesced into one snapshot share its sequence number, and an equality delete does not reach rows
	// of its own sequence number: a batch that upserts or deletes a key written earlier in the run starts a new
	// segment, a snapshot of its own inside the same atomic catalog commit.
	// segWritten holds the key sets the segment's batches wrote, each checked in turn rather than merged: a
	// merge copied every batch's set, the last batch's (most runs have one) for nothing.
	var seg *Segment
	var segWritten []map[uint64]struct{}
	for _, b := range batches {
		if seg == nil || (len(b.enc.keyedSet) > 0 && keyindex.IntersectsAny(b.enc.keyedSet, segWritten)) {
			run.Segments = append(run.Segments, Segment{})
			seg = &run.Segments[len(run.Segments)-1]
			segWritten = segWritten[:0]
		}
		var err error
		if seg.DataFiles, err = b.dataFiles(seg.DataFiles); err != nil {
			return nil, err
		}
		seg.DeleteFiles = append(seg.DeleteFiles, b.enc.deletes...)
		seg.DeleteKeys = append(seg.DeleteKeys, b.keys.cowKeys...)
		b.SegIdx = len(run.Segments) - 1
		seg.LastSeq = b.Seq
		seg.Rows += b.Rows
		if len(b.enc.written) > 0 {
			segWritten = append(segWritten, b.enc.written)
		}
		run.Rows += b.Rows
		run.Bytes += b.Bytes
		if b.HasToken {
			run.Token, run.HasToken = b.Token, true
			seg.Token, seg.HasToken = b.Token, true
		}
		// Batches come in sequence order: a later batch's position of a partition replaces an earlier one's.
		for p, v := range b.Positions {
			if run.Positions == nil {
				run.Positions = map[string]string{}
			}
			run.Positions[p] = v
		}
	}
	run.PositionBases = r.basesOf(run.Positions)
	return run, nil
}

// committed follows a run's commit inside the commit queue: it is logged, its callback is queued (delivered in
// commit order outside every lock), then the maintenance due (the maintainer's schedule).
func (w *Writer) committed(ctx context.Context, run *Run, batches []*batch, res *CommitResult, _ int64) {
	ci := w.commitInfo(run, len(batches), res)
	w.env.log.Info("iceberg: committed", "table", w.env.ident, "snapshot", ci.SnapshotID, "rows", ci.Rows,
		"files", ci.Files, "duration", ci.Duration, "attempts", ci.Attempts)
	w.cbs.deliver(ci)
	w.maint.AfterCommit(ctx, commit.DeleteFileCount(run))
}

// loopDone: nothing is delivered after the commit loop; the callback goroutine ends once it is drained.
func (w *Writer) loopDone() { w.cbs.close(w) }
