package iceberg

import (
	"context"
	"fmt"
	"iter"
	"math"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// encode writes a sealed batch's files for the pipeline. A keyed batch is resolved first (rows superseded
// inside it are dropped); what its upserted and deleted keys become is the key stage's choice
// (keyStage.stageDeletes): with the key index they wait for the commit loop to turn them into deletion vectors
// (and the keys of the batch's new data files are read back for the index), in copy-on-write mode they go to
// the committer, which rewrites the files holding them, and otherwise they are written here as equality delete
// files.
func (w *Writer) encode(ctx context.Context, b *batch) error {
	tbl, conf := w.view.get()
	schema := b.schema
	if schema == nil {
		schema = conf.target
	}
	var files, deletes []ice.DataFile
	var res *resolved
	var err error
	indexed := w.keys.indexed()
	if w.keys.spec != nil {
		res, err = w.keys.resolve(ctx, b, w.env.mem)
		if err == nil {
			for _, r := range b.recs {
				r.Release()
			}
			b.recs = res.data
			deletes, err = w.keys.stageDeletes(ctx, tbl, b, res.deletes, indexed)
		}
	}
	if err == nil && len(b.recs) > 0 {
		files, err = w.files.write(ctx, tbl, schema, b)
	}
	if err == nil && indexed {
		b.fileKeys, err = w.keys.readKeys(ctx, tbl, files)
	}
	if err != nil {
		return err
	}
	b.files, b.deletes = files, deletes
	if res != nil {
		b.written, b.keyedSet = res.written, res.keyed
	}
	w.files.count(files)
	return nil
}

// count adds files to the encoder's counters.
func (e *fileEncoder) count(files []ice.DataFile) {
	for _, f := range files {
		e.files.Add(1)
		e.bytes.Add(f.FileSizeBytes())
	}
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
	// partShare is the largest partition's share of the rows of the last batch written to a partitioned table
	// (float64 bits): it sizes the next batch's key bloom filters.
	partShare atomic.Uint64
	bulkSize  atomic.Int64 // a Router's bulk phase (phase.go): its target file size, and no key bloom filters; 0: live
}

// write encodes one batch (partitioning, rolling and statistics included).
//
// On a partitioned table the batch is written as one record with iceberg-go's clustered writer, which takes one
// partition at a time: a single data file is open at once whatever the number of partitions in the batch (more
// files than a fanout writer would keep open never means more memory).
func (e *fileEncoder) write(ctx context.Context, tbl *table.Table, schema *arrow.Schema, b *batch) ([]ice.DataFile, error) {
	opts := []table.WriteRecordOption{
		table.WithTargetFileSize(e.fileSize()),
		table.WithParquetRowGroupLimit(e.rowGroupRows),
		table.WithWriteUUID(e.names.next()),
	}
	partitioned := !tbl.Spec().IsUnpartitioned()
	if partitioned {
		if len(b.recs) > 1 {
			one, err := concatRecords(e.mem, schema, b.recs)
			if err != nil {
				return nil, err
			}
			for _, r := range b.recs {
				r.Release()
			}
			b.recs = []arrow.RecordBatch{one}
		}
		opts = append(opts, table.WithClusteredWrite())
	} else if err := e.coalesce(schema, b); err != nil {
		return nil, err
	}
	var rows int64
	for _, r := range b.recs {
		rows += r.NumRows()
	}
	if e.keyNames != nil && !e.bulk() {
		// Size the key columns' bloom filters for a file's rows: a batch's on an unpartitioned table; on a
		// partitioned one the largest partition's share of a sample of the batch or, for partition sources
		// the sample cannot read, twice that share in the writer's previous batch (a first batch then sizes for
		// all its rows). A filter too small only raises its false-positive rate.
		est := rows
		if partitioned && len(b.recs) == 1 {
			if share, ok := partitionShare(tbl.Spec(), tbl.Schema(), b.recs[0]); ok {
				est = int64(math.Ceil(float64(rows) * share))
			} else if share := math.Float64frombits(e.partShare.Load()); share > 0 {
				est = int64(math.Ceil(float64(rows) * min(1, 2*share)))
			}
		}
		bt, err := withKeyBlooms(tbl, e.keyNames, min(est, int64(e.rowGroupRows)))
		if err != nil {
			return nil, err
		}
		tbl = bt
	}
	// Ownership of each record passes to WriteRecords, which releases it once encoded: the batch's memory is
	// freed while it encodes, not after.
	recs := func(yield func(arrow.RecordBatch, error) bool) {
		for i, r := range b.recs {
			b.recs[i] = nil
			if !yield(r, nil) {
				return
			}
		}
	}
	var out []ice.DataFile
	for df, err := range table.WriteRecords(ctx, tbl, schema, iter.Seq2[arrow.RecordBatch, error](recs), opts...) {
		if err != nil {
			return nil, err
		}
		out = append(out, df)
	}
	if partitioned && rows > 0 {
		var largest int64
		for _, df := range out {
			largest = max(largest, df.Count())
		}
		e.partShare.Store(math.Float64bits(float64(largest) / float64(rows)))
	}
	return out, nil
}

// coalesce joins runs of small consecutive records into records of up to gatherRows rows: Parquet's column
// writers pay per record, so a batch of 400-row records (a call per poll, a checkpoint after each) encoded at
// two thirds of the rate of the same rows in large records. Joining is a copy of buffers, far cheaper.
func (e *fileEncoder) coalesce(schema *arrow.Schema, b *batch) error {
	var out []arrow.RecordBatch
	for i := 0; i < len(b.recs); {
		j, rows := i, int64(0)
		for j < len(b.recs) && rows+b.recs[j].NumRows() <= gatherRows {
			rows += b.recs[j].NumRows()
			j++
		}
		if j-i < 2 {
			out = append(out, b.recs[i])
			b.recs[i] = nil
			i = max(j, i+1)
			continue
		}
		one, err := concatRecords(e.mem, schema, b.recs[i:j])
		if err != nil {
			for _, r := range out {
				r.Release()
			}
			return err
		}
		for k := i; k < j; k++ {
			b.recs[k].Release()
			b.recs[k] = nil
		}
		out = append(out, one)
		i = j
	}
	b.recs = out
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

// partitionSample is the most rows partitionShare reads.
const partitionSample = 4096

// partitionShare estimates the share of rec's rows in its largest partition from up to 4,096 rows spread over
// it, through the spec's own transforms. ok is false when a partition source is not a top-level column of a
// type it reads (then the caller has no estimate). A small partition's share comes out high (a sample holds few
// of its rows), so filters err on the large side.
func partitionShare(spec ice.PartitionSpec, sc *ice.Schema, rec arrow.RecordBatch) (float64, bool) {
	rows := int(rec.NumRows())
	if rows == 0 || spec.NumFields() == 0 {
		return 1, rows > 0
	}
	type source struct {
		col       arrow.Array
		transform ice.Transform
	}
	var srcs []source
	for _, f := range spec.Fields() {
		name, ok := sc.FindColumnName(f.SourceID())
		if !ok {
			return 0, false
		}
		idx := rec.Schema().FieldIndices(name)
		if len(idx) != 1 {
			return 0, false
		}
		srcs = append(srcs, source{rec.Column(idx[0]), f.Transform})
	}
	n := min(rows, partitionSample)
	counts := map[string]int{}
	largest := 0
	var key strings.Builder
	for s := 0; s < n; s++ {
		row := s * rows / n
		key.Reset()
		for _, src := range srcs {
			lit, ok, null := arrowLiteral(src.col, row)
			if !ok {
				return 0, false
			}
			if !null {
				if out := src.transform.Apply(ice.Optional[ice.Literal]{Valid: true, Val: lit}); out.Valid {
					key.WriteString(out.Val.String())
				}
			}
			key.WriteByte(0)
		}
		counts[key.String()]++
		largest = max(largest, counts[key.String()])
	}
	return float64(largest) / float64(n), true
}

// arrowLiteral is the Iceberg literal of a column value; ok is false for a type it does not read.
func arrowLiteral(col arrow.Array, row int) (lit ice.Literal, ok, null bool) {
	if col.IsNull(row) {
		return nil, true, true
	}
	switch c := col.(type) {
	case *array.Int32:
		return ice.NewLiteral(c.Value(row)), true, false
	case *array.Int64:
		return ice.NewLiteral(c.Value(row)), true, false
	case *array.Float32:
		return ice.NewLiteral(c.Value(row)), true, false
	case *array.Float64:
		return ice.NewLiteral(c.Value(row)), true, false
	case *array.Boolean:
		return ice.NewLiteral(c.Value(row)), true, false
	case *array.String:
		return ice.NewLiteral(c.Value(row)), true, false
	case *array.LargeString:
		return ice.NewLiteral(c.Value(row)), true, false
	case *array.Binary:
		return ice.NewLiteral(slices.Clone(c.Value(row))), true, false
	case *array.Date32:
		return ice.NewLiteral(ice.Date(c.Value(row))), true, false
	case *array.Timestamp:
		v := int64(c.Value(row))
		switch c.DataType().(*arrow.TimestampType).Unit {
		case arrow.Second:
			v *= 1_000_000
		case arrow.Millisecond:
			v *= 1_000
		case arrow.Nanosecond:
			v /= 1_000
		}
		return ice.NewLiteral(ice.Timestamp(v)), true, false
	}
	return nil, false, false
}
