package iceberg_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	iceberg "github.com/icewriter/iceberg"
)

// The TPC-H shape: its eight tables with their columns (decimals as float64, dates as date32) and their rows
// per scale factor, so rows spread over tables as TPC-H spreads them (lineitem 69%, orders 17%, partsupp 9%,
// part 2.3%, customer 1.7%, supplier 0.1%, nation and region a handful).

// tpchCol is one column: its name and how its values are drawn.
type tpchCol struct {
	name string
	kind byte // 'k' sequential key, 'i' int64 below n, 'n' int32 below n, 'f' float64 below n, 's' text of n words, 'c' one of choices, 'd' date
	n    int
}

type tpchTable struct {
	name    string
	perSF   int // rows per scale factor (nation and region: fixed)
	fixed   bool
	cols    []tpchCol
	choices []string
}

var tpchTables = []tpchTable{
	{name: "lineitem", perSF: 6_000_000, cols: []tpchCol{{"l_orderkey", 'k', 0}, {"l_partkey", 'i', 200_000},
		{"l_suppkey", 'i', 10_000}, {"l_linenumber", 'n', 7}, {"l_quantity", 'f', 50}, {"l_extendedprice", 'f', 100_000},
		{"l_discount", 'f', 1}, {"l_tax", 'f', 1}, {"l_returnflag", 'c', 0}, {"l_linestatus", 'c', 0},
		{"l_shipdate", 'd', 0}, {"l_commitdate", 'd', 0}, {"l_receiptdate", 'd', 0}, {"l_shipinstruct", 'c', 0},
		{"l_shipmode", 'c', 0}, {"l_comment", 's', 4}}, choices: []string{"A", "F", "N", "O", "R", "DELIVER IN PERSON", "NONE", "TAKE BACK RETURN", "AIR", "MAIL", "SHIP", "TRUCK"}},
	{name: "orders", perSF: 1_500_000, cols: []tpchCol{{"o_orderkey", 'k', 0}, {"o_custkey", 'i', 150_000},
		{"o_orderstatus", 'c', 0}, {"o_totalprice", 'f', 500_000}, {"o_orderdate", 'd', 0}, {"o_orderpriority", 'c', 0},
		{"o_clerk", 's', 1}, {"o_shippriority", 'n', 1}, {"o_comment", 's', 8}}, choices: []string{"F", "O", "P", "1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW"}},
	{name: "partsupp", perSF: 800_000, cols: []tpchCol{{"ps_partkey", 'k', 0}, {"ps_suppkey", 'i', 10_000},
		{"ps_availqty", 'n', 10_000}, {"ps_supplycost", 'f', 1000}, {"ps_comment", 's', 20}}},
	{name: "part", perSF: 200_000, cols: []tpchCol{{"p_partkey", 'k', 0}, {"p_name", 's', 5}, {"p_mfgr", 'c', 0},
		{"p_brand", 'c', 0}, {"p_type", 's', 3}, {"p_size", 'n', 50}, {"p_container", 'c', 0}, {"p_retailprice", 'f', 2000},
		{"p_comment", 's', 2}}, choices: []string{"Manufacturer#1", "Manufacturer#2", "Brand#13", "Brand#42", "SM CASE", "LG BOX", "JUMBO PKG"}},
	{name: "customer", perSF: 150_000, cols: []tpchCol{{"c_custkey", 'k', 0}, {"c_name", 's', 1}, {"c_address", 's', 3},
		{"c_nationkey", 'i', 25}, {"c_phone", 's', 1}, {"c_acctbal", 'f', 10_000}, {"c_mktsegment", 'c', 0},
		{"c_comment", 's', 10}}, choices: []string{"AUTOMOBILE", "BUILDING", "FURNITURE", "HOUSEHOLD", "MACHINERY"}},
	{name: "supplier", perSF: 10_000, cols: []tpchCol{{"s_suppkey", 'k', 0}, {"s_name", 's', 1}, {"s_address", 's', 3},
		{"s_nationkey", 'i', 25}, {"s_phone", 's', 1}, {"s_acctbal", 'f', 10_000}, {"s_comment", 's', 10}}},
	{name: "nation", perSF: 25, fixed: true, cols: []tpchCol{{"n_nationkey", 'k', 0}, {"n_name", 's', 1},
		{"n_regionkey", 'i', 5}, {"n_comment", 's', 12}}},
	{name: "region", perSF: 5, fixed: true, cols: []tpchCol{{"r_regionkey", 'k', 0}, {"r_name", 's', 1}, {"r_comment", 's', 12}}},
}

// schema is the table's Arrow schema: keys required, the rest optional.
func (t tpchTable) schema() *arrow.Schema {
	fields := make([]arrow.Field, len(t.cols))
	for i, c := range t.cols {
		fields[i] = arrow.Field{Name: c.name, Type: c.arrowType(), Nullable: c.kind != 'k'}
	}
	return arrow.NewSchema(fields, nil)
}

