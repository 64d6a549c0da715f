package maintain

import (
	"context"
	"fmt"
	"maps"
	"math"
	"strconv"
	"time"

	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/compaction"
	"github.com/google/uuid"

	"github.com/icewriter/iceberg/internal/commit"
	"github.com/icewriter/iceberg/internal/encode"
)

// CompactResult reports what Compact rewrote.
type CompactResult struct {
	RewrittenDataFiles   int
	AddedDataFiles       int
	RemovedDeleteFiles   int // equality and position delete files expunged
	BytesBefore          int64
	BytesAfter           int64
	SnapshotID           int64 // the rewrite snapshot, 0 when there was nothing to do
	Attempts             int
	DeleteFilesRemaining int // delete files still live after the rewrite
}

// Compact is the user's compaction (the root's Writer.Compact): the data files that delete files apply to (and
// small data files beside them) rewritten with the deletes applied, and the delete files that become dead
// expunged, in one atomic replace inside the writer's commit queue.
func (m *Maintainer) Compact(ctx context.Context) (CompactResult, error) {
	if err := m.env.Usable(); err != nil {
		return CompactResult{}, err
	}
	defer m.env.EnterQueue()()
	start := time.Now()
	res, err := m.compactLocked(ctx, false)
	err = m.env.Redact(err) // reads and writes data files: storage errors may quote presigned URLs
	m.env.OnCompaction(start, false, false, res, err)
	return res, err
}

// compactAttempts bounds the attempts of one compaction: it holds the commit queue.
const compactAttempts = 10

// compactLocked runs one compaction through the writer's transaction helper; the caller is in the commit queue
// (Env.EnterQueue). smallOnly plans the small-file policy: only files under an eighth of the target size, of
// the lowest size tier holding smallFileTierFanIn of them (smallFileTier), are merged; delete files alone pull
// no right-sized file in.
//
// A concurrent commit by another writer makes the replace fail its requirement; the retry plans again from the
// reloaded table. The rewrite snapshot carries a nonce of this call, the proof that an attempt whose reply was
// lost applied. The key index is dropped when an attempt's commit errs (where rows are then is not known),
// and moved to the rewrite's new files when it commits.
func (m *Maintainer) compactLocked(ctx context.Context, smallOnly bool) (CompactResult, error) {
	nonce := uuid.NewString()
	var res CompactResult
	var rewritten map[string]struct{}
	op := &commit.Op{
		What: "compact", Kind: KindCompaction, MaxAttempts: compactAttempts, MaxBuilds: m.env.MaxBuilds,
		Build: func(ctx context.Context, tbl *table.Table, _ int) (*table.Transaction, error) {
			var tx *table.Transaction
			var err error
			tx, res, rewritten, err = m.planCompaction(ctx, tbl, smallOnly, nonce)
			return tx, err
		},
		Prove: commit.NonceProof(m.env.Branch, SummaryNonce, nonce, nil),
		Failed: func(sent bool) {
			if sent {
				m.env.DropIndex("a compaction's commit returned an error (its reply may be lost)")
			}
		},
		Committed: func(ctx context.Context, pre, next *table.Table) {
			// The rewrite moved rows to new files: move the key index to them, or drop it.
			m.env.RebaseIndex(ctx, pre, next, rewritten)
		},
	}
	r, err := m.env.Commit(ctx, op)
	if err != nil {
		return CompactResult{Attempts: r.Attempts}, err
	}
	if r.How == commit.Nothing {
		return CompactResult{Attempts: r.Attempts}, nil
	}
	res.Attempts = r.Attempts
	if s, ok := commit.FindNonce(r.Table.Metadata(), m.env.Branch, SummaryNonce, nonce); ok {
		res.SnapshotID = s.SnapshotID
		if s.Summary != nil {
			fmt.Sscan(s.Summary.Properties["total-delete-files"], &res.DeleteFilesRemaining)
		}
	}
	return res, nil
}

// planCompaction stages a compaction on tbl: nil when there is nothing worth rewriting. It returns what the
// rewrite does and the data files it rewrites.
func (m *Maintainer) planCompaction(ctx context.Context, tbl *table.Table, smallOnly bool, nonce string) (*table.Transaction, CompactResult, map[string]struct{}, error) {
	pl, err := m.planRewrite(ctx, tbl, smallOnly)
	if err != nil || pl == nil {
		return nil, CompactResult{}, nil, err
	}
	tx := pl.writeTable.NewTransactionOnBranch(m.env.Branch)
	props := ice.Properties{commit.SummaryWriterID: m.env.WriterID, commit.SummaryOperation: commit.OpCompact, SummaryNonce: nonce}
	if m.env.Shred != nil {
		res, err := rewriteShredded(ctx, &m.env, pl.writeTable, tx, pl, props)
		if err != nil {
			return nil, CompactResult{}, nil, fmt.Errorf("iceberg: compact: rewrite: %w", err)
		}
		if res.AddedDataFiles == 0 && res.RewrittenDataFiles == 0 {
			return nil, CompactResult{}, nil, nil
		}
		return tx, res, pl.rewritten, nil
	}
	rr, err := tx.RewriteDataFiles(ctx, pl.groups, table.RewriteDataFilesOptions{
		SnapshotProps:            props,
		ExtraDeleteFilesToRemove: pl.deadEq,
		GroupOptions:             m.groupOptions(),
	})
	if err != nil {
		return nil, CompactResult{}, nil, fmt.Errorf("iceberg: compact: rewrite: %w", err)
	}
	return tx, CompactResult{
		RewrittenDataFiles: rr.RemovedDataFiles, AddedDataFiles: rr.AddedDataFiles,
		RemovedDeleteFiles: rr.RemovedEqualityDeleteFiles + rr.RemovedPositionDeleteFiles + rr.RemovedDeletionVectorFiles,
		BytesBefore:        rr.BytesBefore, BytesAfter: rr.BytesAfter,
	}, pl.rewritten, nil
}

