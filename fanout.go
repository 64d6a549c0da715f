package iceberg

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"
)

// Writing a batch that spans many partitions. iceberg-go's clustered writer takes one partition at a time (one
// open data file), but it keeps per-partition state for the whole call: a location provider with a copy of the
// table's properties, the partition's entry in its maps and its set of closed partitions, about 1 KiB each,
// and it writes the files one after the other. A batch of 200,000 rows over 86,000 identity partitions held
// 900 MiB of heap that way and wrote 1,500 files/s on one core. So the encoder groups the batch's rows by
// partition itself and hands iceberg-go chunks of whole partitions, each chunk a call of its own (its state is
// freed when it returns), several chunks at once.
const (
	// fanoutChunkPartitions and fanoutChunkRows close a chunk: at this many partitions, or once it holds this
	// many rows (a large partition ends the chunk it falls into).
	fanoutChunkPartitions = 512
	fanoutChunkRows       = 32 * 1024
	// fanoutWarnPartitions is the partitions of one batch above which the writer warns (once): every commit
	// then adds at least this many data files.
	fanoutWarnPartitions = 1000
)

// fanoutLimits are the chunk and warning thresholds; tests lower them (zero: the constants above).
type fanoutLimits struct {
	chunkPartitions, warnPartitions int
}

func (l fanoutLimits) withDefaults() fanoutLimits {
	if l.chunkPartitions <= 0 {
		l.chunkPartitions = fanoutChunkPartitions
	}
	if l.warnPartitions <= 0 {
		l.warnPartitions = fanoutWarnPartitions
	}
	return l
}

// partitionGroups is a record's rows grouped by partition: order lists the row numbers partition after
// partition (partitions in the order of their first row, rows in record order), ends[p] is where partition p's
// rows end in order.
type partitionGroups struct {
	order []int32
	ends  []int
}

func (g *partitionGroups) count() int { return len(g.ends) }

// start is where partition p's rows start in order.
func (g *partitionGroups) start(p int) int {
	if p == 0 {
		return 0
	}
	return g.ends[p-1]
}

// rows returns partition p's row numbers.
func (g *partitionGroups) rows(p int) []int32 { return g.order[g.start(p):g.ends[p]] }

// largest is the row count of the largest partition.
func (g *partitionGroups) largest() int {
	n := 0
	for p := range g.ends {
		n = max(n, len(g.rows(p)))
	}
	return n
}

// groupPartitions groups rec's rows by the partition the spec puts them in, through the spec's own transforms.
// ok is false when a partition source is not a top-level column of a type it reads (arrowLiteral). Rows the
// spec puts in one partition are always grouped together; the reverse may fail only where the grouping is
// finer than iceberg-go's (identity on a nanosecond timestamp groups by nanosecond), which costs a file, never
// a row.
func groupPartitions(spec ice.PartitionSpec, sc *ice.Schema, rec arrow.RecordBatch) (*partitionGroups, bool) {
	rows := int(rec.NumRows())
	keyers := make([]partitionKeyer, 0, spec.NumFields())
	for _, f := range spec.Fields() {
		name, ok := sc.FindColumnName(f.SourceID())
		if !ok {
			return nil, false
		}
		idx := rec.Schema().FieldIndices(name)
		if len(idx) != 1 {
			return nil, false
		}
		keyers = append(keyers, newPartitionKeyer(rec.Column(idx[0]), f.Transform))
	}
	ids := map[string]int32{}
	group := make([]int32, rows)
	var counts []int
	var key []byte
	for r := range rows {
		key = key[:0]
		for _, k := range keyers {
			var ok bool
			if key, ok = k(key, r); !ok {
				return nil, false
			}
		}
		g, ok := ids[string(key)]
		if !ok {
			g = int32(len(counts))
			ids[string(key)] = g
			counts = append(counts, 0)
		}
		group[r] = g
		counts[g]++
	}
	// A counting sort of the rows by partition.
	ends := make([]int, len(counts))
	next := make([]int, len(counts))
	at := 0
	for p, c := range counts {
		next[p] = at
		at += c
		ends[p] = at
	}
	order := make([]int32, rows)
	for r, p := range group {
		order[next[p]] = int32(r)
		next[p]++
	}
	return &partitionGroups{order: order, ends: ends}, true
}

// partitionKeyer appends the key of row r's partition value under one spec field to dst: distinct for distinct
// partition values. ok is false for a value of a type it does not read.
type partitionKeyer func(dst []byte, r int) ([]byte, bool)

func newPartitionKeyer(col arrow.Array, tr ice.Transform) partitionKeyer {
	if _, ok := tr.(ice.VoidTransform); ok {
		return func(dst []byte, _ int) ([]byte, bool) { return append(dst, 0), true }
	}
	if _, ok := tr.(ice.IdentityTransform); ok {
		// The common identity sources without a literal per row.
		switch c := col.(type) {
		case *array.Int64:
			return nullable(col, func(dst []byte, r int) []byte { return binary.LittleEndian.AppendUint64(dst, uint64(c.Value(r))) })
		case *array.Int32:
			return nullable(col, func(dst []byte, r int) []byte { return binary.LittleEndian.AppendUint32(dst, uint32(c.Value(r))) })
		case *array.Date32:
			return nullable(col, func(dst []byte, r int) []byte { return binary.LittleEndian.AppendUint32(dst, uint32(c.Value(r))) })
		case *array.String:
			return nullable(col, func(dst []byte, r int) []byte {
				return append(binary.AppendUvarint(dst, uint64(c.ValueLen(r))), c.Value(r)...)
			})
		}
	}
	return func(dst []byte, r int) ([]byte, bool) {
		lit, ok, null := arrowLiteral(col, r)
		if !ok {
			return dst, false
		}
		if null {
			return append(dst, 0), true
		}
		out := tr.Apply(ice.Optional[ice.Literal]{Valid: true, Val: lit})
		if !out.Valid {
			return append(dst, 0), true
		}
		s := out.Val.String()
		return append(binary.AppendUvarint(append(dst, 1), uint64(len(s))), s...), true
	}
}