func (c tpchCol) arrowType() arrow.DataType {
	switch c.kind {
	case 'k', 'i':
		return arrow.PrimitiveTypes.Int64
	case 'n':
		return arrow.PrimitiveTypes.Int32
	case 'f':
		return arrow.PrimitiveTypes.Float64
	case 'd':
		return arrow.FixedWidthTypes.Date32
	}
	return arrow.BinaryTypes.String
}

// rows is the table's row count at scale factor sf.
func (t tpchTable) rows(sf float64) int {
	if t.fixed {
		return t.perSF
	}
	return int(float64(t.perSF) * sf)
}

// tpchWords are the words of the text columns (TPC-H's comments are random words of a small grammar).
var tpchWords = strings.Fields("furiously carefully quickly slyly blithely express regular final pending " +
	"ironic special bold even silent unusual packages deposits requests accounts instructions theodolites " +
	"pinto beans foxes ideas dependencies excuses platelets asymptotes courts dolphins sleep wake are " +
	"haggle nag use boost affix detect integrate cajole above according across after against along among")

// batches generates the table's rows at scale factor sf in batches of at most size rows.
func (t tpchTable) batches(sf float64, size int, seed uint64) []arrow.RecordBatch {
	rng := rand.New(rand.NewPCG(seed, 14))
	sc := t.schema()
	var out []arrow.RecordBatch
	total := t.rows(sf)
	var sb strings.Builder
	for start := 0; start < total; start += size {
		n := min(size, total-start)
		b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
		for i, c := range t.cols {
			fb := b.Field(i)
			for r := 0; r < n; r++ {
				switch c.kind {
				case 'k':
					fb.(*array.Int64Builder).Append(int64(start + r + 1))
				case 'i':
					fb.(*array.Int64Builder).Append(rng.Int64N(int64(c.n)) + 1)
				case 'n':
					fb.(*array.Int32Builder).Append(int32(rng.IntN(c.n) + 1))
				case 'f':
					fb.(*array.Float64Builder).Append(float64(rng.IntN(c.n*100)) / 100)
				case 'd':
					fb.(*array.Date32Builder).Append(arrow.Date32(8035 + rng.IntN(2557))) // 1992..1998
				case 'c':
					fb.(*array.StringBuilder).Append(t.choices[rng.IntN(len(t.choices))])
				default:
					sb.Reset()
					for w := 0; w < c.n; w++ {
						if w > 0 {
							sb.WriteByte(' ')
						}
						sb.WriteString(tpchWords[rng.IntN(len(tpchWords))])
					}
					if c.n == 1 {
						fmt.Fprintf(&sb, "#%09d", rng.IntN(1_000_000_000))
					}
					fb.(*array.StringBuilder).Append(sb.String())
				}
			}
		}
		out = append(out, b.NewRecordBatch())
		b.Release()
	}
	return out
}

// tpchUnion is the schema of every TPC-H column in one table (TPC-H's column names never collide), all
// optional: the single-table baseline writes each table's batches into it, the other columns null.
func tpchUnion() *arrow.Schema {
	var fields []arrow.Field
	for _, t := range tpchTables {
		for _, f := range t.schema().Fields() {
			f.Nullable = true
			fields = append(fields, f)
		}
	}
	return arrow.NewSchema(fields, nil)
}

