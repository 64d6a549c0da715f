package keyindex

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/dv"
	"github.com/icewriter/iceberg/internal/arrowx"
	"github.com/icewriter/iceberg/internal/keyindex/keyenc"
	"golang.org/x/sync/errgroup"
)

// Columns are the key columns an index reads from data files: by field id, as Iceberg names them, and by name
// (Names, in the same order) in a file without field ids.
type Columns struct {
	Names    []string
	FieldIDs []int
}

// ReadFileKeys reads back the key columns of a data file, in row order: the positions its rows have there
// (iceberg-go's writer decides how rows roll across files). Columns are found by field id, as Iceberg names
// them (a file keeps the names of its day, and iceberg-go stores a name like "user-id" as "user_x2Did"); by
// name only in a file without field ids.
func ReadFileKeys(ctx context.Context, tbl *table.Table, df ice.DataFile, ks Columns) (keyenc.List, error) {
	var none keyenc.List
	fs, err := tbl.FS(ctx)
	if err != nil {
		return none, err
	}
	f, err := fs.Open(df.FilePath())
	if err != nil {
		return none, err
	}
	defer f.Close()
	pr, err := file.NewParquetReader(f)
	if err != nil {
		return none, fmt.Errorf("iceberg: read keys of %s: %w", df.FilePath(), err)
	}
	defer pr.Close()
	fr, err := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{BatchSize: 64 << 10}, memory.DefaultAllocator)
	if err != nil {
		return none, err
	}
	var cols []arrow.Array
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	sc := pr.MetaData().Schema
	for i, n := range ks.Names {
		idx := -1
		hasIDs := false
		for c := 0; c < sc.NumColumns(); c++ {
			id := sc.Column(c).SchemaNode().FieldID()
			hasIDs = hasIDs || id >= 0
			if id == int32(ks.FieldIDs[i]) {
				idx = c
				break
			}
		}
		if idx < 0 && !hasIDs {
			idx = sc.ColumnIndexByName(n)
		}
		if idx < 0 {
			return none, fmt.Errorf("iceberg: key column %q (field id %d) not in %s", n, ks.FieldIDs[i], df.FilePath())
		}
		cr, err := fr.GetColumn(ctx, idx)
		if err != nil {
			return none, err
		}
		rgs := make([]int, pr.NumRowGroups())
		for i := range rgs {
			rgs[i] = i
		}
		chunked, err := fr.ReadColumn(rgs, cr)
		if err != nil {
			return none, err
		}
		arr, err := arrowx.Concat(chunked)
		chunked.Release()
		if err != nil {
			return none, err
		}
		cols = append(cols, arr)
	}
	enc, err := keyenc.NewEncoder(cols)
	if err != nil {
		return none, err
	}
	n := cols[0].Len()
	var keys keyenc.List
	for r := range n {
		keys.AppendKey(enc, r)
		if r == 0 { // most keys have one width: size the buffer once
			keys.Grow(n * keys.Span(0, 1))
		}
	}
	return keys, nil
}

// Load builds the index of a table that already holds rows (a writer reopening its table, or one another
// writer or tool wrote) into idx, a new empty index (New): the key columns of every live data file, minus the
// rows its deletes remove, whatever their kind: its deletion vector, its position delete files, and the
// equality deletes scan planning applies to it (Resolver matches them against the file's columns). A file's
// recorded vector (File.dv) holds every position deleted, so the first vector this writer writes for it carries the position deletes and equality-deleted rows
// too (readers ignore position delete files for a file with a vector).
//
// Files are read parallel at a time and indexed as they arrive, and the index spills its keys to local disk
// whenever it passes its budget (CheckBudget), as a running writer's does: a table whose keys exceed the budget
// loads all the same, holding in memory only the index's share (the store.Table's newest keys, the runs' fences,
// bloom filters and deleted bits) plus the files being read. It returns the reason the index cannot be used
// (still past its budget after spilling, or a spill that failed); the caller then closes idx.
func (idx *Index) Load(ctx context.Context, tbl *table.Table, branch string, parallel int) (string, error) {
	snap := tbl.Metadata().SnapshotByName(branch)
	if snap == nil {
		return "", nil
	}
	tasks, err := tbl.Scan(table.WithSnapshotID(snap.SnapshotID)).PlanFiles(ctx)
	if err != nil {
		return "", fmt.Errorf("iceberg: key index: plan: %w", err)
	}
	res, err := NewResolver(ctx, tbl)
	if err != nil {
		return "", err
	}
	type loaded struct {
		task table.FileScanTask
		keys keyenc.List
		dv   *dv.RoaringPositionBitmap
	}
	// Workers read files and hand them over one by one, so at most 2*parallel files' keys wait outside the
	// index; cancel stops them once the index has given up.
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, gctx := errgroup.WithContext(lctx)
	next := make(chan table.FileScanTask, len(tasks))
	for _, t := range tasks {
		next <- t
	}
	close(next)
	out := make(chan loaded, max(1, parallel))
	for range max(1, parallel) {
		g.Go(func() error {
			for t := range next {
				keys, err := ReadFileKeys(gctx, tbl, t.File, idx.cols)
				if err != nil {
					return err
				}
				dead, err := res.Deleted(gctx, t, &KnownKeys{Columns: idx.cols, Keys: &keys})
				if err != nil {
					return fmt.Errorf("iceberg: key index: %w", err)
				}
				select {
				case out <- loaded{task: t, keys: keys, dv: dead}:
				case <-gctx.Done():
					return gctx.Err()
				}
			}
			return nil
		})
	}
	var readErr error
	go func() {
		readErr = g.Wait()
		close(out)
	}()
	reason := ""
	meta := tbl.Metadata()
	for l := range out {
		if reason != "" {
			continue // drain: the workers stop at their next hand-over
		}
		idx.addRows(&File{df: NewFileRef(l.task.File), dv: l.dv, dvFile: liveVector(l.task), applied: appliedDeletes(l.task),
			inherited: idx.inheritedDeletes(meta, l.task, nil)}, &l.keys)
		idx.CheckBudget()
		switch {
		case idx.keys.Err() != nil:
			reason = "the key index's spilled runs: " + idx.keys.Err().Error()
		case idx.over && idx.spillErr != nil:
			reason = fmt.Sprintf("the table's keys exceed the %s and spilling them failed: %v", idx.Budget(), idx.spillErr)
		case idx.over:
			reason = fmt.Sprintf("the table's keys exceed the %s even spilled to local disk", idx.Budget())
		}
		if reason != "" {
			cancel()
		}
	}
	// readErr is set before out is closed.
	if reason != "" {
		return reason, nil
	}
	if readErr != nil {
		return "", readErr
	}
	idx.base = snap.SnapshotID
	return "", nil
}
