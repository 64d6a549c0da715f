package encode

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// TestGroupPartitions: a batch's rows grouped by partition through the spec's transforms (identity, the int32
// transforms through iceberg-go's transformers, truncate through a literal per row): every row once, in record
// order within its partition, one group per partition value (nulls and empty strings apart), and no grouping for
// a partition source of a type the grouping does not read.
func TestGroupPartitions(t *testing.T) {
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	const rows = 10_000
	day := int64(86_400_000_000)
	for i := range rows {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		// 70% of the rows on one day, the rest spread over 30 others.
		d := int64(0)
		if i%10 >= 7 {
			d = 1 + int64(i%30)
		}
		b.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(d*day + int64(i)))
		switch i % 3 {
		case 0:
			b.Field(2).(*array.StringBuilder).AppendNull()
		case 1:
			b.Field(2).(*array.StringBuilder).Append("")
		default:
			b.Field(2).(*array.StringBuilder).Append(fmt.Sprint("n", i%7))
		}
		if tags := b.Field(3).(*array.ListBuilder); i == 5 {
			tags.Append(true)
			tags.ValueBuilder().(*array.StringBuilder).Append("t")
		} else {
			tags.AppendNull()
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	ids := rec.Column(0).(*array.Int64)
	ts := rec.Column(1).(*array.Timestamp)
	names := rec.Column(2).(*array.String)
	bucket := ice.BucketTransform{NumBuckets: 16}
	bucket4 := ice.BucketTransform{NumBuckets: 4}
	// want is each row's partition as the test computes it, independently of the keyers.
	for _, c := range []struct {
		by      []string
		want    func(r int) string
		largest int
	}{
		{[]string{"day(ts)"}, func(r int) string { return fmt.Sprint(int64(ts.Value(r)) / day) }, 7000},
		{[]string{"bucket(16, id)"}, func(r int) string {
			return bucket.Apply(ice.Optional[ice.Literal]{Valid: true, Val: ice.NewLiteral(ids.Value(r))}).Val.String()
		}, -1},
		{[]string{"identity(id)"}, func(r int) string { return fmt.Sprint(ids.Value(r)) }, 1},
		{[]string{"hour(ts)"}, func(r int) string { return fmt.Sprint(int64(ts.Value(r)) / 3_600_000_000) }, -1},
		{[]string{"month(ts)"}, func(r int) string {
			at := time.UnixMicro(int64(ts.Value(r))).UTC()
			return fmt.Sprint((at.Year()-1970)*12 + int(at.Month()) - 1)
		}, -1},
		{[]string{"bucket(4, name)"}, func(r int) string {
			if names.IsNull(r) {
				return "null"
			}
			return bucket4.Apply(ice.Optional[ice.Literal]{Valid: true, Val: ice.NewLiteral(names.Value(r))}).Val.String()
		}, -1},
		{[]string{"truncate(2, name)"}, func(r int) string {
			if names.IsNull(r) {
				return "null"
			}
			return fmt.Sprintf("%q", names.Value(r)[:min(2, len(names.Value(r)))])
		}, -1},
		{[]string{"identity(name)", "day(ts)"}, func(r int) string {
			n := "null"
			if names.IsValid(r) {
				n = fmt.Sprintf("%q", names.Value(r))
			}
			return fmt.Sprint(n, int64(ts.Value(r))/day)
		}, -1},
	} {
		isc, spec, err := partitionedBy(sc, c.by...)
		if err != nil {
			t.Fatal(err)
		}
		g, ok := GroupPartitions(*spec, isc, rec)
		if !ok {
			t.Fatalf("%v: not grouped", c.by)
		}
		seen := make([]bool, rows)
		parts := map[string]int{}
		for p := range g.Count() {
			rs := g.Rows(p)
			if len(rs) == 0 || !slices.IsSorted(rs) {
				t.Fatalf("%v: partition %d rows %v: empty or out of record order", c.by, p, rs)
			}
			for _, r := range rs {
				if seen[r] {
					t.Fatalf("%v: row %d grouped twice", c.by, r)
				}
				seen[r] = true
				if want := c.want(int(rs[0])); c.want(int(r)) != want {
					t.Fatalf("%v: row %d (%s) grouped with row %d (%s)", c.by, r, c.want(int(r)), rs[0], want)
				}
			}
			key := c.want(int(rs[0]))
			if q, dup := parts[key]; dup {
				t.Fatalf("%v: partition %s split into groups %d and %d", c.by, key, q, p)
			}
			parts[key] = p
		}
		if slices.Contains(seen, false) {
			t.Fatalf("%v: a row is in no group", c.by)
		}
		if c.largest >= 0 && g.Largest() != c.largest {
			t.Errorf("%v: largest partition %d rows, want %d", c.by, g.Largest(), c.largest)
		}
	}
	isc, spec, err := partitionedBy(sc, "identity(tags)")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := GroupPartitions(*spec, isc, rec); ok {
		t.Fatal("a list partition source was grouped")
	}
}

// TestFanoutChunks: chunks are sets of whole partitions, largest first, cut at FanoutChunkPartitions
// partitions, FanoutChunkRows rows (a larger partition alone) or a partition under half the chunk's largest.
func TestFanoutChunks(t *testing.T) {
	sizes := []int{3, FanoutChunkRows + 5, 2}
	for range FanoutChunkPartitions + 10 {
		sizes = append(sizes, 1)
	}
	g := &PartitionGroups{}
	at := 0
	for _, n := range sizes {
		for range n {
			g.order = append(g.order, int32(len(g.order)))
		}
		at += n
		g.ends = append(g.ends, at)
	}
	got := FanoutChunks(g, FanoutChunkPartitions)
	ones := func(from, to int) []int {
		var ps []int
		for p := from; p < to; p++ {
			ps = append(ps, p)
		}
		return ps
	}
	want := []FanoutChunk{
		{Parts: []int{1}, Rows: FanoutChunkRows + 5, Largest: FanoutChunkRows + 5},
		{Parts: []int{0, 2}, Rows: 5, Largest: 3},
		{Parts: ones(3, 3+FanoutChunkPartitions), Rows: FanoutChunkPartitions, Largest: 1},
		{Parts: ones(3+FanoutChunkPartitions, len(sizes)), Rows: 10, Largest: 1},
	}
	if !slices.EqualFunc(got, want, func(a, b FanoutChunk) bool {
		return slices.Equal(a.Parts, b.Parts) && a.Rows == b.Rows && a.Largest == b.Largest
	}) {
		t.Fatalf("chunks %+v,\nwant %+v", got, want)
	}
}

// partitionedBy is sc as an Iceberg schema of fresh field ids, partitioned by the fields written as PartitionBy
// takes them ("day(ts)", "bucket(16, id)", "truncate(2, name)").
func partitionedBy(sc *arrow.Schema, by ...string) (*ice.Schema, *ice.PartitionSpec, error) {
	isc, err := table.ArrowSchemaToIcebergWithFreshIDs(sc, false)
	if err != nil {
		return nil, nil, err
	}
	var opts []ice.PartitionOption
	for _, expr := range by {
		name, args, _ := strings.Cut(strings.TrimSuffix(expr, ")"), "(")
		col, tr := args, name
		if n, c, ok := strings.Cut(args, ", "); ok {
			col, tr = c, name+"["+n+"]"
		}
		transform, err := ice.ParseTransform(tr)
		if err != nil {
			return nil, nil, err
		}
		opts = append(opts, ice.AddPartitionFieldByName(col, col+"_"+name, transform, isc, nil))
	}
	spec, err := ice.NewPartitionSpecOpts(opts...)
	if err != nil {
		return nil, nil, err
	}
	return isc, &spec, nil
}
