package iceberg

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/icewriter/iceberg/internal/commit"
)

// catalogCommitter is the default Committer: one transaction per run, committed through commit.Env.Commit.
type catalogCommitter struct {
	commit.Env
	mu     sync.Mutex
	latest map[string]*table.Table // per table: as our last commit left it
	// loadFirst counts, per table, the runs of random writer IDs that still load the table before their first
	// attempt after one built on latest found the table moved (another writer commits there too).
	loadFirst map[string]int
	cow       cowConfig
	// sideFiles caches parsed position side files by path (immutable files, no attempt's state).
	sideFiles *commit.PositionsCache
}

// commitCall is what one Commit call learns over its attempts. It lives in the call, not in the committer, so
// that a coordinator may commit runs of different writers and tables through one committer at once.
type commitCall struct {
	// indexLost says whether the current attempt dropped the run's position deletes from the key index
	// (indexStale on the table it was built on). Each build sets it afresh: a first attempt built on a cached
	// table older than the head the run was placed on falls back, is rejected as stale, and the retry on the
	// reloaded head keeps the index's deletes; reporting the fallback for that commit left the index recording
	// nothing of it (on format version 2 the position delete files it superseded were never removed).
	indexLost bool
	// sentFallback: an attempt that reached the catalog fell back. When a later proof finds the run applied,
	// which attempt applied is not known, so the index must not trust its own deletes.
	sentFallback bool
	// cow is the current attempt's copy-on-write stage, with the files it wrote and replaced. Files of attempts
	// that did not apply are deleted once the run commits, and so are the replaced files of the attempt that did.
	cow *cowStage
	// positions is the side file of source positions the current attempt wrote ("": it changed none), and
	// positionsTable the table it was written for (its FileIO deletes it); sentPositions and unsentPositions are
	// the files of failed attempts that reached the catalog and of those that did not (see settlePositions).
	positions                      string
	positionsTable                 *table.Table
	sentPositions, unsentPositions []string
}

func newCatalogCommitter(cat catalog.Catalog, tbl *table.Table, log *slog.Logger, timeout time.Duration, tabs *commit.Tables) *catalogCommitter {
	c := &catalogCommitter{Env: commit.NewEnv(cat, tabs, log, timeout), latest: map[string]*table.Table{}, loadFirst: map[string]int{},
		cow:       cowConfig{parallel: 2, targetFileSize: DefaultTargetFileSize, rowGroupRows: DefaultRowGroupRows},
		sideFiles: commit.NewPositionsCache()}
	if tbl != nil {
		c.setLatest(tbl.Identifier(), tbl)
	}
	return c
}

func identKey(ident table.Identifier) string { return strings.Join(ident, "\x00") }

func (c *catalogCommitter) setLatest(ident table.Identifier, tbl *table.Table) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.latest[identKey(ident)] = tbl
}

func (c *catalogCommitter) getLatest(ident table.Identifier) *table.Table {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.latest[identKey(ident)]
}

// loadFirstRuns is how many runs of random writer IDs load the table before their first attempt once one
// built on the cached table was rejected: on a table other writers commit to, a fresh load keeps conflicts as
// rare as before; on a table this committer alone writes, the load is a catalog round trip per commit saved.
const loadFirstRuns = 16

// startFor returns the table a random writer ID's run builds its first attempt on: the table the committer's
// last commit left, unless other writers were seen committing lately (nil: load it).
func (c *catalogCommitter) startFor(ident table.Identifier) *table.Table {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := identKey(ident)
	if c.loadFirst[k] > 0 {
		c.loadFirst[k]--
		return nil
	}
	return c.latest[k]
}

// sawOthers notes that a run built on the cached table found that other writers had committed.
func (c *catalogCommitter) sawOthers(ident table.Identifier) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loadFirst[identKey(ident)] = loadFirstRuns
}

