package iceberg

import (
	"context"
	"errors"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/icewriter/iceberg/internal/commit"
)

// txn is the writer's transaction environment for its own transactions (fence, compaction, schema evolution,
// maintenance): its catalog, table cache and logger, the commit timeout, and waits capped at 2 s instead of a
// run's 5 s. These transactions are short and contend with writers that commit in a tight loop: retried up to
// 5 s apart, a takeover next to one could lose the race for the branch head for minutes, and compaction and
// schema evolution hold the commit queue for their 10 attempts.
func (e *writerEnv) txn() *commit.Env {
	t := commit.NewEnv(e.cat, e.tables, e.log, e.timeout)
	t.MinWait, t.MaxWait = 20*time.Millisecond, 2*time.Second
	t.Report = e.events
	if e.retryWaits != nil {
		t.MinWait, t.MaxWait = e.retryWaits[0], e.retryWaits[1]
	}
	return &t
}

// commitTx commits op on the writer's table and branch, fenced when the writer ID is stable, and makes the
// table it leaves the one the writer and its committer work from. A fenced writer stops: every later call
// returns ErrWriterFailed wrapping ErrFenced (the run commit fails the writer the same way).
func (w *Writer) commitTx(ctx context.Context, op *commit.Op) (commit.Result, error) {
	op.Ident, op.Branch = w.env.ident, w.env.branch
	if w.env.stableID {
		op.FenceID, op.Epoch = w.env.id, w.env.epoch
	}
	res, err := w.env.txn().Commit(ctx, op)
	if errors.Is(err, ErrFenced) {
		w.pipe.Fail(err)
	}
	if err != nil {
		return res, err
	}
	return res, w.install(res.Table)
}

// fence takes the writer ID over (commit.Fence) on the table tbl and sets e.epoch.
func (e *writerEnv) fence(ctx context.Context, tbl *table.Table) (*table.Table, error) {
	next, epoch, err := commit.Fence(ctx, e.txn(), &commit.Op{Ident: e.ident, Branch: e.branch, Kind: KindFence, Start: tbl}, e.id)
	if err != nil {
		return nil, err
	}
	e.epoch = epoch
	return next, nil
}
