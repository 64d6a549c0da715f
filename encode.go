package iceberg

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"math"
	"strconv"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/icewriter/iceberg/internal/encode"
)

// encode writes a sealed batch's files for the pipeline. A keyed batch is resolved first (rows superseded
// inside it are dropped); what its upserted and deleted keys become is the key stage's choice
// (keyStage.stageDeletes): with the key index they wait for the commit loop to turn them into deletion vectors
// (and the keys of the batch's new data files go to the index: keyStage.fileKeys), in copy-on-write mode they go to
// the committer, which rewrites the files holding them, and otherwise they are written here as equality delete
// files.
func (w *Writer) encode(ctx context.Context, b *batch) error {
	tbl, conf := w.view.get()
	schema := b.in.schema
	if schema == nil {
		schema = conf.target
	}
	if b.bulk.closer {
		return w.files.closeGen(ctx, tbl, b)
	}
	var files, deletes []ice.DataFile
	var res *resolved
	var err error
	indexed := w.keys.indexed()
	var delDone chan struct{}
	var delErr error
	if w.keys.spec != nil {
		res, err = w.keys.resolve(ctx, b, w.env.mem)
		if err == nil {
			for _, r := range b.in.recs {
				r.Release()
			}
			b.in.recs, b.in.hashes, b.in.sels = res.data, nil, nil
			// The deletes are staged, or written as equality delete files, while the data files are written: in
			// BenchmarkApply the delete file took an eighth of the batch's encoding, on one core of two.
			delDone = make(chan struct{})
			go func() {
				defer close(delDone)
				deletes, delErr = w.keys.stageDeletes(ctx, tbl, b, res.deletes, indexed)
			}()
		}
	}
	var packed *encode.PackedFiles
	if err == nil && indexed && !w.files.carries(tbl, b) {
		// Format version 3: the upserted rows' _row_id goes into the files now, not in a rewrite at commit.
		schema, err = w.keys.encodeRowIDs(tbl, schema, b, res)
	}
	if err == nil && len(b.in.recs) > 0 {
		if w.files.carries(tbl, b) {
			err = w.files.writeBulk(ctx, tbl, schema, b) // its files come when they close (bulkfile.go)
		} else {
			// Only the commit reads an inserts-only batch's files (a key index reads them too): packed until then.
			parts, release := 1, func() {}
			if tbl.Spec().IsUnpartitioned() && !w.files.bulk() {
				parts, release = w.pipe.encodeParts(recordsSize(b.in.recs))
			}
			files, packed, err = w.files.write(ctx, tbl, schema, b, !b.in.keyed && !indexed, parts)
			release()
		}
	}
	if delDone != nil {
		<-delDone
		if err == nil {
			err = delErr
		}
	}
	if err == nil && indexed {
		b.keys.fileKeys, err = w.keys.fileKeys(ctx, tbl, files, res, b.enc.rowMap)
	}
	var written, keyed map[uint64]struct{}
	if res != nil {
		written, keyed = res.keySets()
	}
	if err != nil {
		return err
	}
	b.enc.files, b.enc.deletes, b.enc.packed = files, deletes, packed
	b.enc.held = packed.MemBytes() + int64(len(files)+len(deletes))*fileMetaBytes(schema)
	b.enc.runHeld = int64(b.dataFileCount()+len(deletes)) * fileMetaBytes(schema)
	if res != nil {
		b.enc.written, b.enc.keyedSet = written, keyed
	}
	return nil
}

// count adds files to the encoder's counters.
func (e *fileEncoder) count(files []ice.DataFile) {
	for _, f := range files {
		e.files.Add(1)
		e.bytes.Add(f.FileSizeBytes())
	}
}

// fileMetaBytes estimates the memory one data or delete file's metadata holds as an iceberg-go DataFile: its
// path, partition maps and each column's statistics, once as Avro lists and, after any statistics accessor ran,
// again as maps (Go maps grow in steps: 9 columns cost as much as 12). Measured once read (TestFileMetadataMemory,
// files of identity partitions): 3.2 KiB on 2 columns, 3.7 KiB on 6, 8.1 KiB on 16, 14.4 KiB on 32, 27.3 KiB on
// 64; 2.4 KiB on 6 columns as WriteRecords builds it. The estimate covers every one of them, within 1.5 times.
// A batch's files held this way until the commit count against the memory limit (pipeline.heldLocked), and a run
// takes batches up to a share of the limit of it (pipeline.runHeldCap): the files of inserts-only batches wait
// packed (heldfiles.go, about a tenth of it) and take this much only in the run that commits them.
func fileMetaBytes(schema *arrow.Schema) int64 {
	return 2560 + 416*int64(schema.NumFields())
}