// nullable keys a null as 0 and a value as 1 followed by value's bytes.
func nullable(col arrow.Array, value func(dst []byte, r int) []byte) partitionKeyer {
	return func(dst []byte, r int) ([]byte, bool) {
		if col.IsNull(r) {
			return append(dst, 0), true
		}
		return value(append(dst, 1), r), true
	}
}

// partitionColumns names a spec's fields as PartitionBy spells them: "identity(user_id), day(ts)".
func partitionColumns(spec ice.PartitionSpec, sc *ice.Schema) string {
	var parts []string
	for _, f := range spec.Fields() {
		name, _ := sc.FindColumnName(f.SourceID())
		parts = append(parts, fmt.Sprintf("%s(%s)", f.Transform, name))
	}
	return strings.Join(parts, ", ")
}

// fanoutChunk is a set of whole partitions of a batch's groups, written by one iceberg-go call.
type fanoutChunk struct {
	parts   []int // the partitions, largest first
	rows    int
	largest int // rows of its largest partition
}

// fanoutChunks cuts the groups into chunks of at most maxParts partitions and, unless a single partition is
// larger, fanoutChunkRows rows, taking the partitions largest first, a chunk's smallest at least half its
// largest: its key bloom filters, sized for its largest partition, fit every file it writes (a batch of one
// large partition and many single rows does not give each single-row file the large one's filter).
func fanoutChunks(g *partitionGroups, maxParts int) []fanoutChunk {
	parts := make([]int, g.count())
	for p := range parts {
		parts[p] = p
	}
	slices.SortStableFunc(parts, func(a, b int) int { return cmp.Compare(len(g.rows(b)), len(g.rows(a))) })
	var out []fanoutChunk
	var c fanoutChunk
	for _, p := range parts {
		n := len(g.rows(p))
		if len(c.parts) > 0 && (len(c.parts) >= maxParts || c.rows+n > fanoutChunkRows || 2*n < c.largest) {
			out = append(out, c)
			c = fanoutChunk{}
		}
		c.parts = append(c.parts, p)
		c.rows += n
		c.largest = max(c.largest, n)
	}
	return append(out, c)
}

// writeFanout writes a partitioned batch (one record, owned by the caller) chunk by chunk. Up to GOMAXPROCS
// chunks are written at once; each has one data file open at a time (iceberg-go's clustered writer), and the
// rows their open files hold together stay within one row group (the chunk's largest partition, capped at the
// row-group limit, is its weight), so a batch never buffers more for its files than a single writer would. A
// chunk's rows are taken from the record into a record of their own, partition after partition; its key bloom
// filters are sized for its largest partition.
func (e *fileEncoder) writeFanout(ctx context.Context, tbl *table.Table, schema *arrow.Schema, rec arrow.RecordBatch,
	g *partitionGroups, opts []table.WriteRecordOption) ([]ice.DataFile, error) {
	chunks := fanoutChunks(g, e.limits.chunkPartitions)
	// write writes one chunk's record (owned).
	write := func(ctx context.Context, c fanoutChunk, part arrow.RecordBatch) ([]ice.DataFile, error) {
		bt, err := e.withBlooms(tbl, int64(c.largest))
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
		return write(ctx, chunks[0], rec)
	}
	out := make([][]ice.DataFile, len(chunks))
	budget := int64(e.rowGroupRows)
	rowsSem := semaphore.NewWeighted(budget)
	eg, ectx := errgroup.WithContext(ctx)
	eg.SetLimit(runtime.GOMAXPROCS(0))
	cctx := compute.WithAllocator(ectx, e.mem)
	for i, c := range chunks {
		weight := min(int64(c.largest), budget)
		if err := rowsSem.Acquire(ectx, weight); err != nil {
			break // a chunk failed (its error is the group's) or ctx ended
		}
		eg.Go(func() error {
			defer rowsSem.Release(weight)
			rows := make([]int32, 0, c.rows)
			for _, p := range c.parts {
				rows = append(rows, g.rows(p)...)
			}
			idx := int32Array(e.mem, rows)
			taken, err := compute.Take(cctx, *compute.DefaultTakeOptions(), compute.NewDatumWithoutOwning(rec),
				compute.NewDatumWithoutOwning(idx))
			idx.Release()
			if err != nil {
				return fmt.Errorf("iceberg: take the rows of %d partitions: %w", len(c.parts), err)
			}
			part := taken.(*compute.RecordDatum).Value
			part.Retain()
			taken.Release()
			files, err := write(ectx, c, part)
			out[i] = files
			return err
		})
	}
	if err := eg.Wait(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return slices.Concat(out...), nil
}
