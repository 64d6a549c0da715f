package encode

import (
	"context"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/icewriter/iceberg/internal/arrowx"
	"golang.org/x/sync/errgroup"
)

// Writing an unpartitioned table's batch as several files at once (the caller decides how many).

// cutRecords cuts recs (owned; rows rows in all) into n runs of consecutive rows of about rows/n each, slicing
// a record where a run ends inside it. The runs own what they hold; recs' records are released.
func cutRecords(recs []arrow.RecordBatch, rows int64, n int) [][]arrow.RecordBatch {
	out := make([][]arrow.RecordBatch, 0, n)
	per := (rows + int64(n) - 1) / int64(n)
	var cur []arrow.RecordBatch
	var curRows int64
	for _, r := range recs {
		for off := int64(0); off < r.NumRows(); {
			take := min(r.NumRows()-off, per-curRows)
			if off == 0 && take == r.NumRows() {
				r.Retain()
				cur = append(cur, r)
			} else {
				cur = append(cur, r.NewSlice(off, off+take))
			}
			off += take
			if curRows += take; curRows == per {
				out = append(out, cur)
				cur, curRows = nil, 0
			}
		}
		r.Release()
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// writeParts writes the records of an unpartitioned table's batch (owned; rows rows) as parts runs of
// consecutive rows at once, each through a write of its own (its files rolled at the target size as any
// batch's), and returns their files in the order of the rows. opts are the writes' options but the write UUID,
// which each part gets from the namer.
func (e *Encoder[H]) writeParts(ctx context.Context, tbl *table.Table, schema *arrow.Schema, recs []arrow.RecordBatch,
	rows int64, parts int, opts []table.WriteRecordOption) ([]ice.DataFile, error) {
	runs := cutRecords(recs, rows, parts)
	files := make([][]ice.DataFile, len(runs))
	g, gctx := errgroup.WithContext(ctx)
	for i, run := range runs {
		uuid := table.WithWriteUUID(e.next())
		g.Go(func() error {
			// WriteRecords releases each record it takes; those it never took are released here.
			defer arrowx.ReleaseRecords(run...)
			var n int64
			for _, r := range run {
				n += r.NumRows()
			}
			bt, err := e.writeTable(tbl, n, run...)
			if err != nil {
				return err
			}
			recs := func(yield func(arrow.RecordBatch, error) bool) {
				for j, r := range run {
					run[j] = nil
					if !yield(r, nil) {
						return
					}
				}
			}
			files[i], err = collectFiles(table.WriteRecords(gctx, bt, schema, recs, append(slices.Clip(opts), uuid)...))
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var out []ice.DataFile
	for _, f := range files {
		out = append(out, f...)
	}
	return out, nil
}
