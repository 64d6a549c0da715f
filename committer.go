package iceberg

import (
	"context"
	"log/slog"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/icewriter/iceberg/internal/redact"
)

// Committer applies one run of staged batches to the table as one snapshot: the pluggable end of the pipeline.
// The default commits through the catalog with idempotency markers, retries and fencing (see NewWriter);
// another implementation may forward runs to a coordinator that commits for many writers. Commit is called from
// one goroutine per writer, in sequence order, and must not return before the run's outcome is known: nil means
// committed exactly once; an error means not committed (the writer stops, ErrWriterFailed), unless it wraps
// ErrCommitStateUnknown.
type Committer interface {
	Commit(ctx context.Context, run *Run) (*CommitResult, error)
}

// Run is what the writer hands a Committer: the files of one or more consecutive batches and the markers that
// make the commit idempotent. Every field is plain data (data files encode to manifests), so a run can be sent
// to another process.
type Run struct {
	Table    table.Identifier
	Branch   string
	WriterID string
	// StableID is true when the writer ID came from WithWriterID (fencing and checkpoint mirrors apply).
	StableID bool
	Epoch    int64
	FirstSeq int64 // first batch sequence number in the run
	LastSeq  int64 // last batch sequence number in the run, written as the marker
	Token    string
	HasToken bool
	// BaseSnapshotID is the branch head the run was first planned against (nil: empty table). The marker search
	// before a retry covers every snapshot committed since.
	BaseSnapshotID *int64
	// Segments are applied in order as consecutive snapshots of one atomic commit (usually there is one).
	Segments []Segment
	// IndexBase is the snapshot the writer's key index covers, when the run uses position deletes (deletion
	// vectors on format version 3, position delete files on 2); KeyFieldIDs
	// are the key's field ids, for the equality-delete fallback.
	IndexBase   *int64
	KeyFieldIDs []int
	// Deletes are the delete files the writer allows (WithDeleteFiles): when the table changed outside the
	// writer since IndexBase, the committer replaces the run's position deletes by equality deletes
	// (AnyDeleteFiles), by copy-on-write rewrites of the files holding its keys (NoEqualityDeletes), or fails
	// with ErrEqualityDeletesRefused (NoEqualityDeletesOrFail).
	Deletes DeleteFiles
	Rows    int64 // rows accepted by the run's batches (upserted and inserted rows, deleted keys)
	Bytes   int64
	// Positions are the source positions (partition -> position) recorded by the run's checkpoints, the newest
	// per partition, committed atomically with the run's rows and merged with the positions already on the
	// table: a partition here replaces its value there, the others are kept (see Positions). A run with
	// positions and no rows still commits them (an empty snapshot carries them). Nil: the run changes none.
	Positions map[string]string
	// PositionBases holds, for partitions of Positions, the position the table must still hold for the run to
	// commit: the one the writer resumed the partition from (Source.Resume, Writer.ResumePositions) or last
	// committed for it. An attempt that finds another value on the head it builds on fails with
	// ErrPositionMoved, atomically with the commit (the attempt asserts that head). "" stands for no position
	// (or the empty one). A partition not here is not checked (the writer never resumed nor committed it).
	PositionBases map[string]string

	formatVersion int
	spec          ice.PartitionSpec
	schema        *ice.Schema
	// formed and committed are when the writer formed the run and when its commit returned (CommitInfo).
	formed, committed time.Time
}

// Segment is one snapshot of a run: files added and the newest batch sequence number and token in it.
type Segment struct {
	DataFiles   []ice.DataFile
	DeleteFiles []ice.DataFile // equality delete files
	// DeleteKeys are the keys a copy-on-write segment upserts or deletes (key columns only): the committer
	// rewrites the data files holding them, planned against the table it commits on.
	DeleteKeys []arrow.RecordBatch
	// DVFiles are the position deletes from the key index for rows of this writer's files that the segment
	// upserts or deletes: deletion vectors (format version 3) or file-scoped position delete files (2), one per
	// data file, each holding the positions of the one it supersedes; RemovedDVs are those it supersedes (one
	// live file or vector per data file). FallbackKeys are the keys the segment upserts or deletes: if the table
	// changed outside the writer since IndexBase, the committer drops DVFiles and RemovedDVs and follows
	// Run.Deletes for these keys instead.
	DVFiles      []ice.DataFile
	RemovedDVs   []ice.DataFile
	FallbackKeys []arrow.RecordBatch
	LastSeq      int64
	Token        string
	HasToken     bool
	Rows         int64
}

// files counts the data and delete files of the run.
func (r *Run) files() int {
	n := 0
	for _, s := range r.Segments {
		n += len(s.DataFiles) + len(s.DeleteFiles) + len(s.DVFiles)
	}
	return n
}

// deleteFiles counts the run's delete files.
func (r *Run) deleteFiles() int {
	n := 0
	for _, s := range r.Segments {
		n += len(s.DeleteFiles) + len(s.DVFiles)
	}
	return n
}

// CommitResult reports a committed run.
type CommitResult struct {
	SnapshotID int64
	// Table is the table as the commit left it, when the committer knows it (nil otherwise).
	Table     *table.Table
	Attempts  int
	Conflicts int
	// IndexLost reports that the run fell back from deletion vectors to equality deletes.
	IndexLost bool
	// FilesRewritten counts the data files a copy-on-write run rewrote.
	FilesRewritten int
}

// NewCatalogCommitter returns the default Committer on its own: it commits runs through cat with idempotency
// markers, retries (within timeout, per run) and fencing. A coordinator that receives runs from many writer
// processes (Run.MarshalBinary) commits them with it. Commit is safe for concurrent use: runs of different
// writers and tables may commit at once (runs on one table conflict at the catalog and retry). Runs of one
// writer must be committed one at a time in sequence order; the caller guarantees that (a Writer hands its
// runs over one at a time from its commit loop, so a coordinator that commits each writer's runs in the order
// received, waiting for each, keeps it).
// A timeout of 0 or less means DefaultCommitTimeout (5 min), as WithCommitTimeout's default: with no time to
// retry, a run built on a table that moved since (the writer's own maintenance commits move it too) could not
// even reload it. Its errors and log lines are masked as a Writer's are.
func NewCatalogCommitter(cat catalog.Catalog, timeout time.Duration) Committer {
	if timeout <= 0 {
		timeout = DefaultCommitTimeout
	}
	cat = redact.WrapCatalog(cat, nil)
	return newCatalogCommitter(cat, nil, redact.Logger(slog.Default(), redact.RedactorOf(cat)), timeout, nil)
}
