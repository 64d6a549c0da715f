package iceberg

import (
	"context"

	"github.com/icewriter/iceberg/internal/commit"
	"github.com/icewriter/iceberg/internal/readonce"

	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/dv"

	"github.com/icewriter/iceberg/internal/keyindex"
	"github.com/icewriter/iceberg/internal/keyindex/posdelete"
	"github.com/icewriter/iceberg/internal/maintain"
)

// CompactResult reports what Compact rewrote: data files rewritten and added, delete files expunged and still
// live, bytes before and after, the rewrite snapshot (0 when there was nothing to do) and the attempts.
type CompactResult = maintain.CompactResult

// ConvertResult reports what ConvertEqualityDeletes did: equality delete files removed, data files that got
// deletes, rows deleted, the conversion's last snapshot (0 when there was nothing to do) and the attempts.
type ConvertResult = maintain.ConvertResult

// DefaultDeleteConversionEvery is how many commits apart the maintainer converts live equality deletes (see
// WithDeleteConversionEvery).
const DefaultDeleteConversionEvery = 10

// Compact rewrites the data files that delete files apply to (and small data files beside them), with the
// deletes applied, and expunges the delete files that become dead, in one atomic replace.
//
// It runs inside the writer's commit queue: no commit of this writer interleaves with it, and batches accepted
// meanwhile commit after it (their equality deletes then get a higher sequence number and still apply). A
// concurrent commit by another writer makes the replace fail its requirement; Compact then plans again from the
// new table (iceberg-go's own rewrite would refuse concurrent equality deletes), up to 10 attempts within the
// commit timeout. A writer whose ID a newer process took over gets ErrFenced and stops, having committed nothing.
func (w *Writer) Compact(ctx context.Context) (CompactResult, error) { return w.maint.Compact(ctx) }

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
	return w.maint.ConvertEqualityDeletes(ctx)
}

// newMaintainer schedules the writer's maintenance by its (resolved) options, through the functions of the
// writer and its stages that maintenance asks for (maintain.Env). The pipeline is made after it: the functions
// that reach it look it up when called.
func (w *Writer) newMaintainer(o *options) *maintain.Maintainer {
	env := maintain.Env{
		Ident: w.env.ident, Branch: w.env.branch, WriterID: w.env.id, Log: w.env.log, Redact: w.env.red.Error,
		TargetFileSize: w.files.TargetFileSize, RowGroupRows: w.files.RowGroupRows, KeyNames: w.keys.names(),
		Parallel: w.keys.parallel, FileUUID: w.own.names.next, MaxBuilds: commit.MaxBuildAttempts, Shred: w.files.Shred,
		Table: w.Table, Commit: w.commitTx,
		EnterQueue: func() func() { return w.pipe.EnterQueue() },
		Usable:     func() error { return w.pipe.Usable() },
		Closed:     ErrClosed,
		RemovePaths: func(ctx context.Context, tbl *table.Table, paths []string) {
			commit.RemovePaths(ctx, w.env.log, tbl, paths)
		},
		RefreshMirrors: refreshMirrors,
		WholeReads: func(tbl *table.Table, sizes map[string]int64) *table.Table {
			return readonce.WholeReads(tbl, sizes, readonce.WholeReadBytes(tbl))
		},
		DropIndex:      func(reason string) { w.keys.drop(reason, nil) },
		RebaseIndex:    w.keys.rebase,
		IndexConverted: w.keys.converted,
		NewDeleteResolver: func(ctx context.Context, tbl *table.Table) (maintain.DeleteResolver, error) {
			r, err := keyindex.NewResolver(ctx, tbl)
			if err != nil {
				return nil, err
			}
			return maintainResolver{r}, nil
		},
		DeleteTarget: posdelete.Target,
		OnCompaction: w.compacted,
		OnConversion: w.converted,
		OnExpiry:     w.expired,

		RewriteWritten: o.maint.rewriteWritten,
	}
	return maintain.New(env, maintain.Config{
		Keep: o.maint.keepSnapshots, ExpireAge: o.maint.expireAge, RewriteEvery: o.maint.rewriteEvery,
		AutoCompact: o.maint.autoCompact, SmallFiles: o.maint.smallFiles, ConvertEvery: o.maint.convertEvery,
		DeleteRatio: o.maint.deleteRatio,
	})
}

// maintainResolver is the key index's delete resolution as maintenance asks for it.
type maintainResolver struct{ r *keyindex.Resolver }

func (m maintainResolver) PositionDeleted(task table.FileScanTask) (*dv.RoaringPositionBitmap, error) {
	return m.r.PositionDeleted(task)
}

func (m maintainResolver) EqualityDeleted(ctx context.Context, task table.FileScanTask) (*dv.RoaringPositionBitmap, error) {
	return m.r.EqualityDeleted(ctx, task, nil)
}

// converted records in the key index a conversion this writer committed (pre is the table it planned on, next
// the one its commit left): the data files that got a new vector hold it now, with all its positions (the
// equality deletes' rows were never in the index: it is not loaded over them). When someone else changed the
// table since the index's base, the index goes off instead.
func (k *keyStage) converted(pre, next *table.Table, vectors map[string]maintain.ConvertedVector) {
	k.mu.Lock()
	defer k.mu.Unlock()
	idx := k.indexBefore(pre, "an equality delete conversion")
	if idx == nil {
		return
	}
	for path, v := range vectors {
		if v.File != nil {
			idx.SetVector(path, v.Bitmap, v.File)
		}
	}
	if head := next.Metadata().SnapshotByName(k.branch); head != nil {
		idx.SetBase(head.SnapshotID)
	}
}