// Commit implements Committer.
//
// Before every attempt after the first, and before the first when the run may have been handed over already
// (a coordinator that re-sends a run), it establishes whether an earlier attempt applied (runOutcome): a
// stable writer's commit record answers that whatever snapshots were expired; otherwise the branch ancestry is
// walked for the run's marker, and a walk that cannot reach the head the first unproven attempt was built on
// (another writer expired it) leaves the outcome unknown: the run is never committed again and no attempt's
// files are deleted.
func (c *catalogCommitter) Commit(ctx context.Context, run *Run) (*CommitResult, error) {
	for p, v := range run.Positions {
		// A run from a coordinator's peer was never checked by a Writer.
		if err := checkPosition(p, v); err != nil {
			return nil, fmt.Errorf("iceberg: commit run %d..%d: %w", run.FirstSeq, run.LastSeq, err)
		}
	}
	res := &CommitResult{}
	call := &commitCall{}
	// Files written by earlier attempts. Once an attempt's CommitTable succeeds no earlier attempt applied
	// (each asserted the branch head, and a retry is only built after a reload proved the earlier ones did not
	// apply), so they are deleted then; when a lost reply applied, which attempt did is not known, and they
	// stay (orphans, never missing files).
	var earlier []ice.DataFile
	op := &commit.Op{
		Ident: run.Table, Branch: run.Branch, Kind: KindRun,
		What: fmt.Sprintf("commit run %d..%d", run.FirstSeq, run.LastSeq),
		// Staging the snapshot reads and writes manifests: a build is retried a few times on one head (a
		// storage hiccup), then the run fails (a file the table refuses will not change).
		MaxBuilds: maxBuildAttempts,
		Build: func(ctx context.Context, tbl *table.Table, _ int) (*table.Transaction, error) {
			tx, err := c.build(ctx, call, tbl, run)
			if err != nil {
				return nil, fmt.Errorf("iceberg: build commit for run %d..%d: %w", run.FirstSeq, run.LastSeq, err)
			}
			return tx, nil
		},
		ProveFirst: true,
		Prove: func(tbl *table.Table, base *int64, first bool) commit.Outcome {
			if first {
				base = run.BaseSnapshotID
			}
			id, o := runOutcome(tbl.Metadata(), run, base, first)
			if o == commit.Applied {
				// The key index cannot tell what changed between its base and a snapshot it never saw.
				res.SnapshotID = id
				res.IndexLost = call.indexLost || call.sentFallback || (run.IndexBase != nil && tbl.Metadata().SnapshotByID(id) == nil)
			}
			return o
		},
		Failed: func(sent bool) {
			earlier = append(earlier, call.cow.written...)
			call.sentFallback = call.sentFallback || (sent && call.indexLost)
			call.positionsAttemptFailed(sent)
		},
		Committed: func(ctx context.Context, _, next *table.Table) {
			c.removeFiles(ctx, next, append(earlier, call.cow.replaced...))
			res.IndexLost, res.FilesRewritten = call.indexLost, call.cow.rewritten
			if s := next.Metadata().SnapshotByName(run.Branch); s != nil {
				res.SnapshotID = s.SnapshotID
			}
		},
	}
	commit.NoteLocalWriter(run.WriterID)
	op.Yield = func(minWait, maxWait time.Duration) time.Duration {
		last := c.getLatest(run.Table) // the table this committer's last commit left: its streak
		if last == nil {
			return 0
		}
		return commit.YieldWait(last.Metadata(), run.Branch, run.WriterID, time.Now(), commit.LocalWriter, minWait, maxWait)
	}
	if run.StableID {
		op.FenceID, op.Epoch = run.WriterID, run.Epoch
		// A stable writer's commit record tells a lost reply's outcome whatever was expired: its first attempt
		// builds on the table its last commit left.
		op.Start = c.getLatest(run.Table)
	} else {
		// A writer without a record proves "not applied" only by walking down to the head its attempt was
		// built on, which other writers may expire: where they commit, the first attempt builds on a fresh
		// load, which keeps that head recent (and conflicts rarer). Where this committer alone commits, the
		// table its last commit left is the head, and building on it saves a load per commit. When it is not
		// (an attempt on it is rejected), the retry reloads at once and the next runs load first for a while.
		op.Start = c.startFor(run.Table)
	}
	r, err := c.Env.Commit(ctx, op)
	if !run.StableID && op.Start != nil && r.Conflicts > 0 {
		c.sawOthers(run.Table)
	}
	c.settlePositions(ctx, call, &r, res.SnapshotID, err)
	if err != nil {
		return nil, err
	}
	c.setLatest(run.Table, r.Table)
	res.Table, res.Attempts, res.Conflicts = r.Table, r.Attempts, r.Conflicts
	return res, nil
}

