package iceberg

import (
	"context"
	"fmt"

	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/icewriter/iceberg/internal/commit"
)

// fence takes the writer ID over: it bumps the ID's epoch in a table property with a commit that also moves
// the branch head (an empty snapshot), so that an older process's pending commit fails its requirement and
// its retry finds itself fenced. The snapshot carries a nonce, the proof that a fence whose reply was lost
// applied. Retried like every transaction, within the commit timeout: next to writers that commit in a tight
// loop a fixed number of attempts can all lose the race for the branch head. It sets e.epoch.
func (e *writerEnv) fence(ctx context.Context, tbl *table.Table) (*table.Table, error) {
	nonce := uuid.NewString()
	var epoch int64
	op := &commit.Op{
		Ident: e.ident, Branch: e.branch, What: fmt.Sprintf("fence writer %q", e.id), Kind: KindFence, Start: tbl,
		Build: func(ctx context.Context, tbl *table.Table, _ int) (*table.Transaction, error) {
			epoch = commit.TableEpoch(tbl.Metadata(), e.id) + 1
			tx := tbl.NewTransactionOnBranch(e.branch)
			err := tx.SetProperties(ice.Properties{propEpochPrefix + e.id: fmt.Sprint(epoch)})
			if err == nil {
				err = tx.AddFiles(ctx, nil, ice.Properties{summaryWriterID: e.id, summaryEpoch: fmt.Sprint(epoch),
					summaryFence: nonce}, true)
			}
			if err != nil {
				return nil, fmt.Errorf("iceberg: fence writer %q: %w", e.id, err)
			}
			return tx, nil
		},
		Prove: commit.NonceProof(e.branch, summaryFence, nonce, func(s *table.Snapshot) {
			ep, _ := commit.SummaryProp(s, summaryEpoch)
			fmt.Sscan(ep, &epoch)
		}),
	}
	res, err := e.txn().Commit(ctx, op)
	if err != nil {
		return nil, err // it names the fence
	}
	e.epoch = epoch
	return res.Table, nil
}
