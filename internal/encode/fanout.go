package encode

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	"github.com/icewriter/iceberg/internal/arrowx"
)

// Writing a batch that spans many partitions. iceberg-go's clustered writer takes one partition at a time (one
// open data file) but keeps per-partition state until the call returns (a location provider with a copy of the
// table's properties, the partition's entries in its maps and in its set of closed partitions), so its memory
// grows with the partitions of the call, and writes the files one after the other. So the encoder groups the batch's
// rows by partition itself and hands iceberg-go chunks of whole partitions, each chunk a call of its own (its
// state is freed when it returns), several chunks at once.
const (
	// FanoutChunkPartitions and FanoutChunkRows close a chunk: at this many partitions, or before a partition
	// that would take it over this many rows (a larger partition is a chunk of its own).
	FanoutChunkPartitions = 512
	FanoutChunkRows       = 32 * 1024
	// FanoutWarnPartitions is the partitions of one batch above which the writer warns (once): every commit
	// then adds at least this many data files.
	FanoutWarnPartitions = 1000
)

// FanoutLimits are the chunk and warning thresholds; tests lower them (zero: the constants above).
type FanoutLimits struct {
	ChunkPartitions, WarnPartitions int
}

// WithDefaults fills the zero limits with the constants above.
func (l FanoutLimits) WithDefaults() FanoutLimits {
	if l.ChunkPartitions <= 0 {
		l.ChunkPartitions = FanoutChunkPartitions
	}
	if l.WarnPartitions <= 0 {
		l.WarnPartitions = FanoutWarnPartitions
	}
	return l
}

// PartitionGroups is a record's rows grouped by partition: order lists the row numbers partition after
// partition (partitions in the order of their first row, rows in record order), ends[p] is where partition p's
// rows end in order.
type PartitionGroups struct {
	order []int32
	ends  []int
}

// Count is the number of partitions.
func (g *PartitionGroups) Count() int { return len(g.ends) }

// start is where partition p's rows start in order.
func (g *PartitionGroups) start(p int) int {
	if p == 0 {
		return 0
	}
	return g.ends[p-1]
}

// Rows returns partition p's row numbers.
func (g *PartitionGroups) Rows(p int) []int32 { return g.order[g.start(p):g.ends[p]] }

// Largest is the row count of the largest partition.
func (g *PartitionGroups) Largest() int {
	n := 0
	for p := range g.ends {
		n = max(n, len(g.Rows(p)))
	}
	return n
}

