package maintain

import (
	"context"
	"fmt"
	"time"

	ice "github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/dv"
	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/icewriter/iceberg/internal/commit"
	"github.com/icewriter/iceberg/internal/keyindex/posdelete"
)

// ConvertResult reports what ConvertEqualityDeletes did.
type ConvertResult struct {
	EqualityDeleteFiles int   // equality delete files removed
	DataFiles           int   // data files that got a position delete file or a new deletion vector
	DeletedRows         int64 // positions written: rows the removed equality deletes matched
	SnapshotID          int64 // the conversion's last snapshot, 0 when there was nothing to do
	Attempts            int
}

// ConvertEqualityDeletes is the user's conversion of the table's live equality deletes (the root's
// Writer.ConvertEqualityDeletes), in one commit inside the writer's commit queue.
func (m *Maintainer) ConvertEqualityDeletes(ctx context.Context) (ConvertResult, error) {
	if err := m.env.Usable(); err != nil {
		return ConvertResult{}, err
	}
	defer m.env.EnterQueue()()
	res, err := m.convertLocked(ctx)
	return res, err
}

// convertLocked runs one conversion through the writer's transaction helper; the caller is in the commit queue
// (Env.EnterQueue). It loads the table first, to convert what other writers committed too, and plans (reads
// and writes) inside each attempt. The snapshots carry a nonce of this call, the proof that an attempt whose
// reply was lost applied. The key index learns the new vectors when the commit succeeds, and is dropped when an
// attempt's commit errs (which vector is live is not known then). The maintainer's conversion runs off the
// commit path instead (convertBackground).
func (m *Maintainer) convertLocked(ctx context.Context) (ConvertResult, error) {
	nonce := uuid.NewString()
	var plan *conversion
	op := &commit.Op{
		What: "convert equality deletes", Kind: KindDeleteConversion,
		MaxAttempts: compactAttempts, MaxBuilds: m.env.MaxBuilds,
		Build: func(ctx context.Context, tbl *table.Table, _ int) (*table.Transaction, error) {
			var err error
			plan, err = planConversion(ctx, tbl, &m.env)
			if err != nil || plan == nil {
				return nil, err
			}
			return plan.stage(ctx, tbl, m.env.Branch, m.conversionProps(nonce))
		},
		Prove:  commit.NonceProof(m.env.Branch, SummaryNonce, nonce, nil),
		Failed: m.conversionFailed,
		Committed: func(_ context.Context, pre, next *table.Table) {
			m.env.IndexConverted(pre, next, plan.vectors)
		},
	}
	start := time.Now()
	r, err := m.env.Commit(ctx, op)
	res := conversionResult(m.env.Branch, r, err, plan, nonce)
	return res, m.convertedEvent(start, false, res, err)
}

// conversionProps are the summary properties of a conversion's snapshots.
func (m *Maintainer) conversionProps(nonce string) ice.Properties {
	return ice.Properties{commit.SummaryWriterID: m.env.WriterID, commit.SummaryOperation: opConvertDeletes, SummaryNonce: nonce}
}

// conversionFailed drops the key index after a conversion's commit that reached the catalog failed: which vector
// is live is not known then.
func (m *Maintainer) conversionFailed(sent bool) {
	if sent {
		m.env.DropIndex("an equality delete conversion's commit returned an error (its reply may be lost)")
	}
}

// conversionResult reports the conversion plan committed by r (none when it failed or had nothing to do).
func conversionResult(branch string, r commit.Result, err error, plan *conversion, nonce string) ConvertResult {
	res := ConvertResult{Attempts: r.Attempts}
	if err == nil && r.How != commit.Nothing && plan != nil {
		res.EqualityDeleteFiles, res.DataFiles, res.DeletedRows = len(plan.removed), plan.dataFiles, plan.rows
		if s, ok := commit.FindNonce(r.Table.Metadata(), branch, SummaryNonce, nonce); ok {
			res.SnapshotID = s.SnapshotID
		}
	}
	return res
}