// fileEncoder writes a batch's rows as Parquet data files through iceberg-go's writer: files rolled at the
// target size (the row-group limit lets rolling happen), the table's partitioning, and bloom filters on the key
// columns sized for a file's rows. Encoders of several batches share it.
type fileEncoder struct {
	files, bytes atomic.Int64 // data files written and their bytes (Stats)

	mem            memory.Allocator
	targetFileSize int64
	rowGroupRows   int
	keyNames       []string   // the key columns (nil: no key, no bloom filters)
	names          *fileNamer // the write UUID of each call: the writer ID's mark (nil: random)
	log            *slog.Logger
	limits         encode.FanoutLimits
	// partShare is the largest partition's share of the rows of the last batch written to a partitioned table
	// (float64 bits): it sizes the next batch's key bloom filters when a batch cannot be grouped.
	partShare atomic.Uint64
	warned    atomic.Bool  // a batch's fan-out was reported
	lastParts atomic.Int64 // the partitions of the last batch grouped (splitFanout)
	bulkSize  atomic.Int64 // a Router's bulk phase (phase.go): its target file size, and no key bloom filters; 0: live
	// carry: in the bulk phase, an unpartitioned table's batches go into files kept open across batches (open).
	carry atomic.Bool
	open  bulkFiles
}

// write encodes one batch (partitioning, rolling and statistics included) and returns its data files, packed
// when pack is set (heldfiles.go: files only the commit reads), else as iceberg-go built them. An unpartitioned
// table's batch is written as parts runs of its rows at once (encodeParts decides how many; 1: one write).
//
// On a partitioned table the batch is joined into one record and its rows grouped by partition (fanout.go):
// chunks of whole partitions go to iceberg-go's clustered writer, which keeps one data file open at a time, a
// few chunks at once. A batch whose partition values the grouping cannot read is written as one record by a
// single clustered write.
func (e *fileEncoder) write(ctx context.Context, tbl *table.Table, schema *arrow.Schema, b *batch,
	pack bool, parts int) ([]ice.DataFile, *encode.PackedFiles, error) {
	var keep *encode.PackedFiles
	if pack {
		keep = encode.NewPackedFiles(tbl)
	}
	files, err := e.writeFiles(ctx, tbl, schema, b, keep, parts)
	if err != nil {
		return nil, nil, err
	}
	if keep != nil {
		keep.Trim()
	}
	return files, keep, nil
}

// writeFiles is write's encoding: the files it wrote go into keep when it is not nil (returned otherwise).
func (e *fileEncoder) writeFiles(ctx context.Context, tbl *table.Table, schema *arrow.Schema, b *batch,
	keep *encode.PackedFiles, parts int) ([]ice.DataFile, error) {
	b.enc.rowMap = nil // set below where the files' rows are known
	opts := []table.WriteRecordOption{
		table.WithTargetFileSize(e.fileSize()),
		table.WithParquetRowGroupLimit(e.rowGroupRows),
	}
	opts = append(opts, b.writeOptions()...)
	if tbl.Spec().IsUnpartitioned() {
		if err := e.coalesce(schema, b); err != nil {
			return nil, err
		}
		var rows int64
		for _, r := range b.in.recs {
			rows += r.NumRows()
		}
		// Ownership of each record passes to the writes (WriteRecords releases each once encoded): the batch's
		// memory is freed while it encodes, not after.
		recs := b.in.recs
		b.in.recs = nil
		files, err := e.writeParts(ctx, tbl, schema, recs, rows, max(parts, 1), opts)
		if err != nil {
			return nil, err
		}
		if mapsRows(tbl) {
			b.enc.rowMap = unpartitionedRows
		}
		return e.keep(files, keep)
	}
	one := b.in.recs[0]
	if len(b.in.recs) > 1 {
		var err error
		if one, err = concatRecords(e.mem, schema, b.in.recs); err != nil {
			return nil, err
		}
		for _, r := range b.in.recs {
			r.Release()
		}
	}
	b.in.recs = nil
	defer one.Release()
	rows := one.NumRows()
	if rows == 0 {
		return nil, nil
	}
	opts = append(opts, table.WithClusteredWrite())
	spec, sc := tbl.Spec(), tbl.Schema()
	groups, grouped := encode.GroupPartitions(spec, sc, one)
	if grouped {
		e.partShare.Store(math.Float64bits(float64(groups.Largest()) / float64(rows)))
		e.lastParts.Store(int64(groups.Count()))
		e.warnFanout(tbl, groups.Count(), rows)
		var m *fileRowMap
		if mapsRows(tbl) {
			m = &fileRowMap{}
		}
		files, err := e.writeFanout(ctx, tbl, schema, one, groups, opts, keep, m)
		if err == nil {
			b.enc.rowMap = m
		}
		return files, err
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
		return nil, err
	}
	one.Retain()
	out, err := e.writeRecord(ctx, bt, schema, one, append(opts, table.WithWriteUUID(e.names.next())))
	if err != nil {
		return nil, err
	}
	var largest int64
	for _, df := range out {
		largest = max(largest, df.Count())
	}
	e.partShare.Store(math.Float64bits(float64(largest) / float64(rows)))
	return e.keep(out, keep)
}

