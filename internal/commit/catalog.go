package commit

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
)

// CatalogCommitter is the default Committer (the root's NewCatalogCommitter): one transaction per run,
// committed through Env.Commit.
type CatalogCommitter struct {
	Env
	mu     sync.Mutex
	latest map[string]*table.Table // per table: as our last commit left it
	// loadFirst counts, per table, the runs of random writer IDs that still load the table before their first
	// attempt after one built on latest found the table moved (another writer commits there too).
	loadFirst map[string]int
	// NewCow starts an attempt's copy-on-write stage for the run's segments (the root's cow stage).
	NewCow func(branch string, segs []Segment) CowAttempt
	// sideFiles caches parsed position side files by path (immutable files, no attempt's state).
	sideFiles *PositionsCache
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
	cow CowAttempt
	// positions is the side file of source positions the current attempt wrote ("": it changed none), and
	// positionsTable the table it was written for (its FileIO deletes it); sentPositions and unsentPositions are
	// the files of failed attempts that reached the catalog and of those that did not (see settlePositions).
	positions                      string
	positionsTable                 *table.Table
	sentPositions, unsentPositions []string
}

// CowAttempt is one attempt's copy-on-write stage (the root's cowStage): it stages the segments that rewrite
// the files holding their keys, and reports the files it wrote and replaced.
type CowAttempt interface {
	// Apply stages copy-on-write segment i in tx with the snapshot summary props.
	Apply(ctx context.Context, tx *table.Transaction, i int, seg *Segment, props ice.Properties) error
	// Note records the data files a segment that is not copy-on-write adds.
	Note(files []ice.DataFile)
	// Written are the data files the attempt wrote, Replaced the run's files they replaced, Rewritten the
	// count of the table's files the rewrites replaced.
	Written() []ice.DataFile
	Replaced() []ice.DataFile
	Rewritten() int
}

// NewCatalogCommitter is the default committer, on tbl (nil: none loaded yet) when the writer already loaded
// it. The caller sets NewCow before the first Commit.
func NewCatalogCommitter(cat catalog.Catalog, tbl *table.Table, log *slog.Logger, timeout time.Duration, tabs *Tables) *CatalogCommitter {
	c := &CatalogCommitter{Env: NewEnv(cat, tabs, log, timeout), latest: map[string]*table.Table{}, loadFirst: map[string]int{},
		sideFiles: NewPositionsCache()}
	if tbl != nil {
		c.SetLatest(tbl.Identifier(), tbl)
	}
	return c
}

// IdentKey is a table identifier as a map key.
func IdentKey(ident table.Identifier) string { return strings.Join(ident, "\x00") }

// SideFiles is the committer's cache of position side files.
func (c *CatalogCommitter) SideFiles() *PositionsCache { return c.sideFiles }

// SetLatest records tbl as the table the committer's next run on ident builds on (a transaction of the
// writer's own left it).
func (c *CatalogCommitter) SetLatest(ident table.Identifier, tbl *table.Table) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.latest[IdentKey(ident)] = tbl
}

func (c *CatalogCommitter) getLatest(ident table.Identifier) *table.Table {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.latest[IdentKey(ident)]
}

// loadFirstRuns is how many runs of random writer IDs load the table before their first attempt once one
// built on the cached table was rejected: on a table other writers commit to, a fresh load keeps conflicts as
// rare as before; on a table this committer alone writes, the load is a catalog round trip per commit saved.
const loadFirstRuns = 16

// startFor returns the table a random writer ID's run builds its first attempt on: the table the committer's
// last commit left, unless other writers were seen committing lately (nil: load it).
func (c *CatalogCommitter) startFor(ident table.Identifier) *table.Table {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := IdentKey(ident)
	if c.loadFirst[k] > 0 {
		c.loadFirst[k]--
		return nil
	}
	return c.latest[k]
}

// sawOthers notes that a run built on the cached table found that other writers had committed.
func (c *CatalogCommitter) sawOthers(ident table.Identifier) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loadFirst[IdentKey(ident)] = loadFirstRuns
}