// rewritePlan is a compaction planned on one snapshot of the table: the groups of files to rewrite, the files
// they rewrite and the equality deletes the rewrite leaves dead.
type rewritePlan struct {
	base       *table.Table    // the table planned on
	snap       *table.Snapshot // its head on the writer's branch
	writeTable *table.Table    // base, with the key columns' bloom filters set when the writer has keys
	groups     []table.CompactionTaskGroup
	rewritten  map[string]struct{}
	deadEq     []ice.DataFile
}

// groupOptions are the output settings of a compaction group: the writer's target size and row groups.
func (m *Maintainer) groupOptions() []table.CompactionGroupOption {
	return []table.CompactionGroupOption{
		table.WithCompactionTargetFileSize(m.env.TargetFileSize),
		table.WithCompactionParquetRowGroupLimit(m.env.RowGroupRows),
	}
}

// planRewrite plans a compaction on tbl (nil: nothing worth rewriting). smallOnly is the small-file policy (see
// compactLocked).
func (m *Maintainer) planRewrite(ctx context.Context, tbl *table.Table, smallOnly bool) (*rewritePlan, error) {
	snap := tbl.Metadata().SnapshotByName(m.env.Branch)
	if snap == nil {
		return nil, nil
	}
	scan, err := tbl.Scan(table.WithSnapshotID(snap.SnapshotID)).UseRef(m.env.Branch)
	if err != nil {
		return nil, err
	}
	tasks, err := scan.PlanFiles(ctx)
	if err != nil {
		return nil, fmt.Errorf("iceberg: compact: plan: %w", err)
	}
	cfg := compaction.DefaultConfig()
	cfg.TargetFileSizeBytes = m.env.TargetFileSize
	cfg.MinFileSizeBytes = m.env.TargetFileSize * 3 / 4
	cfg.MaxFileSizeBytes = m.env.TargetFileSize * 9 / 5
	cfg.DeleteFileThreshold = 1
	cfg.MinInputFiles = 1
	var plan compaction.Plan
	if smallOnly {
		if plan, err = smallOnlyPlan(cfg, tasks, m.cfg.DeleteRatio); err != nil {
			return nil, err
		}
	} else if plan, err = cfg.PlanCompaction(tasks); err != nil {
		return nil, err
	}
	pl := &rewritePlan{base: tbl, snap: snap, rewritten: map[string]struct{}{}}
	withDeletes := false
	var groupRows int64 // the rows of the largest group: what one output row group holds at most
	for _, g := range plan.Groups {
		pl.groups = append(pl.groups, table.CompactionTaskGroup{PartitionKey: g.PartitionKey, Tasks: g.Tasks, TotalSizeBytes: g.TotalSizeBytes})
		var rows int64
		for _, t := range g.Tasks {
			rows += t.File.Count()
		}
		groupRows = max(groupRows, rows)
		for _, t := range g.Tasks {
			pl.rewritten[t.File.FilePath()] = struct{}{}
			withDeletes = withDeletes || len(t.DeleteFiles)+len(t.EqualityDeleteFiles)+len(t.DeletionVectorFiles) > 0
		}
	}
	if len(pl.groups) == 0 || (!withDeletes && len(pl.rewritten) < 2) {
		return nil, nil
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	if pl.deadEq, err = compaction.CollectDeadEqualityDeletesWithSpecs(ctx, fs, tbl.Metadata(), snap, pl.rewritten); err != nil {
		return nil, fmt.Errorf("iceberg: compact: dead equality deletes: %w", err)
	}
	// Write the output as the writer writes its files: key bloom filters, its Parquet write batch, and the
	// shredding inference over every row of a group (encode.ShredInference).
	set := encode.KeyBloomProperties(tbl.Properties(), m.env.KeyNames, min(groupRows, int64(m.env.RowGroupRows)))
	var inputs []ice.DataFile
	for _, g := range pl.groups {
		for _, t := range g.Tasks {
			inputs = append(inputs, t.File)
		}
	}
	n, err := encode.RewriteBatchRows(fs, tbl.Properties(), inputs)
	if err != nil { // the rewrite reads the same file: it would fail too
		return nil, fmt.Errorf("iceberg: compact: read an input file's footer: %w", err)
	}
	if set == nil {
		set = ice.Properties{}
	}
	if n > 0 {
		set[table.ParquetPageRowLimitKey] = strconv.Itoa(n)
	}
	maps.Copy(set, encode.ShredInference(tbl.Properties(), tbl.Schema(), groupRows))
	if pl.writeTable, err = encode.WithWriteProperties(tbl, set); err != nil {
		return nil, err
	}
	// The rewrite reads every column of its inputs: each file (and its delete files) in one request.
	sizes := map[string]int64{}
	for _, g := range pl.groups {
		for _, t := range g.Tasks {
			sizes[t.File.FilePath()] = t.File.FileSizeBytes()
			for _, files := range [][]ice.DataFile{t.DeleteFiles, t.EqualityDeleteFiles, t.DeletionVectorFiles} {
				for _, f := range files {
					sizes[f.FilePath()] = f.FileSizeBytes()
				}
			}
		}
	}
	pl.writeTable = m.env.WholeReads(pl.writeTable, sizes)
	return pl, nil
}

// smallOnlyPlan plans a background pass (cfg: the writer's sizes): the small-file tier (smallFileTier) bin-packed
// into groups of at least two files, and, in groups of their own, the files whose file-scoped deletes (position
// delete files naming one data file, deletion vectors) cover at least deleteRatio of their rows (0: none).
//
// The second part is Java's RewriteDataFiles delete-ratio-threshold, through iceberg-go's own rule
// (compaction.Config.DeleteRatioThreshold, Java's semantics: record counts of file-scoped deletes summed and
// capped at the file's rows; equality deletes count as unknown). Size alone leaves a right-sized file whose rows
// were mostly updated in place for ever, and every reader decodes its dead rows and applies its deletes. The
// planner's size rules are turned off for that part (MinFileSizeBytes 0: no file is small; the ratio rule runs
// before the oversize one), so only the ratio picks; equality deletes alone pull no file in.
func smallOnlyPlan(cfg compaction.Config, tasks []table.FileScanTask, deleteRatio float64) (compaction.Plan, error) {
	var plan compaction.Plan
	small := smallFileTier(tasks, cfg.TargetFileSizeBytes/8)
	if len(small) >= 2 {
		sc := cfg
		sc.MinFileSizeBytes = cfg.TargetFileSizeBytes / 8
		sc.DeleteFileThreshold = math.MaxInt32 // equality deletes alone do not pull in a right-sized file
		sc.DeleteRatioThreshold = 0            // the ratio's files are planned below, in groups of their own
		sc.MinInputFiles = 2
		p, err := sc.PlanCompaction(small)
		if err != nil {
			return plan, err
		}
		plan.Groups = p.Groups
	}
	if deleteRatio <= 0 {
		return plan, nil
	}
	inSmall := make(map[string]struct{}, len(small))
	for _, t := range small {
		inSmall[t.File.FilePath()] = struct{}{}
	}
	var rest []table.FileScanTask
	for _, t := range tasks {
		if _, ok := inSmall[t.File.FilePath()]; !ok && len(t.DeleteFiles)+len(t.DeletionVectorFiles) > 0 {
			rest = append(rest, t)
		}
	}
	if len(rest) == 0 {
		return plan, nil
	}
	dc := cfg
	dc.MinFileSizeBytes = 0
	dc.DeleteFileThreshold = math.MaxInt32
	dc.DeleteRatioThreshold = deleteRatio
	dc.MinInputFiles = 1 // one file past the share is worth its rewrite
	p, err := dc.PlanCompaction(rest)
	if err != nil {
		return plan, err
	}
	plan.Groups = append(plan.Groups, p.Groups...)
	return plan, nil
}

// smallFileTierFanIn is how many files of one size tier a small-file compaction waits for.
const smallFileTierFanIn = 8

// smallFileTier picks what a small-file compaction merges: files under limit, sorted into size tiers a factor of
// 8 apart starting from the smallest, and the lowest tier holding at least smallFileTierFanIn files. Merged
// output lands a tier or more higher, so a row is rewritten about log8(table/commit) times over its life
// instead of at every pass (an LSM-style policy): the cost of a pass stays proportional to what it merges.
func smallFileTier(tasks []table.FileScanTask, limit int64) []table.FileScanTask {
	var small []table.FileScanTask
	base := int64(math.MaxInt64)
	for _, t := range tasks {
		if sz := t.File.FileSizeBytes(); sz < limit {
			small = append(small, t)
			base = min(base, max(sz, 1))
		}
	}
	tiers := map[int][]table.FileScanTask{}
	for _, t := range small {
		k := 0
		for sz := t.File.FileSizeBytes(); sz >= base*8; sz /= 8 {
			k++
		}
		tiers[k] = append(tiers[k], t)
	}
	for k := 0; k < 64; k++ {
		if len(tiers[k]) >= smallFileTierFanIn {
			return tiers[k]
		}
	}
	return nil
}
