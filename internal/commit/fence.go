package commit

import (
	"context"
	"fmt"

	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
)

// Snapshot summary keys of the fence (the root package names them too, for the runs it commits).
const (
	SummaryWriterID = "icewriter.writer-id"
	SummaryEpoch    = "icewriter.epoch"
	SummaryFence    = "icewriter.fence"
)

// Fence takes writer ID id over: it bumps the ID's epoch in a table property with a commit that also moves the
// branch head (an empty snapshot), so that an older process's pending commit fails its requirement and its
// retry finds itself fenced. The snapshot carries a nonce, the proof that a fence whose reply was lost applied.
// Retried like every transaction, within the commit timeout: next to writers that commit in a tight loop a
// fixed number of attempts can all lose the race for the branch head. op names the table, branch, kind and the
// table to start from; Fence sets the rest. It returns the table the fence left and the epoch it took.
func Fence(ctx context.Context, e *Env, op *Op, id string) (*table.Table, int64, error) {
	nonce := uuid.NewString()
	var epoch int64
	op.What = fmt.Sprintf("fence writer %q", id)
	op.Build = func(ctx context.Context, tbl *table.Table, _ int) (*table.Transaction, error) {
		epoch = TableEpoch(tbl.Metadata(), id) + 1
		tx := tbl.NewTransactionOnBranch(op.Branch)
		err := tx.SetProperties(ice.Properties{EpochPropPrefix + id: fmt.Sprint(epoch)})
		if err == nil {
			err = tx.AddFiles(ctx, nil, ice.Properties{SummaryWriterID: id, SummaryEpoch: fmt.Sprint(epoch),
				SummaryFence: nonce}, true)
		}
		if err != nil {
			return nil, fmt.Errorf("iceberg: fence writer %q: %w", id, err)
		}
		return tx, nil
	}
	op.Prove = NonceProof(op.Branch, SummaryFence, nonce, func(s *table.Snapshot) {
		ep, _ := SummaryProp(s, SummaryEpoch)
		fmt.Sscan(ep, &epoch)
	})
	res, err := e.Commit(ctx, op)
	if err != nil {
		return nil, 0, err // it names the fence
	}
	return res.Table, epoch, nil
}
