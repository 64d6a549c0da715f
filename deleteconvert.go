package iceberg

import (
	"context"
	"fmt"
	"time"

	ice "github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/dv"
	"github.com/google/uuid"
	"github.com/icewriter/iceberg/internal/keyindex"
	"github.com/icewriter/iceberg/internal/keyindex/posdelete"
	"golang.org/x/sync/errgroup"

	"github.com/icewriter/iceberg/internal/commit"
)

// DefaultDeleteConversionEvery is how many commits apart the maintainer converts live equality deletes (see
// WithDeleteConversionEvery).
const DefaultDeleteConversionEvery = 10

// ConvertResult reports what ConvertEqualityDeletes did.
type ConvertResult struct {
	EqualityDeleteFiles int   // equality delete files removed
	DataFiles           int   // data files that got a position delete file or a new deletion vector
	DeletedRows         int64 // positions written: rows the removed equality deletes matched
	SnapshotID          int64 // the conversion's last snapshot, 0 when there was nothing to do
	Attempts            int
}

// ConvertEqualityDeletes resolves every live equality delete file of the table to the rows it removes, writes
// those rows as position deletes (format v2: one file-scoped position delete file per data file) or deletion
// vectors (v3: merged with the file's vector), and removes the equality delete files, in one commit. Readers
// then apply cheap file-scoped deletes instead of matching every older data file against every equality delete,
// and engines that cannot read equality deletes can read the table. Equality deletes written by anyone count:
// other writers, older versions of this library, this writer's fallback when its key index cannot place a key.
//
// An equality delete applies to the data files of a strictly lower data sequence number, of the same partition
// unless it is global (scan planning decides, as for readers); its rows are found by reading those files'
// equality columns. The commit asserts the branch head it planned on: a concurrent commit makes it fail, and it
// plans again on the reloaded table (up to 10 attempts within the commit timeout). It runs inside the writer's
// commit queue, as Compact does. The maintainer runs a conversion every WithDeleteConversionEvery commits, off the
// commit path: it reads and writes while the writer's flushes go on, and takes the queue only for its commit.
func (w *Writer) ConvertEqualityDeletes(ctx context.Context) (ConvertResult, error) {
	if err := w.pipe.usable(); err != nil {
		return ConvertResult{}, err
	}
	defer w.pipe.enterQueue()()
	res, err := w.convertLocked(ctx)
	return res, err
}

// convertLocked runs one conversion through the writer's transaction helper; the caller is in the commit queue (pipeline.enterQueue). It
// loads the table first, to convert what other writers committed too, and plans (reads and writes) inside each
// attempt. The snapshots carry a nonce of this call, the proof that an attempt whose reply was lost applied. The
// key index learns the new vectors when the commit succeeds, and is dropped when an attempt's commit errs (which
// vector is live is not known then). The maintainer's conversion runs off the commit path instead
// (convertBackground).
func (w *Writer) convertLocked(ctx context.Context) (ConvertResult, error) {
	nonce := uuid.NewString()
	var plan *conversion
	op := &commit.Op{
		What: "convert equality deletes", Kind: KindDeleteConversion,
		MaxAttempts: compactAttempts, MaxBuilds: maxBuildAttempts,
		Build: func(ctx context.Context, tbl *table.Table, _ int) (*table.Transaction, error) {
			var err error
			plan, err = planConversion(ctx, tbl, w.env.branch, w.keys.files, w.keys.parallel)
			if err != nil || plan == nil {
				return nil, err
			}
			return plan.stage(ctx, tbl, w.env.branch, w.conversionProps(nonce))
		},
		Prove:  commit.NonceProof(w.env.branch, summaryNonce, nonce, nil),
		Failed: w.conversionFailed,
		Committed: func(_ context.Context, pre, next *table.Table) {
			w.keys.converted(pre, next, plan.vectors)
		},
	}
	start := time.Now()
	r, err := w.commitTx(ctx, op)
	res := conversionResult(w.env.branch, r, err, plan, nonce)
	return res, w.convertedEvent(start, false, res, err)
}

