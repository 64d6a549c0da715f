package encode

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"math"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/google/uuid"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"
)

// Encoder writes a batch's rows as Parquet data files through iceberg-go's writer: files rolled at the
// target size (the row-group limit lets rolling happen), the table's partitioning, and bloom filters on the key
// columns sized for a file's rows. Encoders of several batches share it. H is the caller's batch, which a bulk
// file closed by another batch's encoding goes to (ClosedSpan.Holder). The exported fields are set before its
// first use.
type Encoder[H any] struct {
	files, bytes atomic.Int64 // data files written and their bytes (Stats)

	Mem            memory.Allocator
	TargetFileSize int64
	RowGroupRows   int
	KeyNames       []string         // the key columns (nil: no key, no bloom filters)
	Names          func() uuid.UUID // the write UUID of each call: the writer ID's mark (nil: random)
	Log            *slog.Logger
	Limits         FanoutLimits
	// CoalesceRows is the rows up to which an unpartitioned table's consecutive small records are joined.
	CoalesceRows int64
	// partShare is the largest partition's share of the rows of the last batch written to a partitioned table
	// (float64 bits): it sizes the next batch's key bloom filters when a batch cannot be grouped.
	partShare atomic.Uint64
	warned    atomic.Bool  // a batch's fan-out was reported
	lastParts atomic.Int64 // the partitions of the last batch grouped (LastParts)
	bulkSize  atomic.Int64 // a Router's bulk phase (SetBulk): its target file size, and no key bloom filters; 0: live
	// carry: in the bulk phase, an unpartitioned table's batches go into files kept open across batches (open).
	carry atomic.Bool
	open  bulkFiles[H]
	// shredWarned: a bulk phase writing files per batch because the table shreds its variants was reported.
	shredWarned atomic.Bool
	// Shred is the chosen paths of the table's variant columns (nil: none): the batches' files are written by
	// writeShredded in that layout, not by iceberg-go's writer. Only an unpartitioned table's (the writer refuses
	// chosen paths on others).
	Shred ShredLayout
}

// Batch is what the encoder takes of a sealed batch: its records, which it takes as it writes them (leaving
// nil; an error leaves the ones it did not take), and for a Router's bulk phase the batch's sequence number,
// the batch itself (Self: the holder of the bulk files it is the newest batch of) and its bulk part.
// Lineage is the schema of a write that keeps the records' v3 row-lineage columns (the one given to
// table.WithPreserveRowLineage among the write's options; nil: none), which the chosen-path writer reads
// the files' statistics with.
type Batch[H any] struct {
	Recs    []arrow.RecordBatch
	Seq     int64
	Self    H
	Bulk    *Bulk[H]
	Lineage *ice.Schema
}

// Written is what Write wrote for a batch: its data files, or them packed (Packed), and the order the files
// hold the rows in (nil: unknown).
type Written struct {
	Files  []ice.DataFile
	Packed *PackedFiles
	Rows   *RowOrder
}

// RowOrder is the order a batch's new data files hold the rows written (the batch's records, in order): Order
// lists the row numbers partition group after partition group, in the order the encoder handed them to
// iceberg-go, and Ends is where each group ends in Order. A nil Order is the rows in order (an unpartitioned
// table). Only a table without a sort order gets one: iceberg-go sorts each record of a sorted table.
type RowOrder struct {
	Order []int32
	Ends  []int
}

// add appends a partition group's rows.
func (o *RowOrder) add(rows []int32) {
	o.Order = append(o.Order, rows...)
	o.Ends = append(o.Ends, len(o.Order))
}

// mapsRows reports whether the files of tbl's writes hold their rows in the order given to them.
func mapsRows(tbl *table.Table) bool { return tbl.Metadata().SortOrder().IsUnsorted() }

// next is the write UUID of the next file-writing call.
func (e *Encoder[H]) next() uuid.UUID {
	if e.Names == nil {
		return uuid.New()
	}
	return e.Names()
}

// Stats is the data files the encoder wrote and their bytes.
func (e *Encoder[H]) Stats() (files, bytes int64) { return e.files.Load(), e.bytes.Load() }

// LastParts is the partitions of the last batch grouped by partition (0: none yet).
func (e *Encoder[H]) LastParts() int64 { return e.lastParts.Load() }