// BenchmarkRouterTPCH writes the eight tables of the TPC-H shape (scale factor ICEWRITER_BENCH_TPCH_MILLI /
// 1000, default 1: 8,660,030 rows, about 1 GB of Arrow; at 0.1 each table is one batch and one encoder's speed
// on lineitem's batch decides every setup) five ways in each iteration, every table's batches (10,000 rows) fed
// by a goroutine of its own, default options everywhere, timed until everything is committed:
//   - router: one Router over the eight tables (one 256 MiB budget, 2 encoders), committing in rounds (the
//     embedded catalog commits the tables of a round in one database transaction);
//   - pertable: the same Router with WithPerTableCommits;
//   - bulk: the same Router with every table in its bulk phase (reported as its rate over the router's);
//   - single: one Writer writing every table's batches into one table holding all the columns;
//   - eight: eight Writers side by side, one per table (each its own 256 MiB budget and 2 encoders).
//
// It reports the router's rows/s and its rate as a ratio to the single writer's (goal: at least 0.9) and to
// the eight writers' (goal: above 1), for both routers, by wall time and by the process's CPU time (user and
// system) each setup took: on a machine shared with other work the wall-time ratios swing with its load, the CPU
// ones much less.
func BenchmarkRouterTPCH(b *testing.B) {
	sf := float64(envInt("ICEWRITER_BENCH_TPCH_MILLI", 1000)) / 1000
	data := make([][]arrow.RecordBatch, len(tpchTables))
	rows := 0
	for i, t := range tpchTables {
		data[i] = t.batches(sf, 10_000, uint64(i))
		rows += t.rows(sf)
	}
	b.Cleanup(func() {
		for _, bs := range data {
			for _, r := range bs {
				r.Release()
			}
		}
	})
	ctx := context.Background()
	var dRouter, dPerTable, dBulk, dSingle, dEight tpchCost
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dSingle.add(timeTPCH(b, func(cat icecatalog.Catalog) (func(int, arrow.RecordBatch) error, func() (int64, error)) {
			w, err := iceberg.NewWriter(ctx, cat, table.Identifier{"tpch", "all"}, iceberg.WithCreate(tpchUnion()))
			if err != nil {
				b.Fatal(err)
			}
			return func(_ int, rec arrow.RecordBatch) error { return w.Write(ctx, rec) },
				func() (int64, error) { err := w.Close(ctx); return w.Stats().RowsCommitted, err }
		}, data))
		dEight.add(timeTPCH(b, func(cat icecatalog.Catalog) (func(int, arrow.RecordBatch) error, func() (int64, error)) {
			ws := make([]*iceberg.Writer, len(tpchTables))
			for t, tt := range tpchTables {
				var err error
				if ws[t], err = iceberg.NewWriter(ctx, cat, table.Identifier{"tpch", tt.name}, iceberg.WithCreate(tt.schema())); err != nil {
					b.Fatal(err)
				}
			}
			return func(t int, rec arrow.RecordBatch) error { return ws[t].Write(ctx, rec) },
				func() (int64, error) {
					var n int64
					for _, w := range ws {
						if err := w.Close(ctx); err != nil {
							return 0, err
						}
						n += w.Stats().RowsCommitted
					}
					return n, nil
				}
		}, data))
		router := func(opts ...iceberg.RouterOption) func(cat icecatalog.Catalog) (func(int, arrow.RecordBatch) error, func() (int64, error)) {
			return func(cat icecatalog.Catalog) (func(int, arrow.RecordBatch) error, func() (int64, error)) {
				r, err := iceberg.NewRouter(cat, opts...)
				if err != nil {
					b.Fatal(err)
				}
				return func(t int, rec arrow.RecordBatch) error {
						return r.Write(ctx, table.Identifier{"tpch", tpchTables[t].name}, rec)
					},
					func() (int64, error) { err := r.Close(ctx); return r.Stats().Total.RowsCommitted, err }
			}
		}
		dRouter.add(timeTPCH(b, router(), data))
		dPerTable.add(timeTPCH(b, router(iceberg.WithPerTableCommits()), data))
		dBulk.add(timeTPCH(b, router(iceberg.WithTableConfig(
			func(context.Context, table.Identifier, *arrow.Schema) (iceberg.TableConfig, error) {
				return iceberg.TableConfig{Phase: iceberg.PhaseBulk}, nil
			})), data))
	}
	b.StopTimer()
	b.ReportMetric(float64(rows)*float64(b.N)/dRouter.wall.Seconds(), "rows/s")
	ratio := func(name string, slow, fast tpchCost) {
		b.ReportMetric(slow.wall.Seconds()/fast.wall.Seconds(), name)
		b.ReportMetric(slow.cpu.Seconds()/fast.cpu.Seconds(), name+"-cpu")
	}
	ratio("x-single", dSingle, dRouter)
	ratio("x-eight", dEight, dRouter)
	ratio("pertable-x-single", dSingle, dPerTable)
	ratio("pertable-x-eight", dEight, dPerTable)
	ratio("bulk-x-router", dRouter, dBulk)
	b.ReportMetric(float64(rows), "rows")
}

// timeTPCH opens a fresh catalog, sets up a way of writing (write(table index, batch), and done, which closes
// and returns the rows committed), feeds every table's batches from a goroutine of its own and returns the time
// until done returned, and the CPU time meanwhile; every row must have been committed.
func timeTPCH(b *testing.B, setup func(icecatalog.Catalog) (func(int, arrow.RecordBatch) error, func() (int64, error)), data [][]arrow.RecordBatch) tpchCost {
	b.StopTimer()
	cat := openCatalog(b)
	write, done := setup(cat)
	runtime.GC()
	b.StartTimer()
	start, startCPU := time.Now(), cpuTime()
	var wg sync.WaitGroup
	errs := make([]error, len(data))
	for t, bs := range data {
		wg.Go(func() {
			for _, rec := range bs {
				if err := write(t, rec); err != nil {
					errs[t] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	committed, err := done()
	if err != nil {
		b.Fatal(err)
	}
	elapsed := tpchCost{wall: time.Since(start), cpu: cpuTime() - startCPU}
	var rows int64
	for _, bs := range data {
		for _, r := range bs {
			rows += r.NumRows()
		}
	}
	if committed != rows {
		b.Fatalf("%d rows committed, %d written", committed, rows)
	}
	return elapsed
}

// tpchCost is what a setup took: wall time and the process's CPU time.
type tpchCost struct{ wall, cpu time.Duration }

func (c *tpchCost) add(o tpchCost) { c.wall, c.cpu = c.wall+o.wall, c.cpu+o.cpu }

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