// Commit implements Committer.
//
// Before every attempt after the first, and before the first when the run may have been handed over already
// (a coordinator that re-sends a run), it establishes whether an earlier attempt applied (runOutcome): a
// stable writer's commit record answers that whatever snapshots were expired; otherwise the branch ancestry is
// walked for the run's marker, and a walk that cannot reach the head the first unproven attempt was built on
// (another writer expired it) leaves the outcome unknown: the run is never committed again and no attempt's
// files are deleted.
func (c *CatalogCommitter) Commit(ctx context.Context, run *Run) (*CommitResult, error) {
	for p, v := range run.Positions {
		// A run from a coordinator's peer was never checked by a Writer.
		if err := CheckPosition(p, v); err != nil {
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
	op := &Op{
		Ident: run.Table, Branch: run.Branch, Kind: KindRun,
		What: fmt.Sprintf("commit run %d..%d", run.FirstSeq, run.LastSeq),
		// Staging the snapshot reads and writes manifests: a build is retried a few times on one head (a
		// storage hiccup), then the run fails (a file the table refuses will not change).
		MaxBuilds: MaxBuildAttempts,
		Build: func(ctx context.Context, tbl *table.Table, _ int) (*table.Transaction, error) {
			tx, err := c.build(ctx, call, tbl, run)
			if err != nil {
				return nil, fmt.Errorf("iceberg: build commit for run %d..%d: %w", run.FirstSeq, run.LastSeq, err)
			}
			return tx, nil
		},
		ProveFirst: true,
		Prove: func(tbl *table.Table, base *int64, first bool) Outcome {
			if first {
				base = run.BaseSnapshotID
			}
			id, o := runOutcome(tbl.Metadata(), run, base, first)
			if o == Applied {
				// The key index cannot tell what changed between its base and a snapshot it never saw.
				res.SnapshotID = id
				res.IndexLost = call.indexLost || call.sentFallback || (run.IndexBase != nil && tbl.Metadata().SnapshotByID(id) == nil)
			}
			return o
		},
		Failed: func(sent bool) {
			earlier = append(earlier, call.cow.Written()...)
			call.sentFallback = call.sentFallback || (sent && call.indexLost)
			call.positionsAttemptFailed(sent)
		},
		Committed: func(ctx context.Context, _, next *table.Table) {
			c.removeFiles(ctx, next, append(earlier, call.cow.Replaced()...))
			res.IndexLost, res.FilesRewritten = call.indexLost, call.cow.Rewritten()
			if s := next.Metadata().SnapshotByName(run.Branch); s != nil {
				res.SnapshotID = s.SnapshotID
			}
		},
	}
	NoteLocalWriter(run.WriterID)
	op.Yield = func(minWait, maxWait time.Duration) time.Duration {
		last := c.getLatest(run.Table) // the table this committer's last commit left: its streak
		if last == nil {
			return 0
		}
		return YieldWait(last.Metadata(), run.Branch, run.WriterID, time.Now(), LocalWriter, minWait, maxWait)
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
		// table its last commit left is the head, and building on it saves a load per  When it is not
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
	c.SetLatest(run.Table, r.Table)
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
func runOutcome(meta table.Metadata, run *Run, base *int64, first bool) (int64, Outcome) {
	if run.StableID {
		r, ok := ReadCommitRecord(meta, run.WriterID)
		switch {
		case ok && r.Epoch == run.Epoch && r.Seq >= run.LastSeq:
			return r.SnapshotID, Applied
		case !ok || r.Epoch <= run.Epoch:
			// No run of this epoch applied yet, or only earlier ones.
			return 0, NotApplied
		}
		// A newer process took the ID over and committed: the record speaks of its runs. The marker still
		// tells whether this run applied before the takeover (the fence check then stops the writer).
	}
	id, found, reached := walkForMarker(meta, run, base)
	switch {
	case found:
		return id, Applied
	case reached || first:
		return 0, NotApplied
	default:
		return 0, Unknown
	}
}

// removeFiles deletes data files no snapshot references (best effort: a file left behind is an orphan, never
// a reference to a missing file).
func (c *CatalogCommitter) removeFiles(ctx context.Context, tbl *table.Table, files []ice.DataFile) {
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = f.FilePath()
	}
	RemovePaths(ctx, c.Log, tbl, paths)
}

// RemovePaths deletes files no snapshot references, by path, through tbl's FileIO (best effort, as
// removeFiles: failures are logged at debug level).
func RemovePaths(ctx context.Context, log *slog.Logger, tbl *table.Table, paths []string) {
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

// MaxBuildAttempts bounds the builds of a run (or a compaction) on one table head whose transaction cannot be
// staged.
const MaxBuildAttempts = 5

// build stages the run's transaction on tbl.
func (c *CatalogCommitter) build(ctx context.Context, call *commitCall, tbl *table.Table, run *Run) (*table.Transaction, error) {
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
	call.cow = c.NewCow(run.Branch, segs)
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
		rec := CommitRecord{Epoch: run.Epoch, Seq: run.LastSeq}
		if pending != nil {
			rec.SnapshotID = pending.SnapshotID
		}
		props := ice.Properties{CommittedPropPrefix + run.WriterID: MustJSON(rec)}
		if run.HasToken {
			m := CheckpointMirror{Token: run.Token, Seq: run.LastSeq, Epoch: run.Epoch}
			if pending != nil {
				m.SnapshotID, m.SeqNumber = pending.SnapshotID, pending.SequenceNumber
			}
			props[CheckpointPropPrefix+run.WriterID] = MustJSON(m)
		}
		if err := tx.SetProperties(props); err != nil {
			return nil, err
		}
	}
	return tx, nil
}

// pendingSnapshot is the branch head a transaction would
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
func (c *CatalogCommitter) applySegment(ctx context.Context, call *commitCall, tx *table.Transaction, tbl *table.Table, run *Run, seg *Segment, i int, last bool) error {
	props := ice.Properties{
		SummaryWriterID: run.WriterID,
		SummaryEpoch:    strconv.FormatInt(run.Epoch, 10),
		SummarySeq:      strconv.FormatInt(seg.LastSeq, 10),
	}
	if seg.HasToken {
		props[SummaryCheckpoint] = seg.Token
	}
	if last && call.positions != "" {
		props[SummaryPositions] = call.positions
	}
	if len(seg.DVFiles) == 0 && len(seg.DeleteKeys) > 0 {
		return call.cow.Apply(ctx, tx, i, seg, props)
	}
	call.cow.Note(seg.DataFiles)
	if len(seg.DVFiles) > 0 && tbl.Metadata().Version() >= 3 {
		return tx.NewRowDelta(props).AddRows(seg.DataFiles...).AddDeletes(seg.DeleteFiles...).
			AddDeletes(seg.DVFiles...).RemoveDeletes(seg.RemovedDVs...).Commit(ctx)
	}
	if len(seg.DVFiles) > 0 {
		return stagePositionDeletes(ctx, tx, seg, props)
	}
	return AppendSegment(ctx, tx, tbl.Metadata().Version(), seg, props)
}

// AppendSegment stages a segment that only adds files: data files and equality deletes, or none (a segment of
// checkpoint-only batches still records its token: an empty snapshot carries the markers).
func AppendSegment(ctx context.Context, tx *table.Transaction, formatVersion int, seg *Segment, props ice.Properties) error {
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
		w, _ := SummaryProp(snap, SummaryWriterID)
		e, _ := SummaryProp(snap, SummaryEpoch)
		q, _ := SummaryProp(snap, SummarySeq)
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

// WriteKeyDeletes writes equality delete files for key-only records.
func WriteKeyDeletes(ctx context.Context, tbl *table.Table, fieldIDs []int, recs []arrow.RecordBatch) ([]ice.DataFile, error) {
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

// Size caps of one position: a partition key and a position are at most this many bytes.
const (
	maxPositionPartitionBytes = 1 << 10
	maxPositionBytes          = 1 << 10
)

// CheckPosition validates one partition's position before it is accepted: both at most 1 KiB (every commit
// that changes a position rewrites the table's whole map) and valid UTF-8 (the side file is JSON, which would
// silently replace invalid bytes). The error names the partition and wraps ErrInvalidPosition.
func CheckPosition(partition, position string) error {
	switch {
	case len(partition) > maxPositionPartitionBytes:
		return fmt.Errorf("%w: partition %s: key of %d bytes, at most %d", ErrInvalidPosition, QuoteShort(partition),
			len(partition), maxPositionPartitionBytes)
	case len(position) > maxPositionBytes:
		return fmt.Errorf("%w: partition %s: position of %d bytes, at most %d", ErrInvalidPosition, QuoteShort(partition),
			len(position), maxPositionBytes)
	case !utf8.ValidString(partition):
		return fmt.Errorf("%w: partition %s: key is not valid UTF-8", ErrInvalidPosition, QuoteShort(partition))
	case !utf8.ValidString(position):
		return fmt.Errorf("%w: partition %s: position is not valid UTF-8", ErrInvalidPosition, QuoteShort(partition))
	}
	return nil
}

// QuoteShort quotes s for an error message, cut to its first 64 bytes.
func QuoteShort(s string) string {
	if len(s) <= 64 {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q...", s[:64])
}

// stagePositions is an attempt's share of a run's positions: it merges the run's positions into those of the
// head the attempt builds on and, when that changes any, writes the merged map as a new side file for the
// attempt's snapshot to name (call.positions). A side file that cannot be read fails the build: committing on
// an empty map would drop every other partition's position.
func (c *CatalogCommitter) stagePositions(ctx context.Context, call *commitCall, tbl *table.Table, run *Run) error {
	call.positions = ""
	if len(run.Positions) == 0 {
		return nil
	}
	base := map[string]string{}
	if ref, ok := FindPositions(tbl.Metadata(), run.Branch); ok {
		var err error
		if base, err = c.sideFiles.Read(ctx, tbl, ref.Path); err != nil {
			return err
		}
	}
	if err := checkPositionBases(run, base); err != nil {
		return err
	}
	changed := false
	for p, v := range run.Positions {
		if cur, ok := base[p]; !ok || cur != v {
			changed = true
			break
		}
	}
	if !changed {
		return nil
	}
	merged := maps.Clone(base)
	maps.Copy(merged, run.Positions)
	path, err := WritePositionsFile(ctx, tbl, merged)
	if path != "" {
		call.positions, call.positionsTable = path, tbl
	}
	if err != nil {
		return err
	}
	c.sideFiles.Put(path, merged)
	return nil
}

// checkPositionBases refuses a run whose partitions moved on the table (head, the positions of the head the
// attempt builds on) since the writer resumed or last committed them: another writer committed them, and this
// run's rows of them are already on the table or were skipped by it. The error names the partition (the first
// in name order, so that retries report the same one) and wraps ErrPositionMoved.
func checkPositionBases(run *Run, head map[string]string) error {
	for _, p := range slices.Sorted(maps.Keys(run.PositionBases)) {
		if want, got := run.PositionBases[p], head[p]; got != want {
			return fmt.Errorf("%w: partition %s is at %s on the table, this writer (%s) resumed or last committed "+
				"it at %s", ErrPositionMoved, QuoteShort(p), quotePosition(got), run.WriterID, quotePosition(want))
		}
	}
	return nil
}

// quotePosition quotes a position for an error message; the empty one is "no position".
func quotePosition(p string) string {
	if p == "" {
		return "no position"
	}
	return QuoteShort(p)
}

// positionsMirrorProp is the mirror property the attempt sets beside its snapshot (pending, the branch head
// it commits), when it wrote a side file.
func positionsMirrorProp(call *commitCall, branch string, pending *table.Snapshot) ice.Properties {
	if call.positions == "" {
		return nil
	}
	m := PositionsMirror{Path: call.positions}
	if pending != nil {
		m.SnapshotID, m.SeqNumber = pending.SnapshotID, pending.SequenceNumber
	}
	return ice.Properties{PositionsPropPrefix + branch: MustJSON(m)}
}

// positionsAttemptFailed files the side file of an attempt that failed: one never sent is provably not
// committed; a sent one waits for the call's outcome.
func (call *commitCall) positionsAttemptFailed(sent bool) {
	if call.positions == "" {
		return
	}
	if sent {
		call.sentPositions = append(call.sentPositions, call.positions)
	} else {
		call.unsentPositions = append(call.unsentPositions, call.positions)
	}
	call.positions = ""
}

// settlePositions deletes the side files of the call's attempts that provably did not commit, once the call
// ended: those never sent; after a commit, those of the earlier attempts; after a proof that an attempt
// applied, those its snapshot (applied, when still in the table) does not name. Otherwise sent files are kept.
func (c *CatalogCommitter) settlePositions(ctx context.Context, call *commitCall, res *Result, applied int64, err error) {
	drop := call.unsentPositions
	if err == nil && res.How == Committed {
		drop = append(drop, call.sentPositions...)
	} else if err == nil && res.How == Proven {
		if s := res.Table.Metadata().SnapshotByID(applied); s != nil {
			keep, _ := SummaryProp(s, SummaryPositions)
			for _, p := range call.sentPositions {
				if p != keep {
					drop = append(drop, p)
				}
			}
		}
	}
	if len(drop) > 0 && call.positionsTable != nil {
		RemovePaths(ctx, c.Log, call.positionsTable, drop)
	}
}

// indexStale reports whether a run's deletion vectors cannot be committed on tbl: someone other than the run's
// writer added or removed files since the snapshot its key index covers, so a key the index did not place may
// now exist and a vector's data file may be gone. The committer then falls back to equality deletes
// (fallBack) and reports CommitResult.IndexLost.
func indexStale(tbl *table.Table, run *Run) bool {
	return run.IndexBase != nil && ForeignSince(tbl.Metadata(), run.Branch, *run.IndexBase, run.WriterID)
}

// fallBack replaces a segment's position deletes from the key index (DVFiles, RemovedDVs), which cannot be
// committed on tbl (indexStale), by what run.Deletes allows for every key the segment upserts or deletes (its
// FallbackKeys), which is right whatever changed: equality deletes on the key (AnyDeleteFiles), a copy-on-write
// rewrite of the files holding them (NoEqualityDeletes), or ErrEqualityDeletesRefused. seg is the committer's
// copy of a segment: its slices are replaced, never appended to in place.
func fallBack(ctx context.Context, tbl *table.Table, run *Run, seg *Segment) error {
	switch run.Deletes {
	case NoEqualityDeletes, NoDeleteFiles:
		seg.DeleteKeys = append(slices.Clone(seg.DeleteKeys), seg.FallbackKeys...)
	case NoEqualityDeletesOrFail:
		if len(seg.FallbackKeys) > 0 {
			return fmt.Errorf("%w: the table changed outside this writer since its key index was built", ErrEqualityDeletesRefused)
		}
	default:
		files, err := WriteKeyDeletes(ctx, tbl, run.KeyFieldIDs, seg.FallbackKeys)
		if err != nil {
			return err
		}
		seg.DeleteFiles = append(slices.Clone(seg.DeleteFiles), files...)
	}
	seg.DVFiles, seg.RemovedDVs = nil, nil
	return nil
}

// ForeignSince reports whether a snapshot after base, made by someone other than writerID, added or removed
// files (maintenance that only rewrites manifests does not count).
func ForeignSince(meta table.Metadata, branch string, base int64, writerID string) bool {
	foreign := false
	found := false
	Ancestors(meta, branch, func(s *table.Snapshot) bool {
		if s.SnapshotID == base {
			found = true
			return true
		}
		// The writer's own commits keep the index current; so do its compactions, which move rows to new
		// files: rebase moves the index's base past each one it committed, and one whose commit returned an
		// error (its reply may be lost) drops the index. A compaction under this ID met here is therefore
		// another process's with the same ID (a zombie), and it moved rows the index places.
		if w, _ := SummaryProp(s, SummaryWriterID); w == writerID {
			if op, _ := SummaryProp(s, SummaryOperation); op != OpCompact {
				return false
			}
		}
		for _, k := range []string{"added-data-files", "added-delete-files", "deleted-data-files", "removed-delete-files"} {
			if v, _ := SummaryProp(s, k); v != "" && v != "0" {
				foreign = true
				return true
			}
		}
		return false
	})
	return foreign || (!found && base >= 0)
}

// stagePositionDeletes stages a segment whose position deletes are position delete files (format version 2):
// a row delta adds its rows and delete files, then, when they supersede this writer's earlier files of the same
// data files (seg.RemovedDVs), a rewrite snapshot removes those in the same catalog  iceberg-go's row
// delta removes only deletion vectors (v3); a rewrite ("replace": no logical change, which changelog readers
// skip) may remove any delete file, and removing one whose positions a live file of a later sequence number
// repeats changes no row. Both snapshots carry the segment's summary, so the head names the run's marker.
func stagePositionDeletes(ctx context.Context, tx *table.Transaction, seg *Segment, props ice.Properties) error {
	if err := tx.NewRowDelta(props).AddRows(seg.DataFiles...).AddDeletes(seg.DeleteFiles...).
		AddDeletes(seg.DVFiles...).Commit(ctx); err != nil {
		return err
	}
	if len(seg.RemovedDVs) == 0 {
		return nil
	}
	rw := tx.NewRewrite(props)
	for _, f := range seg.RemovedDVs {
		rw.DeleteFile(f)
	}
	if err := rw.Commit(ctx); err != nil {
		return fmt.Errorf("iceberg: remove superseded position delete files: %w", err)
	}
	return nil
}