// count adds files to the encoder's counters.
func (e *Encoder[H]) count(files []ice.DataFile) {
	for _, f := range files {
		e.files.Add(1)
		e.bytes.Add(f.FileSizeBytes())
	}
}

// Write encodes one batch (partitioning, rolling and statistics included) and returns its data files, packed
// when pack is set (heldfiles.go: files only the commit reads), else as iceberg-go built them. An unpartitioned
// table's batch is written as parts runs of its rows at once (the caller decides how many; 1: one write).
//
// On a partitioned table the batch is joined into one record and its rows grouped by partition (fanout.go):
// chunks of whole partitions go to iceberg-go's clustered writer, which keeps one data file open at a time, a
// few chunks at once. A batch whose partition values the grouping cannot read is written as one record by a
// single clustered write.
// opts are the writes' options of the batch (its row-id columns); the encoder adds the file size, the
// row-group limit, the clustered write and the write UUID.
func (e *Encoder[H]) Write(ctx context.Context, tbl *table.Table, schema *arrow.Schema, b *Batch[H],
	opts []table.WriteRecordOption, pack bool, parts int) (Written, error) {
	var keep *PackedFiles
	if pack {
		keep = NewPackedFiles(tbl)
	}
	files, rows, err := e.writeFiles(ctx, tbl, schema, b, opts, keep, parts)
	if err != nil {
		return Written{}, err
	}
	if keep != nil {
		keep.Trim()
	}
	return Written{Files: files, Packed: keep, Rows: rows}, nil
}

// writeFiles is Write's encoding: the files it wrote go into keep when it is not nil (returned otherwise), and
// the order they hold the rows in, where known.
func (e *Encoder[H]) writeFiles(ctx context.Context, tbl *table.Table, schema *arrow.Schema, b *Batch[H],
	batchOpts []table.WriteRecordOption, keep *PackedFiles, parts int) ([]ice.DataFile, *RowOrder, error) {
	opts := []table.WriteRecordOption{
		table.WithTargetFileSize(e.fileSize()),
		table.WithParquetRowGroupLimit(e.RowGroupRows),
	}
	opts = append(opts, batchOpts...)
	if tbl.Spec().IsUnpartitioned() {
		if err := e.coalesceTo(schema, b, e.CoalesceRows); err != nil {
			return nil, nil, err
		}
		var rows int64
		for _, r := range b.Recs {
			rows += r.NumRows()
		}
		// Ownership of each record passes to the writes (WriteRecords releases each once encoded): the batch's
		// memory is freed while it encodes, not after.
		recs := b.Recs
		b.Recs = nil
		var files []ice.DataFile
		var err error
		if e.Shred != nil {
			files, err = e.writeShredded(ctx, tbl, schema, recs, b.Lineage)
		} else {
			files, err = e.writeParts(ctx, tbl, schema, recs, rows, max(parts, 1), opts)
		}
		if err != nil {
			return nil, nil, err
		}
		var order *RowOrder
		if mapsRows(tbl) {
			order = &RowOrder{}
		}
		files, err = e.keep(files, keep)
		return files, order, err
	}
	one := b.Recs[0]
	if len(b.Recs) > 1 {
		var err error
		if one, err = ConcatRecords(e.Mem, schema, b.Recs); err != nil {
			return nil, nil, err
		}
		for _, r := range b.Recs {
			r.Release()
		}
	}
	b.Recs = nil
	defer one.Release()
	rows := one.NumRows()
	if rows == 0 {
		return nil, nil, nil
	}
	opts = append(opts, table.WithClusteredWrite())
	spec, sc := tbl.Spec(), tbl.Schema()
	groups, grouped := GroupPartitions(spec, sc, one)
	if e.Shred != nil {
		return e.writeShreddedPartitions(ctx, tbl, schema, one, groups, grouped, b.Lineage, keep)
	}
	if grouped {
		e.partShare.Store(math.Float64bits(float64(groups.Largest()) / float64(rows)))
		e.lastParts.Store(int64(groups.Count()))
		e.WarnFanout(tbl, groups.Count(), rows)
		var order *RowOrder
		if mapsRows(tbl) {
			order = &RowOrder{}
		}
		files, err := e.writeFanout(ctx, tbl, schema, one, groups, opts, keep, order)
		if err != nil {
			return nil, nil, err
		}
		return files, order, nil
	}
	// Partition sources the grouping cannot read: the key columns' bloom filters are sized for twice the largest
	// partition's share in the writer's previous batch (a first batch sizes them for all its rows). A filter
	// too small only raises its false-positive rate.
	est := rows
	if share := math.Float64frombits(e.partShare.Load()); share > 0 {
		est = int64(math.Ceil(float64(rows) * min(1, 2*share)))
	}
	bt, err := e.writeTable(tbl, est, one)
	if err != nil {
		return nil, nil, err
	}
	one.Retain()
	out, err := WriteRecord(ctx, bt, schema, one, append(opts, table.WithWriteUUID(e.next())))
	if err != nil {
		return nil, nil, err
	}
	var largest int64
	for _, df := range out {
		largest = max(largest, df.Count())
	}
	e.partShare.Store(math.Float64bits(float64(largest) / float64(rows)))
	files, err := e.keep(out, keep)
	return files, nil, err
}

