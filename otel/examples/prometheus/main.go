// Command prometheus writes events into an Iceberg table kept in a local folder (an embedded SQLite catalog and a
// local warehouse) and serves the writer's metrics for Prometheus: the writer's hooks feed the OpenTelemetry
// plugin (package iceotel), whose meter provider reads through OpenTelemetry's Prometheus exporter.
//
//	cd otel && go run ./examples/prometheus          # metrics at http://localhost:2112/metrics, Ctrl-C stops
//	curl -s localhost:2112/metrics | grep '^iceberg_writer'
//	go run ./examples/prometheus -rate 500000 -for 30s -dir /tmp/ice
//
// Rows come from -partitions source partitions, each checkpointing its offset, so the position gauges have
// something to show.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/catalog"
	iceotel "github.com/icewriter/iceberg/otel"
)

func main() {
	var cfg config
	flag.StringVar(&cfg.addr, "addr", "localhost:2112", "address to serve /metrics on")
	flag.StringVar(&cfg.dir, "dir", "data", "folder for the catalog database and the warehouse")
	flag.IntVar(&cfg.rate, "rate", 100_000, "rows per second")
	flag.IntVar(&cfg.partitions, "partitions", 4, "source partitions the rows come from")
	flag.DurationVar(&cfg.duration, "for", 0, "stop after this long (0: until interrupted)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if cfg.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.duration)
		defer cancel()
	}
	if err := run(ctx, cfg); err != nil {
		log.Fatal(err)
	}
}

type config struct {
	addr, dir        string
	rate, partitions int
	duration         time.Duration
	// onCommit, when set, is called after each commit, once the commit's hook events were delivered (a writer
	// delivers its callbacks and hook events in order, on a goroutine of their own, after Flush returns).
	onCommit func(iceberg.CommitInfo)
}

func run(ctx context.Context, cfg config) error {
	a, err := newApp(ctx, cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return errors.Join(err, a.close())
	}
	srv := &http.Server{Handler: a.handler(), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	fmt.Printf("writing %d rows/s into %v; metrics at http://%s/metrics\n", cfg.rate, a.ident, ln.Addr())
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for err == nil {
		select {
		case <-ctx.Done():
			err = errors.Join(srv.Close(), a.close())
			fmt.Printf("stopped: %d rows committed in %d commits\n", a.w.Stats().RowsCommitted, a.w.Stats().Commits)
			return err
		case <-tick.C:
			err = a.write(context.WithoutCancel(ctx), cfg.rate/10)
		}
	}
	return errors.Join(err, srv.Close(), a.close())
}

// app is a writer with the OpenTelemetry hooks, and the Prometheus registry its metrics are read through.
type app struct {
	cat     icecatalog.Catalog
	ident   table.Identifier
	w       *iceberg.Writer
	hooks   *iceotel.Hooks
	mp      *sdkmetric.MeterProvider
	reg     *prometheus.Registry
	sources []*iceberg.Source
	offsets []int64
	nextID  int64
}

var schema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
	{Name: "partition", Type: arrow.BinaryTypes.String},
	{Name: "amount", Type: arrow.PrimitiveTypes.Float64},
}, nil)

func newApp(ctx context.Context, cfg config) (*app, error) {
	// The exporter is a metric reader: the meter provider's instruments are collected at each scrape.
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	hooks, err := iceotel.New(iceotel.WithMeterProvider(mp))
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(cfg.dir)
	if err != nil {
		return nil, err
	}
	cat, err := catalog.Open(ctx, "sqlite://"+filepath.Join(abs, "catalog.db"))
	if err != nil {
		return nil, err
	}
	ident := table.Identifier{"metrics", "events"}
	opts := []iceberg.Option{iceberg.WithCreate(schema), iceberg.WithHooks(hooks),
		iceberg.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))}
	if cfg.onCommit != nil {
		opts = append(opts, iceberg.WithOnCommit(cfg.onCommit))
	}
	w, err := iceberg.NewWriter(ctx, cat, ident, opts...)
	if err != nil {
		return nil, err
	}
	a := &app{cat: cat, ident: ident, w: w, hooks: hooks, mp: mp, reg: reg, offsets: make([]int64, cfg.partitions)}
	for p := range cfg.partitions {
		a.sources = append(a.sources, w.Source("p"+strconv.Itoa(p)))
	}
	return a, nil
}

func (a *app) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{}))
	return mux
}

// write writes n rows spread over the partitions, each partition's share followed by a checkpoint of its offset.
func (a *app) write(ctx context.Context, n int) error {
	per := max(n/len(a.sources), 1)
	now := time.Now()
	for p, src := range a.sources {
		rec := a.batch(per, now, src.Partition())
		err := src.Write(ctx, rec)
		rec.Release()
		if err != nil {
			return err
		}
		a.offsets[p] += int64(per)
		if err := src.Checkpoint(ctx, strconv.FormatInt(a.offsets[p], 10)); err != nil {
			return err
		}
	}
	return nil
}

func (a *app) batch(n int, ts time.Time, partition string) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	stamp := arrow.Timestamp(ts.UnixMicro())
	for i := range n {
		b.Field(0).(*array.Int64Builder).Append(a.nextID)
		b.Field(1).(*array.TimestampBuilder).Append(stamp)
		b.Field(2).(*array.StringBuilder).Append(partition)
		b.Field(3).(*array.Float64Builder).Append(float64(i%1000) / 10)
		a.nextID++
	}
	return b.NewRecordBatch()
}

// close commits what is left and stops the writer, then the meter provider and the catalog.
func (a *app) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := a.w.Close(ctx)
	err = errors.Join(err, a.hooks.Close(), a.mp.Shutdown(ctx))
	if c, ok := a.cat.(icecatalog.Closer); ok {
		err = errors.Join(err, c.Close())
	}
	return err
}