// convertedEvent reports a conversion that started at start, when it committed or failed, and returns its error
// redacted (it reads data files: storage errors may quote presigned URLs).
func (m *Maintainer) convertedEvent(start time.Time, automatic bool, res ConvertResult, err error) error {
	err = m.env.Redact(err)
	if err != nil || res.SnapshotID != 0 {
		m.env.OnConversion(start, automatic, res, err)
	}
	return err
}

// conversion is a planned conversion of equality deletes: the snapshot it was planned on, the delete files it
// wrote, and what its commit removes. Staging it (stage) touches no file, so it can commit onto a later head
// of the branch (convertBackground).
type conversion struct {
	snap      *table.Snapshot
	v3        bool
	added     []ice.DataFile      // the position delete files or deletion vectors written
	replaced  []ice.DataFile      // v3: the vectors the new ones replace
	removed   []ice.DataFile      // the equality delete files removed
	targets   map[string]struct{} // the data files that got position deletes or a new vector
	dataFiles int
	rows      int64
	vectors   map[string]ConvertedVector // v3: the new live vector of each data file that got one
}

// ConvertedVector is a data file's deletion vector after a conversion: all its positions, and the file.
type ConvertedVector struct {
	Bitmap *dv.RoaringPositionBitmap
	File   ice.DataFile
}

