package iceberg

import (
	"context"
	"fmt"
	"runtime"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/icewriter/iceberg/internal/encode"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"
)

// writeFanout writes a partitioned batch (one record, owned by the caller) chunk by chunk. Up to GOMAXPROCS
// chunks are written at once; each has one data file open at a time (iceberg-go's clustered writer), and the
// rows their open files hold together stay within one row group (the chunk's largest partition, capped at the
// row-group limit, is its weight), so a batch never buffers more for its files than a single writer would. A
// chunk's rows are taken from the record into a record of their own, partition after partition; its key bloom
// filters are sized for its largest partition. rows, when not nil, gets the order the files hold the rows in
// (fileRowMap).
func (e *fileEncoder) writeFanout(ctx context.Context, tbl *table.Table, schema *arrow.Schema, rec arrow.RecordBatch,
	g *encode.PartitionGroups, opts []table.WriteRecordOption, keep *encode.PackedFiles, rows *fileRowMap) ([]ice.DataFile, error) {
	chunks := encode.FanoutChunks(g, e.limits.ChunkPartitions)
	if rows != nil {
		// The files come chunk after chunk. One chunk is the record as it is: the clustered writer takes its
		// partitions in the order of their first row (encode.GroupPartitions' order); several are each taken partition
		// after partition in the chunk's order.
		for _, c := range chunks {
			parts := c.Parts
			if len(chunks) == 1 {
				parts = make([]int, g.Count())
				for p := range parts {
					parts[p] = p
				}
			}
			for _, p := range parts {
				rows.add(g.Rows(p))
			}
		}
	}
	// write writes one chunk's record (owned).
	write := func(ctx context.Context, c encode.FanoutChunk, part arrow.RecordBatch) ([]ice.DataFile, error) {
		bt, err := e.writeTable(tbl, int64(c.Largest), part)
		if err != nil {
			part.Release()
			return nil, err
		}
		return e.writeRecord(ctx, bt, schema, part, append(opts[:len(opts):len(opts)],
			table.WithWriteUUID(e.names.next())))
	}
	if len(chunks) == 1 {
		// One chunk: the record as it is (the clustered writer groups its rows itself).
		rec.Retain()
		files, err := write(ctx, chunks[0], rec)
		if err != nil {
			return nil, err
		}
		return e.keep(files, keep)
	}
	// Each chunk's files are packed as soon as it is written (when keep is set): a part of 9,000 partitions
	// would otherwise hold 9,000 DataFiles as built until its last chunk ends.
	out := make([][]ice.DataFile, len(chunks))
	packs := make([]*encode.PackedFiles, len(chunks))
	budget := int64(e.rowGroupRows)
	rowsSem := semaphore.NewWeighted(budget)
	eg, ectx := errgroup.WithContext(ctx)
	eg.SetLimit(runtime.GOMAXPROCS(0))
	for i, c := range chunks {
		weight := min(int64(c.Largest), budget)
		if err := rowsSem.Acquire(ectx, weight); err != nil {
			break // a chunk failed (its error is the group's) or ctx ended
		}
		eg.Go(func() error {
			defer rowsSem.Release(weight)
			rows := make([]int32, 0, c.Rows)
			for _, p := range c.Parts {
				rows = append(rows, g.Rows(p)...)
			}
			part, err := encode.TakeRecordRows(ectx, e.mem, rec, rows)
			if err != nil {
				return fmt.Errorf("iceberg: the rows of %d partitions: %w", len(c.Parts), err)
			}
			files, err := write(ectx, c, part)
			if err != nil {
				return err
			}
			if keep != nil {
				packs[i] = keep.Empty()
			}
			out[i], err = e.keep(files, packs[i])
			return err
		})
	}
	if err := eg.Wait(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if keep != nil {
		for _, p := range packs {
			if p != nil {
				keep.Merge(p)
			}
		}
		return nil, nil
	}
	return slices.Concat(out...), nil
}
