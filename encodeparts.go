package iceberg

import (
	"context"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/icewriter/iceberg/internal/arrowx"
	"golang.org/x/sync/errgroup"
)

// encodeParts returns how many files of their own the rows of a batch about to be encoded (rows rows, bytes
// bytes, after its resolve) are written as at once, and a func that returns the encoder slots the extra parts
// took (pipeline.encode holds the batch's own).
//
// The rule: a batch is cut only into parts the seal policy would have sealed on their own, each at least its
// rows (WithFlushRows) or its bytes (WithFlushBytes), and only into as many as encoder slots are idle
// (MaxInFlight, a Router's shared pool). A batch the policy sealed is about one part's size, so a stream is
// unchanged: its batches already encode MaxInFlight at once, one file each (about twice one encoder's rate on
// two cores). What this reaches is a batch far past the policy with nothing else to encode, written by one
// encoder while the other cores idle: a call larger than the policy (one Write of millions of rows), or the
// rows a checkpointed writer carried across seals until its final flush. Cutting a smaller batch (the rest of
// a stream at Close) would buy speed with files smaller than the policy makes, more of them per commit and
// more for compaction to merge: never done.
func (p *pipeline) encodeParts(rows, bytes int64) (int, func()) {
	p.mu.Lock()
	flushRows, flushBytes := p.cfg.flushRows, p.cfg.flushBytes
	p.mu.Unlock()
	most := int64(1)
	if flushRows > 0 {
		most = max(most, rows/flushRows)
	}
	if flushBytes > 0 {
		most = max(most, bytes/flushBytes)
	}
	extra := 0
	for int64(extra+1) < most && p.enc.sem.TryAcquire(1) {
		extra++
	}
	return extra + 1, func() {
		if extra > 0 {
			p.enc.sem.Release(int64(extra))
		}
	}
}

// recordsSize returns the rows of recs and the bytes of their buffers.
func recordsSize(recs []arrow.RecordBatch) (rows, bytes int64) {
	for _, r := range recs {
		rows += r.NumRows()
		for _, c := range r.Columns() {
			bytes += arrowx.ArraySize(c.Data())
		}
	}
	return rows, bytes
}

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
func (e *fileEncoder) writeParts(ctx context.Context, tbl *table.Table, schema *arrow.Schema, recs []arrow.RecordBatch,
	rows int64, parts int, opts []table.WriteRecordOption) ([]ice.DataFile, error) {
	runs := cutRecords(recs, rows, parts)
	files := make([][]ice.DataFile, len(runs))
	g, gctx := errgroup.WithContext(ctx)
	for i, run := range runs {
		uuid := table.WithWriteUUID(e.names.next())
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
