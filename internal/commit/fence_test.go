package commit

import (
	"context"
	"testing"

	"github.com/apache/iceberg-go/table"
)

// TestFenceBumpsTheEpoch: each fence takes the next epoch, and a fence whose reply was lost is proven applied
// by its nonce instead of taking another epoch.
func TestFenceBumpsTheEpoch(t *testing.T) {
	f := newTxFixture(t)
	ctx := context.Background()
	fence := func() (*table.Table, int64) {
		t.Helper()
		tbl, epoch, err := Fence(ctx, &f.env, &Op{Ident: f.ident, Branch: table.MainBranch, Kind: "fence"}, "w")
		if err != nil {
			t.Fatal(err)
		}
		return tbl, epoch
	}
	if tbl, epoch := fence(); epoch != 1 || TableEpoch(tbl.Metadata(), "w") != 1 {
		t.Fatalf("first fence: epoch %d, table's %d; want 1", epoch, TableEpoch(tbl.Metadata(), "w"))
	}
	f.cat.lose = 1
	if _, epoch := fence(); epoch != 2 || TableEpoch(f.load(t).Metadata(), "w") != 2 {
		t.Fatalf("fence with a lost reply: epoch %d, table's %d; want 2", epoch, TableEpoch(f.load(t).Metadata(), "w"))
	}
}