// conversionProps are the summary properties of a conversion's snapshots.
func (w *Writer) conversionProps(nonce string) ice.Properties {
	return ice.Properties{summaryWriterID: w.env.id, summaryOperation: opConvertDeletes, summaryNonce: nonce}
}

// conversionFailed drops the key index after a conversion's commit that reached the catalog failed: which vector
// is live is not known then.
func (w *Writer) conversionFailed(sent bool) {
	if sent {
		w.keys.drop("an equality delete conversion's commit returned an error (its reply may be lost)", nil)
	}
}

// conversionResult reports the conversion plan committed by r (none when it failed or had nothing to do).
func conversionResult(branch string, r commit.Result, err error, plan *conversion, nonce string) ConvertResult {
	res := ConvertResult{Attempts: r.Attempts}
	if err == nil && r.How != commit.Nothing && plan != nil {
		res.EqualityDeleteFiles, res.DataFiles, res.DeletedRows = len(plan.removed), plan.dataFiles, plan.rows
		if s, ok := commit.FindNonce(r.Table.Metadata(), branch, summaryNonce, nonce); ok {
			res.SnapshotID = s.SnapshotID
		}
	}
	return res
}

// convertedEvent reports a conversion that started at start, when it committed or failed, and returns its error
// redacted (it reads data files: storage errors may quote presigned URLs).
func (w *Writer) convertedEvent(start time.Time, automatic bool, res ConvertResult, err error) error {
	err = w.env.red.Error(err)
	if (err != nil || res.SnapshotID != 0) && w.cbs.wants(hookConversion) {
		w.cbs.emit(DeleteConversion{Table: w.env.ident, WriterID: w.env.id, Automatic: automatic, Result: res,
			Duration: time.Since(start), Err: w.cbs.masked(err)})
	}
	return err
}

// opConvertDeletes is the icewriter.operation of a conversion's snapshots.
const opConvertDeletes = "convert-deletes"

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
	vectors   map[string]convertedVector // v3: the new live vector of each data file that got one
}

// convertedVector is a data file's deletion vector after a conversion: all its positions, and the file.
type convertedVector struct {
	bm   *dv.RoaringPositionBitmap
	file ice.DataFile
}

// planConversion plans the conversion of the live equality deletes of tbl's branch head (nil: there are none):
// it reads the data files they apply to and writes the position deletes (v2) or deletion vectors (v3, each
// holding the file's older deletes too) that stage then commits.
func planConversion(ctx context.Context, tbl *table.Table, branch string, names *fileNamer,
	parallel int) (*conversion, error) {
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
	res, err := keyindex.NewResolver(ctx, tbl)
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
	g.SetLimit(max(1, parallel))
	for i, t := range tasks {
		if len(t.EqualityDeleteFiles) == 0 {
			continue
		}
		g.Go(func() error {
			dead, err := res.EqualityDeleted(gctx, t, nil)
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
		vectors: map[string]convertedVector{}}
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
			dvs, err := writer.Flush(ctx, lp.NewDataLocation("icewriter-dv-"+names.next().String()+".puffin"))
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
					c.vectors[t.task.File.FilePath()] = convertedVector{bm: t.dead, file: byRef[t.task.File.FilePath()]}
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
				lp.NewDataLocation("icewriter-pos-"+names.next().String()+".parquet"))
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

// converted records in the key index a conversion this writer committed (pre is the table it planned on, next
// the one its commit left): the data files that got a new vector hold it now, with all its positions (the
// equality deletes' rows were never in the index: it is not loaded over them). When someone else changed the
// table since the index's base, the index goes off instead.
func (k *keyStage) converted(pre, next *table.Table, vectors map[string]convertedVector) {
	k.mu.Lock()
	defer k.mu.Unlock()
	idx := k.indexBefore(pre, "an equality delete conversion")
	if idx == nil {
		return
	}
	for path, v := range vectors {
		if v.file != nil {
			idx.SetVector(path, v.bm, v.file)
		}
	}
	if head := next.Metadata().SnapshotByName(k.branch); head != nil {
		idx.SetBase(head.SnapshotID)
	}
}