// GroupPartitions groups rec's rows by the partition the spec puts them in, through the spec's own transforms
// (on the values arrowLiteral reads). ok is false when a partition source is not a top-level column of a type it
// reads. The grouping only decides which rows go to one iceberg-go call: that call still splits its rows by
// partition itself, so a group that mixed partitions would cost nothing, and a partition split over two groups
// (where arrowLiteral's conversion of a value differs from iceberg-go's) one more file, never a row.
func GroupPartitions(spec ice.PartitionSpec, sc *ice.Schema, rec arrow.RecordBatch) (*PartitionGroups, bool) {
	rows := int(rec.NumRows())
	keyers, ok := PartitionKeyers(spec, sc, rec)
	if !ok {
		return nil, false
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
	return &PartitionGroups{order: order, ends: ends}, true
}

// PartitionKeyers are the keyers of rec's partition values under spec, one per spec field; ok is false when a
// partition source is not a top-level column of rec.
func PartitionKeyers(spec ice.PartitionSpec, sc *ice.Schema, rec arrow.RecordBatch) ([]PartitionKeyer, bool) {
	keyers := make([]PartitionKeyer, 0, spec.NumFields())
	for _, f := range spec.Fields() {
		name, ok := sc.FindColumnName(f.SourceID())
		if !ok {
			return nil, false
		}
		idx := rec.Schema().FieldIndices(name)
		if len(idx) != 1 {
			return nil, false
		}
		field, ok := sc.FindFieldByID(f.SourceID())
		if !ok {
			return nil, false
		}
		keyers = append(keyers, newPartitionKeyer(rec.Column(idx[0]), field.Type, f.Transform))
	}
	return keyers, true
}

// TakeRecordRows takes rows idx of rec, in that order, into a record of its own.
func TakeRecordRows(ctx context.Context, mem memory.Allocator, rec arrow.RecordBatch, idx []int32) (arrow.RecordBatch, error) {
	ia := arrowx.Int32Array(mem, idx)
	defer ia.Release()
	taken, err := compute.Take(compute.WithAllocator(ctx, mem), *compute.DefaultTakeOptions(),
		compute.NewDatumWithoutOwning(rec), compute.NewDatumWithoutOwning(ia))
	if err != nil {
		return nil, fmt.Errorf("iceberg: take %d rows: %w", len(idx), err)
	}
	defer taken.Release()
	out := taken.(*compute.RecordDatum).Value
	out.Retain()
	return out, nil
}

// PartitionKeyer appends the key of row r's partition value under one spec field to dst: distinct for distinct
// partition values. ok is false for a value of a type it does not read.
type PartitionKeyer func(dst []byte, r int) ([]byte, bool)

// newPartitionKeyer keys a column of source type src under tr: identity on the common types and the int32
// transforms (bucket, year, month, day, hour) through iceberg-go's own transformer without a literal per row,
// anything else through the transform's Apply on arrowLiteral's literal.
func newPartitionKeyer(col arrow.Array, src ice.Type, tr ice.Transform) PartitionKeyer {
	if _, ok := tr.(ice.VoidTransform); ok {
		return func(dst []byte, _ int) ([]byte, bool) { return append(dst, 0), true }
	}
	if _, ok := tr.(ice.IdentityTransform); ok {
		le := binary.LittleEndian
		switch c := col.(type) {
		case *array.Int64:
			return nullable(col, func(dst []byte, r int) []byte { return le.AppendUint64(dst, uint64(c.Value(r))) })
		case *array.Int32:
			return nullable(col, func(dst []byte, r int) []byte { return le.AppendUint32(dst, uint32(c.Value(r))) })
		case *array.Date32:
			return nullable(col, func(dst []byte, r int) []byte { return le.AppendUint32(dst, uint32(c.Value(r))) })
		case *array.String:
			return nullable(col, func(dst []byte, r int) []byte {
				return append(binary.AppendUvarint(dst, uint64(c.ValueLen(r))), c.Value(r)...)
			})
		}
	}
	if fn := int32Transformer(tr, src); fn != nil {
		if value := transformerValue(col, src); value != nil {
			return nullable(col, func(dst []byte, r int) []byte {
				out := fn(value(r))
				if !out.Valid {
					return append(dst, 0)
				}
				return binary.LittleEndian.AppendUint32(append(dst, 1), uint32(out.Val))
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

// int32Transformer is iceberg-go's transformer of tr for source type src when tr yields an int32 (nil for other
// transforms).
func int32Transformer(tr ice.Transform, src ice.Type) func(any) ice.Optional[int32] {
	var fn func(any) ice.Optional[int32]
	var err error
	switch t := tr.(type) {
	case ice.BucketTransform:
		fn = t.Transformer(src)
	case ice.YearTransform:
		fn, err = t.Transformer(src)
	case ice.MonthTransform:
		fn, err = t.Transformer(src)
	case ice.DayTransform:
		fn, err = t.Transformer(src)
	case ice.HourTransform:
		fn, err = t.Transformer(src)
	}
	if err != nil {
		return nil
	}
	return fn
}

// transformerValue reads a column's values as the Go values iceberg-go's transformers take for source type src
// (nil when the column does not hold src as the conformer writes it).
func transformerValue(col arrow.Array, src ice.Type) func(r int) any {
	switch c := col.(type) {
	case *array.Int32:
		if src.Equals(ice.PrimitiveTypes.Int32) {
			return func(r int) any { return c.Value(r) }
		}
	case *array.Int64:
		if src.Equals(ice.PrimitiveTypes.Int64) {
			return func(r int) any { return c.Value(r) }
		}
	case *array.Date32:
		if src.Equals(ice.PrimitiveTypes.Date) {
			return func(r int) any { return ice.Date(c.Value(r)) }
		}
	case *array.Timestamp:
		micros := c.DataType().(*arrow.TimestampType).Unit == arrow.Microsecond
		if micros && (src.Equals(ice.PrimitiveTypes.Timestamp) || src.Equals(ice.PrimitiveTypes.TimestampTz)) {
			return func(r int) any { return ice.Timestamp(c.Value(r)) }
		}
	case *array.String:
		if src.Equals(ice.PrimitiveTypes.String) {
			return func(r int) any { return c.Value(r) }
		}
	case *array.Binary:
		if src.Equals(ice.PrimitiveTypes.Binary) {
			return func(r int) any { return c.Value(r) }
		}
	}
	return nil
}

// nullable keys a null as 0 and a value as 1 followed by value's bytes.
func nullable(col arrow.Array, value func(dst []byte, r int) []byte) PartitionKeyer {
	return func(dst []byte, r int) ([]byte, bool) {
		if col.IsNull(r) {
			return append(dst, 0), true
		}
		return value(append(dst, 1), r), true
	}
}

// PartitionColumns names a spec's fields as PartitionBy spells them: "identity(user_id), day(ts)".
func PartitionColumns(spec ice.PartitionSpec, sc *ice.Schema) string {
	var parts []string
	for _, f := range spec.Fields() {
		name, _ := sc.FindColumnName(f.SourceID())
		parts = append(parts, fmt.Sprintf("%s(%s)", f.Transform, name))
	}
	return strings.Join(parts, ", ")
}

// FanoutChunk is a set of whole partitions of a batch's groups, written by one iceberg-go call.
type FanoutChunk struct {
	Parts   []int // the partitions, largest first
	Rows    int
	Largest int // rows of its largest partition
}

// FanoutChunks cuts the groups into chunks of at most maxParts partitions and, unless a single partition is
// larger, FanoutChunkRows rows, taking the partitions largest first, a chunk's smallest at least half its
// largest: its key bloom filters, sized for its largest partition, fit every file it writes (a batch of one
// large partition and many single rows does not give each single-row file the large one's filter).
func FanoutChunks(g *PartitionGroups, maxParts int) []FanoutChunk {
	parts := make([]int, g.Count())
	for p := range parts {
		parts[p] = p
	}
	slices.SortStableFunc(parts, func(a, b int) int { return cmp.Compare(len(g.Rows(b)), len(g.Rows(a))) })
	var out []FanoutChunk
	var c FanoutChunk
	for _, p := range parts {
		n := len(g.Rows(p))
		if len(c.Parts) > 0 && (len(c.Parts) >= maxParts || c.Rows+n > FanoutChunkRows || 2*n < c.Largest) {
			out = append(out, c)
			c = FanoutChunk{}
		}
		c.Parts = append(c.Parts, p)
		c.Rows += n
		c.Largest = max(c.Largest, n)
	}
	return append(out, c)
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