// keep counts files written (Stats) and packs them into keep, returning nil, or returns them when keep is nil.
func (e *Encoder[H]) keep(files []ice.DataFile, keep *PackedFiles) ([]ice.DataFile, error) {
	e.count(files)
	if keep == nil {
		return files, nil
	}
	return nil, keep.Add(files)
}

// WarnFanout warns, once per writer, of a batch over more than the warning's count of partitions.
func (e *Encoder[H]) WarnFanout(tbl *table.Table, partitions int, rows int64) {
	if partitions > e.Limits.WarnPartitions && e.Log != nil && e.warned.CompareAndSwap(false, true) {
		e.Log.Warn("iceberg: a batch fans out into many partitions; every commit adds a data file per partition "+
			"(consider a coarser transform such as bucket(N, column), or a longer flush interval); "+
			"reported once per writer",
			"table", tbl.Identifier(), "partition_by", PartitionColumns(tbl.Spec(), tbl.Schema()),
			"partitions", partitions, "rows", rows)
	}
}

// writeTable returns tbl, or a copy of it for iceberg-go's writer to write recs with: bloom filters on the key
// columns sized for files of rows rows (none without key columns, and in a bulk phase), the Parquet write
// batch of writeBatchRows, and on a table that shreds its variants the inference over all of recs' rows
// (ShredInference).
func (e *Encoder[H]) writeTable(tbl *table.Table, rows int64, recs ...arrow.RecordBatch) (*table.Table, error) {
	props := tbl.Properties()
	set := ice.Properties{}
	if e.KeyNames != nil && !e.Bulk() {
		maps.Copy(set, KeyBloomProperties(props, e.KeyNames, min(rows, int64(e.RowGroupRows))))
	}
	if n := WriteBatchRows(props, recs); n > 0 {
		set[table.ParquetPageRowLimitKey] = strconv.Itoa(n)
	}
	written := rows
	if len(recs) > 0 {
		written = 0
		for _, r := range recs {
			written += r.NumRows()
		}
	}
	maps.Copy(set, ShredInference(props, tbl.Schema(), written))
	return WithWriteProperties(tbl, set)
}

// WriteRecord writes one record, whose ownership passes to iceberg-go (it releases the records it takes).
func WriteRecord(ctx context.Context, tbl *table.Table, schema *arrow.Schema, rec arrow.RecordBatch,
	opts []table.WriteRecordOption) ([]ice.DataFile, error) {
	taken := false
	recs := func(yield func(arrow.RecordBatch, error) bool) {
		taken = true
		yield(rec, nil)
	}
	files, err := collectFiles(table.WriteRecords(ctx, tbl, schema, recs, opts...))
	if !taken {
		rec.Release() // refused before it read a record
	}
	return files, err
}

// collectFiles gathers the files of a write, or its first error.
func collectFiles(files iter.Seq2[ice.DataFile, error]) ([]ice.DataFile, error) {
	var out []ice.DataFile
	for df, err := range files {
		if err != nil {
			return nil, err
		}
		out = append(out, df)
	}
	return out, nil
}

