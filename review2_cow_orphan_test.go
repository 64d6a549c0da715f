package iceberg_test

import (
	"context"
	"fmt"
	"io/fs"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
)

// TestReview2CopyOnWriteLeavesNoUnreferencedDataFile: after a copy-on-write upsert commit, every data file the
// writer wrote is referenced by some snapshot of the table: on v3 the new-row files carryRowIDs writes again do
// not leave the originals behind, and when the first attempt fails the files it wrote (rewrites, carried
// copies) are deleted once the retry commits.
func TestReview2CopyOnWriteLeavesNoUnreferencedDataFile(t *testing.T) {
	for _, v := range []int{2, 3} {
		for _, failFirst := range []bool{false, true} {
			t.Run(fmt.Sprintf("v%d/fail-first=%v", v, failFirst), func(t *testing.T) {
				ctx := context.Background()
				cat := &slowCatalog{Catalog: openCatalog(t)}
				ident := table.Identifier{"cow", "orphans"}
				w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(kvSchema, iceberg.IdentifierFields("id"),
					iceberg.FormatVersion(v)), iceberg.WithMode(iceberg.CopyOnWrite), iceberg.WithFlushInterval(0),
					iceberg.WithSmallFileCompaction(0))
				if err != nil {
					t.Fatal(err)
				}
				ids := []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
				if err := w.Write(ctx, kvBatch(ids, ids)); err != nil {
					t.Fatal(err)
				}
				if err := w.Flush(ctx); err != nil {
					t.Fatal(err)
				}
				if failFirst {
					cat.mu.Lock()
					cat.failBefore = 1
					cat.mu.Unlock()
				}
				if err := w.Upsert(ctx, kvBatch([]int64{5, 20}, []int64{-5, -20})); err != nil {
					t.Fatal(err)
				}
				if err := w.Close(ctx); err != nil {
					t.Fatal(err)
				}
				if st := w.Stats(); (st.Retries != 0) != failFirst {
					t.Fatalf("retries: %+v", st)
				}
				if un := unreferencedDataFiles(t, cat, ident); len(un) > 0 {
					t.Fatalf("%d data file(s) in storage referenced by no snapshot: %v", len(un), un)
				}
				model := kvModel{}
				for _, id := range ids {
					model.insert(id, id)
				}
				model.upsert(5, -5)
				model.upsert(20, -20)
				compareKV(t, readKV(t, cat, ident), model)
			})
		}
	}
}

// unreferencedDataFiles lists the Parquet files under the table's location that no snapshot references.
func unreferencedDataFiles(t *testing.T, cat icecatalog.Catalog, ident table.Identifier) []string {
	t.Helper()
	ctx := context.Background()
	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	fio, err := tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	referenced := map[string]bool{}
	for _, s := range tbl.Metadata().Snapshots() {
		mans, err := s.Manifests(fio)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mans {
			entries, err := m.FetchEntries(fio, false)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				referenced[localPath(e.DataFile().FilePath())] = true
			}
		}
	}
	var unreferenced []string
	root := localPath(tbl.Location())
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".parquet") && !referenced[p] {
			unreferenced = append(unreferenced, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return unreferenced
}

func localPath(loc string) string {
	if u, err := url.Parse(loc); err == nil && u.Scheme == "file" {
		return filepath.Clean(u.Path)
	}
	return filepath.Clean(loc)
}
