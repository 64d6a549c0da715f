package maintain

import (
	"context"
	"github.com/icewriter/iceberg/internal/encode"
	"log/slog"
	"time"

	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/dv"
	"github.com/google/uuid"

	"github.com/icewriter/iceberg/internal/commit"
)

// Env is what maintenance asks of the writer: who it commits as, how it writes files, the writer's side (its
// table, its transaction helper, its commit queue), the key index's hooks and the events it reports. The writer
// builds it once, with every function set.
type Env struct {
	Ident    table.Identifier
	Branch   string
	WriterID string
	Log      *slog.Logger
	// Redact masks an error of a rewrite or conversion: they read and write data files, and storage errors may
	// quote presigned URLs.
	Redact func(error) error

	// How rewritten files are written, as the writer writes its own: the target size, the rows of a row group,
	// the key columns (bloom filters), how many files are read at once, and the write UUID of each call that
	// writes files (marked with the writer ID, so that a later writer with that ID recognises its orphans).
	TargetFileSize int64
	RowGroupRows   int
	KeyNames       []string
	Parallel       int
	FileUUID       func() uuid.UUID
	// Shred is the chosen paths of the table's variant columns (nil: none): compaction writes its files in that
	// layout (executeShredGroup).
	Shred encode.ShredLayout
	// MaxBuilds bounds the builds of one transaction on a table head whose transaction cannot be staged.
	MaxBuilds int

	// Table is the table as the writer's last commit left it (nil before any).
	Table func() *table.Table
	// Commit commits op through the writer's transaction helper: on its table and branch, fenced, retried, and
	// the table it leaves installed as the writer's. A fenced writer stops.
	Commit func(ctx context.Context, op *commit.Op) (commit.Result, error)
	// EnterQueue takes the writer's commit queue: no run of the writer commits until leave is called.
	EnterQueue func() (leave func())
	// Usable reports why the writer takes no calls, if it does not; Closed is what it returns once the writer
	// closed.
	Usable func() error
	Closed error
	// RemovePaths deletes files no snapshot of tbl references, best effort.
	RemovePaths func(ctx context.Context, tbl *table.Table, paths []string)
	// RefreshMirrors re-derives the writer IDs' checkpoint mirrors in a transaction that expires snapshots.
	RefreshMirrors func(tx *table.Transaction, meta table.Metadata, branch string) error
	// WholeReads returns tbl reading the files sizes names (path: size in bytes) whole, in one request each.
	WholeReads func(tbl *table.Table, sizes map[string]int64) *table.Table

	// The key index. DropIndex drops it (a commit's reply may be lost: where rows are is not known);
	// RebaseIndex moves it to a rewrite's new files (rewritten: the files pre held that next does not);
	// IndexConverted records the deletion vectors a conversion committed.
	DropIndex      func(reason string)
	RebaseIndex    func(ctx context.Context, pre, next *table.Table, rewritten map[string]struct{})
	IndexConverted func(pre, next *table.Table, vectors map[string]ConvertedVector)
	// NewDeleteResolver reads which rows of a data file the delete files of a scan task remove.
	NewDeleteResolver func(ctx context.Context, tbl *table.Table) (DeleteResolver, error)
	// DeleteTarget returns the one data file a position delete file names in its metadata ("": not known so).
	DeleteTarget func(f ice.DataFile) string

	// Events: a compaction, a conversion of equality deletes, a snapshot expiry, each when it ended (automatic:
	// run by the maintainer, not called by the user; err already masked).
	OnCompaction func(start time.Time, automatic, smallOnly bool, res CompactResult, err error)
	OnConversion func(start time.Time, automatic bool, res ConvertResult, err error)
	OnExpiry     func(start time.Time, r commit.Result, n int, full bool, err error)

	// RewriteWritten, when set (tests only), runs after a background pass (compaction or conversion) wrote its
	// files and before it takes the commit queue: a test holds the pass there.
	RewriteWritten func()
}

// DeleteResolver finds the rows of a data file that the delete files of a scan task remove.
type DeleteResolver interface {
	// PositionDeleted returns the positions the task's position deletes and deletion vector remove (nil: none).
	PositionDeleted(task table.FileScanTask) (*dv.RoaringPositionBitmap, error)
	// EqualityDeleted returns the positions the task's equality deletes remove (nil: none).
	EqualityDeleted(ctx context.Context, task table.FileScanTask) (*dv.RoaringPositionBitmap, error)
}

// Config is what maintenance runs, by the writer's resolved options (0: off).
type Config struct {
	Keep         int           // WithKeepSnapshots
	ExpireAge    time.Duration // WithExpireOlderThan
	RewriteEvery int           // WithRewriteManifestsEvery
	AutoCompact  int           // WithAutoCompactEvery
	SmallFiles   int           // WithSmallFileCompactionEvery
	ConvertEvery int           // WithDeleteConversionEvery
	// DeleteRatio (WithDeleteRewriteRatio): a small-file pass also rewrites the files with this share of their
	// rows deleted.
	DeleteRatio float64
}

// Snapshot summary keys of maintenance's own snapshots.
const (
	// SummaryNonce marks the snapshot of one transaction call (a compaction): the proof, after a lost reply,
	// that the call applied.
	SummaryNonce = "icewriter.nonce"

	opConvertDeletes = "convert-deletes" // the SummaryOperation of a conversion's snapshots
)

// What maintenance commits (the root's CommitKind values).
const (
	KindCompaction       commit.Kind = "compaction"
	KindExpiry           commit.Kind = "expiry"
	KindManifests        commit.Kind = "manifests"
	KindDeleteConversion commit.Kind = "delete-conversion"
)