// coalesceTo joins runs of consecutive records into records of up to maxRows rows. An unpartitioned table's
// batch is joined up to CoalesceRows: Parquet's column writers pay per record, so a batch of 400-row records (a
// call per poll, a checkpoint after each) encoded at two thirds of the rate of the same rows in large records.
// Joining is a copy of buffers, far cheaper.
func (e *Encoder[H]) coalesceTo(schema *arrow.Schema, b *Batch[H], maxRows int64) error {
	var out []arrow.RecordBatch
	for i := 0; i < len(b.Recs); {
		j, rows := i, int64(0)
		for j < len(b.Recs) && rows+b.Recs[j].NumRows() <= maxRows {
			rows += b.Recs[j].NumRows()
			j++
		}
		if j-i < 2 {
			out = append(out, b.Recs[i])
			b.Recs[i] = nil
			i = max(j, i+1)
			continue
		}
		one, err := ConcatRecords(e.Mem, schema, b.Recs[i:j])
		if err != nil {
			for _, r := range out {
				r.Release()
			}
			return err
		}
		for k := i; k < j; k++ {
			b.Recs[k].Release()
			b.Recs[k] = nil
		}
		out = append(out, one)
		i = j
	}
	b.Recs = out
	return nil
}

// ConcatRecords joins records of one schema into one.
func ConcatRecords(mem memory.Allocator, schema *arrow.Schema, recs []arrow.RecordBatch) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, schema.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	var rows int64
	for _, r := range recs {
		rows += r.NumRows()
	}
	parts := make([]arrow.Array, len(recs))
	for i := range cols {
		for j, r := range recs {
			parts[j] = r.Column(i)
		}
		c, err := array.Concatenate(parts, mem)
		if err != nil {
			return nil, fmt.Errorf("iceberg: concatenate column %q: %w", schema.Field(i).Name, err)
		}
		cols[i] = c
	}
	return array.NewRecordBatch(schema, cols, rows), nil
}

// writeFanout writes a partitioned batch (one record, owned by the caller) chunk by chunk. Up to GOMAXPROCS
// chunks are written at once; each has one data file open at a time (iceberg-go's clustered writer), and the
// rows their open files hold together stay within one row group (the chunk's largest partition, capped at the
// row-group limit, is its weight), so a batch never buffers more for its files than a single writer would. A
// chunk's rows are taken from the record into a record of their own, partition after partition; its key bloom
// filters are sized for its largest partition. rows, when not nil, gets the order the files hold the rows in
// (RowOrder).
func (e *Encoder[H]) writeFanout(ctx context.Context, tbl *table.Table, schema *arrow.Schema, rec arrow.RecordBatch,
	g *PartitionGroups, opts []table.WriteRecordOption, keep *PackedFiles, rows *RowOrder) ([]ice.DataFile, error) {
	chunks := FanoutChunks(g, e.Limits.ChunkPartitions)
	if rows != nil {
		// The files come chunk after chunk. One chunk is the record as it is: the clustered writer takes its
		// partitions in the order of their first row (GroupPartitions' order); several are each taken partition
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
	write := func(ctx context.Context, c FanoutChunk, part arrow.RecordBatch) ([]ice.DataFile, error) {
		bt, err := e.writeTable(tbl, int64(c.Largest), part)
		if err != nil {
			part.Release()
			return nil, err
		}
		return WriteRecord(ctx, bt, schema, part, append(opts[:len(opts):len(opts)],
			table.WithWriteUUID(e.next())))
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
	packs := make([]*PackedFiles, len(chunks))
	budget := int64(e.RowGroupRows)
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
			part, err := TakeRecordRows(ectx, e.Mem, rec, rows)
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

// fileSize is the size at which files roll: the bulk phase's, else the writer's.
func (e *Encoder[H]) fileSize() int64 {
	if n := e.bulkSize.Load(); n > 0 {
		return n
	}
	return e.TargetFileSize
}

// Bulk reports whether the encoder writes for the bulk phase (no key bloom filters).
func (e *Encoder[H]) Bulk() bool { return e.bulkSize.Load() > 0 }

// SetBulk puts the encoder in a Router's bulk phase, its files rolled at fileSize and an unpartitioned table's
// batches carried in bulk files across batches (bulkfile.go), or back in the live phase (fileSize 0).
func (e *Encoder[H]) SetBulk(fileSize int64) {
	e.bulkSize.Store(fileSize)
	e.carry.Store(fileSize > 0)
}
