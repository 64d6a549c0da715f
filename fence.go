package iceberg

import (
	"context"
	"fmt"

	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
)

// fence takes the writer ID over: it bumps the ID's epoch in a table property with a commit that also moves
// the branch head (an empty snapshot), so that an older process's pending commit fails its requirement and
// its retry finds itself fenced. The snapshot carries a nonce, the proof that a fence whose reply was lost
// applied. Retried like every transaction, within the commit timeout: next to writers that commit in a tight
// loop a fixed number of attempts can all lose the race for the branch head.
func (w *Writer) fence(ctx context.Context, tbl *table.Table) (*table.Table, error) {
	nonce := uuid.NewString()
	var epoch int64
	op := &txOp{
		ident: w.ident, branch: w.opts.branch, what: fmt.Sprintf("fence writer %q", w.id), start: tbl,
		build: func(ctx context.Context, tbl *table.Table, _ int) (*table.Transaction, error) {
			epoch = tableEpoch(tbl.Metadata(), w.id) + 1
			tx := tbl.NewTransactionOnBranch(w.opts.branch)
			err := tx.SetProperties(ice.Properties{propEpochPrefix + w.id: fmt.Sprint(epoch)})
			if err == nil {
				err = tx.AddFiles(ctx, nil, ice.Properties{summaryWriterID: w.id, summaryEpoch: fmt.Sprint(epoch),
					summaryFence: nonce}, true)
			}
			if err != nil {
				return nil, fmt.Errorf("iceberg: fence writer %q: %w", w.id, err)
			}
			return tx, nil
		},
		prove: nonceProof(w.opts.branch, summaryFence, nonce, func(s *table.Snapshot) {
			e, _ := summaryProp(s, summaryEpoch)
			fmt.Sscan(e, &epoch)
		}),
	}
	res, err := w.txn().commit(ctx, op)
	if err != nil {
		return nil, err // it names the fence
	}
	w.epoch = epoch
	return res.table, nil
}
