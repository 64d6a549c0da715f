package iceberg

import (
	"context"
	"log/slog"
	"time"

	"github.com/icewriter/iceberg/internal/commit/cow"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/icewriter/iceberg/internal/commit"
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
// make the commit idempotent. Every field is plain data (data files encode to manifests, Run.MarshalBinary), so
// a run can be sent to another process.
type Run = commit.Run

// Segment is one snapshot of a run: files added and the newest batch sequence number and token in it.
type Segment = commit.Segment

// CommitResult reports a committed run.
type CommitResult = commit.CommitResult

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

// catalogCommitter is the default Committer (commit.CatalogCommitter).
type catalogCommitter = commit.CatalogCommitter

// newCatalogCommitter is the default committer with copy-on-write rewrites by the root's cow stage, cfg
// (NewCatalogCommitter's: two rewrites at a time, the default file sizes).
func newCatalogCommitter(cat catalog.Catalog, tbl *table.Table, log *slog.Logger, timeout time.Duration, tabs *commit.Tables) *catalogCommitter {
	c := commit.NewCatalogCommitter(cat, tbl, log, timeout, tabs)
	setCow(c, cow.Config{Parallel: 2, TargetFileSize: DefaultTargetFileSize, RowGroupRows: DefaultRowGroupRows})
	return c
}

// setCow makes c's copy-on-write attempts cow stages of cfg.
func setCow(c *catalogCommitter, cfg cow.Config) {
	c.NewCow = func(branch string, segs []Segment) commit.CowAttempt { return cow.NewStage(cfg, branch, segs) }
}
