package commit

import (
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

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

// FileCount counts the data and delete files of the run.
func FileCount(r *Run) int {
	n := 0
	for _, s := range r.Segments {
		n += len(s.DataFiles) + len(s.DeleteFiles) + len(s.DVFiles)
	}
	return n
}

// DeleteFileCount counts the run's delete files.
func DeleteFileCount(r *Run) int {
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

// The unexported fields of a Run are set and read through these functions, which the writer reaches and users
// of the root package's alias do not.

// Describe records what the run's files were written with: the table's format version, partition spec and
// schema (MarshalBinary encodes the files' metadata with them).
func Describe(r *Run, formatVersion int, spec ice.PartitionSpec, schema *ice.Schema) {
	r.formatVersion, r.spec, r.schema = formatVersion, spec, schema
}

// FormatVersion is the table format version the run's files were written for.
func FormatVersion(r *Run) int { return r.formatVersion }

// SetFormed records when the writer formed the run.
func SetFormed(r *Run, t time.Time) { r.formed = t }

// FormedAt is when the writer formed the run.
func FormedAt(r *Run) time.Time { return r.formed }

// SetCommitted records when the run's commit returned.
func SetCommitted(r *Run, t time.Time) { r.committed = t }

// CommittedAt is when the run's commit returned.
func CommittedAt(r *Run) time.Time { return r.committed }