// runOutcome establishes whether the run is already in the table. A stable writer's commit record is
// authoritative while it is of the writer's epoch: every run of the epoch sets it in the same catalog commit,
// so it survives snapshot expiry. Otherwise (random writer IDs leave no per-ID property; a newer process with
// the same ID moved the record on) the branch ancestry is walked for the run's marker down to base, the head
// the first unproven attempt was built on; a walk that ends before it (expired parents) cannot tell. first is
// the check before the first attempt, for a run a coordinator re-sends: base is then the run's own base, and
// a walk that cannot reach it means nothing was sent yet as far as this committer knows.
func runOutcome(meta table.Metadata, run *Run, base *int64, first bool) (int64, commit.Outcome) {
	if run.StableID {
		r, ok := readCommitRecord(meta, run.WriterID)
		switch {
		case ok && r.Epoch == run.Epoch && r.Seq >= run.LastSeq:
			return r.SnapshotID, commit.Applied
		case !ok || r.Epoch <= run.Epoch:
			// No run of this epoch applied yet, or only earlier ones.
			return 0, commit.NotApplied
		}
		// A newer process took the ID over and committed: the record speaks of its runs. The marker still
		// tells whether this run applied before the takeover (the fence check then stops the writer).
	}
	id, found, reached := walkForMarker(meta, run, base)
	switch {
	case found:
		return id, commit.Applied
	case reached || first:
		return 0, commit.NotApplied
	default:
		return 0, commit.Unknown
	}
}

// removeFiles deletes data files no snapshot references (best effort: a file left behind is an orphan, never
// a reference to a missing file).
func (c *catalogCommitter) removeFiles(ctx context.Context, tbl *table.Table, files []ice.DataFile) {
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = f.FilePath()
	}
	removePaths(ctx, c.Log, tbl, paths)
}

// removePaths deletes files no snapshot references, by path, through tbl's FileIO (best effort, as
// removeFiles: failures are logged at debug level).
func removePaths(ctx context.Context, log *slog.Logger, tbl *table.Table, paths []string) {
	if len(paths) == 0 {
		return
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		log.Debug("iceberg: remove unreferenced files", "table", tbl.Identifier(), "err", err)
		return
	}
	for _, p := range paths {
		if err := fs.Remove(p); err != nil {
			log.Debug("iceberg: remove unreferenced file", "file", p, "err", err)
		}
	}
}

// maxBuildAttempts bounds the builds of a run (or a compaction) on one table head whose transaction cannot be
// staged.
const maxBuildAttempts = 5

// build stages the run's transaction on tbl.
func (c *catalogCommitter) build(ctx context.Context, call *commitCall, tbl *table.Table, run *Run) (*table.Transaction, error) {
	tx := tbl.NewTransactionOnBranch(run.Branch)
	segs := run.Segments
	call.indexLost = indexStale(tbl, run)
	if call.indexLost {
		// The attempt's copies of the segments: the run's stay as they are for the next attempt.
		segs = slices.Clone(segs)
		for i := range segs {
			if err := fallBack(ctx, tbl, run, &segs[i]); err != nil {
				return nil, err
			}
		}
	}
	call.cow = newCowStage(c.cow, run.Branch, segs)
	if err := c.stagePositions(ctx, call, tbl, run); err != nil {
		return nil, err
	}
	if len(segs) == 0 && call.positions != "" {
		// Positions need a snapshot to name them.
		segs = []Segment{{LastSeq: run.LastSeq}}
	}
	for i := range segs {
		seg := segs[i]
		if err := c.applySegment(ctx, call, tx, tbl, run, &seg, i, i == len(segs)-1); err != nil {
			return nil, err
		}
	}
	// The commit record, the checkpoint mirror and the positions mirror name the snapshot this commit makes,
	// which the transaction already knows: snapshot ids are chosen by the client.
	var pending *table.Snapshot
	if run.StableID || call.positions != "" {
		pending = pendingSnapshot(tx, run.Branch)
	}
	if props := positionsMirrorProp(call, run.Branch, pending); props != nil {
		if err := tx.SetProperties(props); err != nil {
			return nil, err
		}
	}
	if run.StableID {
		rec := commitRecord{Epoch: run.Epoch, Seq: run.LastSeq}
		if pending != nil {
			rec.SnapshotID = pending.SnapshotID
		}
		props := ice.Properties{propCommittedPrefix + run.WriterID: commit.MustJSON(rec)}
		if run.HasToken {
			m := checkpointMirror{Token: run.Token, Seq: run.LastSeq, Epoch: run.Epoch}
			if pending != nil {
				m.SnapshotID, m.SeqNumber = pending.SnapshotID, pending.SequenceNumber
			}
			props[propCkptPrefix+run.WriterID] = commit.MustJSON(m)
		}
		if err := tx.SetProperties(props); err != nil {
			return nil, err
		}
	}
	return tx, nil
}

// pendingSnapshot is the branch head a transaction would commit.
func pendingSnapshot(tx *table.Transaction, branch string) *table.Snapshot {
	staged, err := tx.StagedTable()
	if err != nil {
		return nil
	}
	return staged.Metadata().SnapshotByName(branch)
}

