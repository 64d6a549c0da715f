package iceberg_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// TestKeyIndexLoadsOverPositionDeletes: a v2 table whose equality deletes were converted to position delete
// files, upgraded to format v3, gets a writer whose key index is built with the position deletes applied (no
// fallback to equality deletes): its upserts and deletes become deletion vectors that carry the position
// deletes' rows too (readers ignore position delete files for a file with a vector), and the table reads back
// as the model.
func TestKeyIndexLoadsOverPositionDeletes(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"mor", "upgraded"}
	open := func(id string) *iceberg.Writer {
		w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(kvSchema, iceberg.IdentifierFields("id"),
			iceberg.FormatVersion(2)), iceberg.WithMode(iceberg.MergeOnRead), iceberg.WithWriterID(id),
			iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompactionEvery(0), iceberg.WithDeleteConversionEvery(0))
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	model := kvModel{}
	a := open("a")
	writeIDs(t, ctx, a, model, 1000)
	rng := rand.New(rand.NewPCG(2, 3))
	ops := &kvOps{rng: rng, keySpace: 1000, maxRows: 40, writes: 0, next: 1_000_000}
	for range 6 {
		ops.apply(t, ctx, a, model)
		if err := a.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.ConvertEqualityDeletes(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if eq, pos, _ := liveDeleteFiles(t, cat, ident); eq != 0 || pos == 0 {
		t.Fatalf("after the conversion: %d equality delete files, %d position delete files", eq, pos)
	}
	tbl := tabletest.Load(t, cat, ident)
	tx := tbl.NewTransaction()
	if err := tx.UpgradeFormatVersion(3); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	compareKV(t, readKV(t, cat, ident), model)

	b := open("b")
	for range 6 {
		ops.apply(t, ctx, b, model)
		if err := b.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	compareKV(t, readKV(t, cat, ident), model)
	if eq, _, dvs := liveDeleteFiles(t, cat, ident); eq != 0 || dvs == 0 {
		t.Fatalf("after the v3 writer: %d equality delete files, %d deletion vectors; want vectors only", eq, dvs)
	}
}