// keep counts files written (Stats) and packs them into keep, returning nil, or returns them when keep is nil.
func (e *fileEncoder) keep(files []ice.DataFile, keep *encode.PackedFiles) ([]ice.DataFile, error) {
	e.count(files)
	if keep == nil {
		return files, nil
	}
	return nil, keep.Add(files)
}

// warnFanout warns, once per writer, of a batch over more than the warning's count of partitions.
func (e *fileEncoder) warnFanout(tbl *table.Table, partitions int, rows int64) {
	if partitions > e.limits.WarnPartitions && e.log != nil && e.warned.CompareAndSwap(false, true) {
		e.log.Warn("iceberg: a batch fans out into many partitions; every commit adds a data file per partition "+
			"(consider a coarser transform such as bucket(N, column), or a longer flush interval); "+
			"reported once per writer",
			"table", tbl.Identifier(), "partition_by", encode.PartitionColumns(tbl.Spec(), tbl.Schema()),
			"partitions", partitions, "rows", rows)
	}
}

// writeTable returns tbl, or a copy of it for iceberg-go's writer to write recs with: bloom filters on the key
// columns sized for files of rows rows (none without key columns, and in a bulk phase), and the Parquet write
// batch of writeBatchRows.
func (e *fileEncoder) writeTable(tbl *table.Table, rows int64, recs ...arrow.RecordBatch) (*table.Table, error) {
	props := tbl.Properties()
	set := ice.Properties{}
	if e.keyNames != nil && !e.bulk() {
		maps.Copy(set, encode.KeyBloomProperties(props, e.keyNames, min(rows, int64(e.rowGroupRows))))
	}
	if n := encode.WriteBatchRows(props, recs); n > 0 {
		set[table.ParquetPageRowLimitKey] = strconv.Itoa(n)
	}
	return encode.WithWriteProperties(tbl, set)
}

// writeRecord writes one record, whose ownership passes to iceberg-go (it releases the records it takes).
func (e *fileEncoder) writeRecord(ctx context.Context, tbl *table.Table, schema *arrow.Schema, rec arrow.RecordBatch,
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

// coalesce joins runs of small consecutive records into records of up to gatherRows rows: Parquet's column
// writers pay per record, so a batch of 400-row records (a call per poll, a checkpoint after each) encoded at
// two thirds of the rate of the same rows in large records. Joining is a copy of buffers, far cheaper.
func (e *fileEncoder) coalesce(schema *arrow.Schema, b *batch) error {
	return e.coalesceTo(schema, b, gatherRows)
}

// coalesceTo joins runs of consecutive records into records of up to maxRows rows.
func (e *fileEncoder) coalesceTo(schema *arrow.Schema, b *batch, maxRows int64) error {
	var out []arrow.RecordBatch
	for i := 0; i < len(b.in.recs); {
		j, rows := i, int64(0)
		for j < len(b.in.recs) && rows+b.in.recs[j].NumRows() <= maxRows {
			rows += b.in.recs[j].NumRows()
			j++
		}
		if j-i < 2 {
			out = append(out, b.in.recs[i])
			b.in.recs[i] = nil
			i = max(j, i+1)
			continue
		}
		one, err := concatRecords(e.mem, schema, b.in.recs[i:j])
		if err != nil {
			for _, r := range out {
				r.Release()
			}
			return err
		}
		for k := i; k < j; k++ {
			b.in.recs[k].Release()
			b.in.recs[k] = nil
		}
		out = append(out, one)
		i = j
	}
	b.in.recs = out
	return nil
}

// concatRecords joins records of one schema into one.
func concatRecords(mem memory.Allocator, schema *arrow.Schema, recs []arrow.RecordBatch) (arrow.RecordBatch, error) {
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
