package tabletest

import (
	"context"
	"fmt"
	"iter"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// Loader is what the readers need of a catalog: an iceberg-go catalog, or a test's wrapper of one.
type Loader interface {
	LoadTable(context.Context, table.Identifier) (*table.Table, error)
}

// Load loads the table at ident, failing the test on an error.
func Load(t testing.TB, cat Loader, ident table.Identifier) *table.Table {
	t.Helper()
	tbl, err := cat.LoadTable(context.Background(), ident)
	if err != nil {
		t.Fatalf("load table %v: %v", ident, err)
	}
	return tbl
}

// Records reads tbl's current snapshot with iceberg-go's scanner (opts: selected fields, row lineage): the
// schema read and the records. The iteration fails the test on a read error and releases each record after the
// loop body has seen it, so a caller keeps none beyond its iteration.
func Records(t testing.TB, tbl *table.Table, opts ...table.ScanOption) (*arrow.Schema, iter.Seq[arrow.RecordBatch]) {
	t.Helper()
	sc, it, err := tbl.Scan(opts...).ToArrowRecords(context.Background())
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	return sc, func(yield func(arrow.RecordBatch) bool) {
		for rec, err := range it {
			if err != nil {
				t.Fatalf("scan: %v", err)
			}
			more := yield(rec)
			rec.Release()
			if !more {
				return
			}
		}
	}
}

// LiveDataFiles plans a scan of tbl's current snapshot: one task per live data file, with the delete files and
// deletion vectors the planner assigns to it.
func LiveDataFiles(t testing.TB, tbl *table.Table) []table.FileScanTask {
	t.Helper()
	tasks, err := tbl.Scan().PlanFiles(context.Background())
	if err != nil {
		t.Fatalf("plan files: %v", err)
	}
	return tasks
}

// Paths returns the data file paths of tasks, as a set.
func Paths(tasks []table.FileScanTask) map[string]bool {
	out := make(map[string]bool, len(tasks))
	for _, task := range tasks {
		out[task.File.FilePath()] = true
	}
	return out
}

// HasPositionDeletes reports whether any task's data file has a deletion vector or position delete files.
func HasPositionDeletes(tasks []table.FileScanTask) bool {
	for _, t := range tasks {
		if len(t.DeleteFiles)+len(t.DeletionVectorFiles) > 0 {
			return true
		}
	}
	return false
}

// posFilePathID is the field id of a position delete file's file_path column.
const posFilePathID = 2147483546

// DeleteSet describes the live delete files of a table, as iceberg-go's planner assigns them: equality delete
// files, position delete files and deletion vectors (each counted once).
type DeleteSet struct {
	Eq, Pos, DVs int
	Unscoped     int              // position delete files scoped to no single data file
	PerData      map[string]int   // data file -> live position delete files planned on it
	Positions    map[string]int64 // data file -> rows of the largest of its position delete files
}

// LiveDeleteFiles plans tbl's current snapshot and describes its live delete files.
func LiveDeleteFiles(t testing.TB, tbl *table.Table) DeleteSet {
	t.Helper()
	out := DeleteSet{PerData: map[string]int{}, Positions: map[string]int64{}}
	eq, pos, dvs := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, task := range LiveDataFiles(t, tbl) {
		for _, f := range task.EqualityDeleteFiles {
			eq[f.FilePath()] = true
		}
		for _, f := range task.DeletionVectorFiles {
			var off int64
			if o := f.ContentOffset(); o != nil {
				off = *o
			}
			dvs[fmt.Sprint(f.FilePath(), "@", off)] = true
		}
		for _, f := range task.DeleteFiles {
			if f.ContentType() != ice.EntryContentPosDeletes {
				continue
			}
			// Format version 2 manifests have no referenced_data_file (iceberg-go writes it on v3 only): a
			// file-scoped position delete says so by file_path bounds with lower = upper, as Java's readers take it.
			path := task.File.FilePath()
			scoped := (f.ReferencedDataFile() != nil && *f.ReferencedDataFile() == path) ||
				(string(f.LowerBoundValues()[posFilePathID]) == path && string(f.UpperBoundValues()[posFilePathID]) == path)
			if !pos[f.FilePath()] && !scoped {
				out.Unscoped++
			}
			pos[f.FilePath()] = true
			out.PerData[path]++
			out.Positions[path] = max(out.Positions[path], f.Count())
		}
	}
	out.Eq, out.Pos, out.DVs = len(eq), len(pos), len(dvs)
	return out
}
