package catalog_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/icewriter/iceberg/catalog"
)

// TestSQLiteMultiTableCommit: the embedded catalog commits several tables in one database transaction
// (catalog.TransactionalCatalog): two tables' changes both apply; when one table's requirement fails neither
// applies, the error wraps table.ErrCommitFailed, and the metadata file staged for the other table is removed.
func TestSQLiteMultiTableCommit(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cat, err := catalog.Open(ctx, "sqlite://"+filepath.Join(dir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.(icecatalog.Closer).Close()
	tc, ok := cat.(icecatalog.TransactionalCatalog)
	if !ok {
		t.Fatal("the SQLite catalog is not a TransactionalCatalog")
	}
	if err := cat.CreateNamespace(ctx, table.Identifier{"db"}, nil); err != nil {
		t.Fatal(err)
	}
	sc := iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true})
	a, b := table.Identifier{"db", "a"}, table.Identifier{"db", "b"}
	for _, id := range []table.Identifier{a, b} {
		if _, err := cat.CreateTable(ctx, id, sc); err != nil {
			t.Fatal(err)
		}
	}
	commit := func(id table.Identifier, v string, extra ...table.Requirement) table.TableCommit {
		tbl, err := cat.LoadTable(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		tx := tbl.NewTransaction()
		if err := tx.SetProperties(map[string]string{"probe": v}); err != nil {
			t.Fatal(err)
		}
		c, err := tx.TableCommit()
		if err != nil {
			t.Fatal(err)
		}
		c.Requirements = append(c.Requirements, extra...)
		return c
	}
	props := func() (string, string) {
		ta, _ := cat.LoadTable(ctx, a)
		tb, _ := cat.LoadTable(ctx, b)
		return ta.Properties()["probe"], tb.Properties()["probe"]
	}
	if err := tc.CommitTransaction(ctx, []table.TableCommit{commit(a, "a1"), commit(b, "b1")}); err != nil {
		t.Fatal(err)
	}
	if pa, pb := props(); pa != "a1" || pb != "b1" {
		t.Fatalf("after a multi-table commit: a=%q b=%q", pa, pb)
	}
	metaFiles := func() int {
		n := 0
		_ = filepath.WalkDir(filepath.Join(dir, "warehouse"), func(p string, d os.DirEntry, _ error) error {
			if d != nil && !d.IsDir() && strings.HasSuffix(p, ".metadata.json") {
				n++
			}
			return nil
		})
		return n
	}
	before := metaFiles()
	err = tc.CommitTransaction(ctx, []table.TableCommit{commit(a, "a2"), commit(b, "b2", table.AssertLastAssignedFieldID(99))})
	if !errors.Is(err, table.ErrCommitFailed) {
		t.Fatalf("a failed requirement: %v", err)
	}
	if pa, pb := props(); pa != "a1" || pb != "b1" {
		t.Fatalf("after a failed multi-table commit: a=%q b=%q", pa, pb)
	}
	if after := metaFiles(); after != before {
		t.Fatalf("%d metadata files before the failed commit, %d after", before, after)
	}
}