// applySegment stages one segment's snapshot in the transaction. The last segment's snapshot carries the run's
// marker (its last sequence number) and names the attempt's side file of positions, if any; each carries the
// newest token inside it. A copy-on-write segment is the attempt's cowStage's to stage.
func (c *catalogCommitter) applySegment(ctx context.Context, call *commitCall, tx *table.Transaction, tbl *table.Table, run *Run, seg *Segment, i int, last bool) error {
	props := ice.Properties{
		summaryWriterID: run.WriterID,
		summaryEpoch:    strconv.FormatInt(run.Epoch, 10),
		summarySeq:      strconv.FormatInt(seg.LastSeq, 10),
	}
	if seg.HasToken {
		props[summaryCheckpoint] = seg.Token
	}
	if last && call.positions != "" {
		props[summaryPositions] = call.positions
	}
	if len(seg.DVFiles) == 0 && len(seg.DeleteKeys) > 0 {
		return call.cow.apply(ctx, tx, i, seg, props)
	}
	call.cow.note(seg.DataFiles)
	if len(seg.DVFiles) > 0 && tbl.Metadata().Version() >= 3 {
		return tx.NewRowDelta(props).AddRows(seg.DataFiles...).AddDeletes(seg.DeleteFiles...).
			AddDeletes(seg.DVFiles...).RemoveDeletes(seg.RemovedDVs...).Commit(ctx)
	}
	if len(seg.DVFiles) > 0 {
		return stagePositionDeletes(ctx, tx, seg, props)
	}
	return appendSegment(ctx, tx, tbl.Metadata().Version(), seg, props)
}

// appendSegment stages a segment that only adds files: data files and equality deletes, or none (a segment of
// checkpoint-only batches still records its token: an empty snapshot carries the markers).
func appendSegment(ctx context.Context, tx *table.Transaction, formatVersion int, seg *Segment, props ice.Properties) error {
	switch {
	case len(seg.DeleteFiles) > 0 || (len(seg.DataFiles) > 0 && formatVersion >= 3):
		// v3 fast appends reject WriteRecords output ("missing first_row_id"); a row delta assigns row ids.
		return tx.NewRowDelta(props).AddRows(seg.DataFiles...).AddDeletes(seg.DeleteFiles...).Commit(ctx)
	case len(seg.DataFiles) > 0:
		return tx.AddDataFiles(ctx, seg.DataFiles, props, table.WithoutDuplicateCheck())
	default:
		return tx.AddFiles(ctx, nil, props, true)
	}
}

// walkForMarker walks the branch ancestry from the head down to base (nil: the table's first snapshot) looking
// for the run's marker. reached reports that the walk got there: only then does a missing marker mean "not
// applied". Snapshot expiry leaves a retained snapshot whose parent is gone; a walk that stops there could
// have missed the marker.
func walkForMarker(meta table.Metadata, run *Run, base *int64) (id int64, found, reached bool) {
	epoch, seq := strconv.FormatInt(run.Epoch, 10), strconv.FormatInt(run.LastSeq, 10)
	snap := meta.SnapshotByName(run.Branch)
	if snap == nil {
		return 0, false, base == nil
	}
	seen := map[int64]bool{}
	for snap != nil && !seen[snap.SnapshotID] {
		seen[snap.SnapshotID] = true
		if base != nil && snap.SnapshotID == *base {
			return 0, false, true
		}
		w, _ := commit.SummaryProp(snap, summaryWriterID)
		e, _ := commit.SummaryProp(snap, summaryEpoch)
		q, _ := commit.SummaryProp(snap, summarySeq)
		if w == run.WriterID && e == epoch && q == seq {
			return snap.SnapshotID, true, true
		}
		if snap.ParentSnapshotID == nil {
			return 0, false, base == nil
		}
		snap = meta.SnapshotByID(*snap.ParentSnapshotID)
	}
	return 0, false, false
}

// writeKeyDeletes writes equality delete files for key-only records.
func writeKeyDeletes(ctx context.Context, tbl *table.Table, fieldIDs []int, recs []arrow.RecordBatch) ([]ice.DataFile, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	seq := func(yield func(arrow.RecordBatch, error) bool) {
		for _, r := range recs {
			r.Retain() // the writer releases what it consumes; a retry needs the keys again
			if !yield(r, nil) {
				return
			}
		}
	}
	files, err := tbl.NewTransaction().WriteEqualityDeletes(ctx, fieldIDs, seq)
	if err != nil {
		return nil, fmt.Errorf("iceberg: write equality deletes: %w", err)
	}
	return files, nil
}