// planConversion plans the conversion of the live equality deletes of tbl's branch head (nil: there are none):
// it reads the data files they apply to and writes the position deletes (v2) or deletion vectors (v3, each
// holding the file's older deletes too) that stage then commits.
func planConversion(ctx context.Context, tbl *table.Table, env *Env) (*conversion, error) {
	branch := env.Branch
	snap := tbl.Metadata().SnapshotByName(branch)
	if snap == nil || tbl.Metadata().Version() < 2 {
		return nil, nil
	}
	if v, ok := commit.SummaryProp(snap, "total-equality-deletes"); ok && v == "0" {
		return nil, nil
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	live, err := liveEqualityDeletes(fs, snap)
	if err != nil || len(live) == 0 {
		return nil, err
	}
	scan, err := tbl.Scan(table.WithSnapshotID(snap.SnapshotID)).UseRef(branch)
	if err != nil {
		return nil, err
	}
	tasks, err := scan.PlanFiles(ctx)
	if err != nil {
		return nil, fmt.Errorf("iceberg: convert equality deletes: plan: %w", err)
	}
	res, err := env.NewDeleteResolver(ctx, tbl)
	if err != nil {
		return nil, err
	}
	v3 := tbl.Metadata().Version() >= 3
	type target struct {
		task table.FileScanTask
		dead *dv.RoaringPositionBitmap // v3: merged with the file's vector or position deletes
		rows int64                     // positions the equality deletes add
	}
	targets := make([]target, len(tasks))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, env.Parallel))
	for i, t := range tasks {
		if len(t.EqualityDeleteFiles) == 0 {
			continue
		}
		g.Go(func() error {
			dead, err := res.EqualityDeleted(gctx, t)
			if err != nil || dead == nil {
				return err
			}
			targets[i] = target{task: t, dead: dead, rows: dead.Cardinality()}
			if v3 {
				// A vector must hold every deleted position of its file: readers ignore position delete files
				// for a file with a vector.
				old, err := res.PositionDeleted(t)
				if err != nil {
					return err
				}
				if old != nil {
					dead.Or(old)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	lp, err := tbl.LocationProvider()
	if err != nil {
		return nil, err
	}
	c := &conversion{snap: snap, v3: v3, removed: live, targets: map[string]struct{}{},
		vectors: map[string]ConvertedVector{}}
	if v3 {
		wfs, err := writableFS(fs, "deletion vectors")
		if err != nil {
			return nil, err
		}
		meta := tbl.Metadata()
		writer := dv.NewDVWriter(wfs, func(id int32) *ice.PartitionSpec { return meta.PartitionSpecByID(int(id)) })
		for _, t := range targets {
			if t.dead == nil {
				continue
			}
			writer.Load(t.task.File.FilePath(), t.dead, t.task.File.SpecID(), t.task.File.Partition())
			if len(t.task.DeletionVectorFiles) > 0 {
				c.replaced = append(c.replaced, t.task.DeletionVectorFiles[0])
			}
			c.targets[t.task.File.FilePath()] = struct{}{}
			c.dataFiles++
			c.rows += t.rows
		}
		if c.dataFiles > 0 {
			dvs, err := writer.Flush(ctx, lp.NewDataLocation("icewriter-dv-"+env.FileUUID().String()+".puffin"))
			if err != nil {
				return nil, fmt.Errorf("iceberg: write deletion vectors: %w", err)
			}
			c.added = dvs
			byRef := map[string]ice.DataFile{}
			for _, d := range dvs {
				if ref := d.ReferencedDataFile(); ref != nil {
					byRef[*ref] = d
				}
			}
			for _, t := range targets {
				if t.dead != nil {
					c.vectors[t.task.File.FilePath()] = ConvertedVector{Bitmap: t.dead, File: byRef[t.task.File.FilePath()]}
				}
			}
		}
	} else {
		wfs, err := writableFS(fs, "position deletes")
		if err != nil {
			return nil, err
		}
		meta := tbl.Metadata()
		for _, t := range targets {
			if t.dead == nil {
				continue
			}
			f, err := posdelete.Write(ctx, wfs, meta, t.task.File, t.dead,
				lp.NewDataLocation("icewriter-pos-"+env.FileUUID().String()+".parquet"))
			if err != nil {
				return nil, err
			}
			c.added = append(c.added, f)
			c.targets[t.task.File.FilePath()] = struct{}{}
			c.dataFiles++
			c.rows += t.rows
		}
	}
	return c, nil
}

// stage stages the conversion on tbl, the snapshot it was planned on or a later head of the branch that
// conversionOverlap accepts. Two snapshots in one transaction (one catalog commit): a row delta adds the
// position deletes or vectors (replacing the files' old vectors), then a rewrite removes the equality delete
// files. iceberg-go has no single operation for it (a row delta removes only vectors, a rewrite does not turn
// one kind of delete into another); both snapshots read the same rows, since the first only adds deletes of
// rows the equality deletes already remove.
func (c *conversion) stage(ctx context.Context, tbl *table.Table, branch string,
	props ice.Properties) (*table.Transaction, error) {
	tx := tbl.NewTransactionOnBranch(branch)
	if len(c.added) > 0 {
		if err := tx.NewRowDelta(props).AddDeletes(c.added...).RemoveDeletes(c.replaced...).Commit(ctx); err != nil {
			return nil, fmt.Errorf("iceberg: convert equality deletes: stage deletes: %w", err)
		}
	}
	rw := tx.NewRewrite(props)
	for _, f := range c.removed {
		rw.DeleteFile(f)
	}
	if err := rw.Commit(ctx); err != nil {
		return nil, fmt.Errorf("iceberg: convert equality deletes: remove equality deletes: %w", err)
	}
	return tx, nil
}

// liveEqualityDeletes lists the live equality delete files of a snapshot from its delete manifests, those that
// apply to no data file (scan planning does not list them) included.
func liveEqualityDeletes(fs iceio.IO, snap *table.Snapshot) ([]ice.DataFile, error) {
	mans, err := snap.Manifests(fs)
	if err != nil {
		return nil, err
	}
	var out []ice.DataFile
	seen := map[string]bool{}
	for _, m := range mans {
		if m.ManifestContent() != ice.ManifestContentDeletes {
			continue
		}
		entries, err := m.FetchEntries(fs, true)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			df := e.DataFile()
			if df.ContentType() == ice.EntryContentEqDeletes && !seen[df.FilePath()] {
				seen[df.FilePath()] = true
				out = append(out, df)
			}
		}
	}
	return out, nil
}
