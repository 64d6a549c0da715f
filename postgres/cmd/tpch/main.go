// Command tpch loads TPC-H-shaped data into Postgres (package tpch: deterministic, scale factor as a flag)
// and measures the snapshot of all eight tables into Iceberg through the postgres source, by default into a
// fresh embedded catalog (SQLite + local files):
//
//	go run ./cmd/tpch -dsn postgres://postgres@127.0.0.1:5432/bench -sf 1
//
// The tables tpch.* in the target catalog are dropped first. It reports rows/s, source and Parquet MB/s, the data files written, and CPU seconds per million rows split
// between Postgres (its processes' CPU from /proc: Postgres must run on this machine) and this process. -load=false
// re-uses tables loaded by an earlier run at the same scale factor.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	iceapi "github.com/apache/iceberg-go"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/jackc/pgx/v5"

	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/catalog"
	_ "github.com/icewriter/iceberg/catalog/rest"
	"github.com/icewriter/iceberg/postgres"
	"github.com/icewriter/iceberg/postgres/tpch"
	_ "github.com/icewriter/iceberg/storage/s3"
)

// level is the pipeline's log level (-v: info).
var level slog.Level

// catProps is -catalog-props.
var catProps = iceapi.Properties{}

// smallFiles is -small-files, formatVersion -format.
var smallFiles, formatVersion int

// stallDump is -stall-dump.
var stallDump string

func main() {
	dsn := flag.String("dsn", os.Getenv("ICEWRITER_PG_DSN"), "source DSN (default $ICEWRITER_PG_DSN)")
	sf := flag.Float64("sf", 0.1, "TPC-H scale factor (at least 0.01)")
	load := flag.Bool("load", true, "(re)load the tpch schema first")
	catURI := flag.String("catalog", "", "target catalog URI (default: a fresh embedded catalog in a temporary folder)")
	flag.Func("catalog-props", "catalog properties, k=v,k=v (a REST catalog's credential, warehouse, s3.endpoint, ...)",
		func(v string) error {
			for _, kv := range strings.Split(v, ",") {
				k, val, ok := strings.Cut(kv, "=")
				if !ok {
					return fmt.Errorf("%q: want k=v", kv)
				}
				catProps[k] = val
			}
			return nil
		})
	workers := flag.Int("workers", 0, "snapshot connections (default GOMAXPROCS)")
	memory := flag.Int64("memory", 0, "writer memory limit in bytes (default the library's, 256 MiB)")
	flag.IntVar(&formatVersion, "format", 2, "Iceberg format version of the tables created (3: deletion vectors in the live phase)")
	flag.IntVar(&smallFiles, "small-files", -1, "WithSmallFileCompactionEvery(n) for the tables (-1: the library's default, 32)")
	profile := flag.String("cpuprofile", "", "write a CPU profile of the snapshot to this file")
	live := flag.Duration("live", 0, "after the snapshot, stream updates for this long and report commit lag (0: snapshot only)")
	verbose := flag.Bool("v", false, "log the pipeline's and the writers' progress (commits with their durations)")
	rate := flag.Int("rate", 10_000, "changes per second the live phase's driver commits (updates of lineitem, 100 transactions/s)")
	flag.StringVar(&stallDump, "stall-dump", "", "in the live phase, write every goroutine's stack to this file (appended, at most 10 times) whenever no commit has confirmed changes for 2.5 s")
	flag.Parse()
	if *profile != "" {
		f, err := os.Create(*profile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "tpch:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	level = slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	if err := run(*dsn, *sf, *load, *catURI, *workers, *memory, *live, *rate); err != nil {
		fmt.Fprintln(os.Stderr, "tpch:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

func run(dsn string, sf float64, load bool, catURI string, workers int, memory int64, live time.Duration, rate int) error {
	ctx := context.Background()
	if dsn == "" {
		return fmt.Errorf("no -dsn")
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if load {
		start := time.Now()
		if err := tpch.Load(ctx, conn, sf); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "loaded SF %g in %.1f s\n", sf, time.Since(start).Seconds())
	}
	var rows, heap int64
	var names []string
	for _, t := range tpch.Tables {
		var n, b int64
		q := fmt.Sprintf("SELECT count(*), pg_relation_size('tpch.%s') FROM tpch.%s", t, t)
		if err := conn.QueryRow(ctx, q).Scan(&n, &b); err != nil {
			return err
		}
		rows, heap = rows+n, heap+b
		names = append(names, "tpch."+t)
	}
	const slot = "tpch_bench"
	_, _ = conn.Exec(ctx, "SELECT pg_drop_replication_slot($1) FROM pg_replication_slots WHERE slot_name = $1", slot)
	_, _ = conn.Exec(ctx, "DROP PUBLICATION IF EXISTS "+slot)
	defer conn.Exec(ctx, "SELECT pg_drop_replication_slot($1) FROM pg_replication_slots WHERE slot_name = $1", slot)
	defer conn.Exec(ctx, "DROP PUBLICATION IF EXISTS "+slot)

	if catURI == "" {
		dir, err := os.MkdirTemp("", "tpch-iceberg-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		catURI = "sqlite://" + filepath.Join(dir, "catalog.db") + "?warehouse=file://" + filepath.Join(dir, "warehouse")
	}
	cat, err := catalog.OpenWithProperties(ctx, catURI, catProps)
	if err != nil {
		return err
	}
	// A benchmark starts from empty tables: earlier runs' tables hold positions of a slot dropped since.
	for _, t := range tpch.Tables {
		if err := cat.DropTable(ctx, table.Identifier{"tpch", t}); err != nil && !errors.Is(err, icecatalog.ErrNoSuchTable) {
			return fmt.Errorf("dropping the earlier run's tpch.%s: %w", t, err)
		}
	}
	postmaster, err := postmasterPID(ctx, conn)
	if err != nil {
		return err
	}
	var wopts []iceberg.Option
	if memory > 0 {
		wopts = append(wopts, iceberg.WithMemoryLimit(memory))
	}
	if smallFiles >= 0 {
		wopts = append(wopts, iceberg.WithSmallFileCompactionEvery(smallFiles))
	}
	mode := postgres.ModeSnapshot
	if live > 0 {
		mode = postgres.ModeFull
	}
	lag := newLagMeter()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	snapshotDone := make(chan time.Time, 1)
	runErr := make(chan error, 1)
	pg0, self0 := postgresCPU(postmaster), selfCPU()
	start := time.Now()
	go func() {
		runErr <- postgres.Run(runCtx, cat, postgres.Config{DSN: dsn, Tables: names, Slot: slot, Mode: mode,
			Workers: workers, WriterOptions: wopts, Namespace: []string{"tpch"},
			CreateOptions: []iceberg.CreateOption{iceberg.FormatVersion(formatVersion)},
			Logger:        slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})),
			OnEvent: func(e postgres.Event) {
				switch e.Kind {
				case "snapshot-done":
					snapshotDone <- time.Now()
				case "confirmed":
					lag.confirmed(e.LSN, time.Now())
				}
			}})
	}()
	var end time.Time
	select {
	case end = <-snapshotDone:
	case err := <-runErr:
		if err != nil {
			return err
		}
		return fmt.Errorf("the pipeline ended before its snapshot")
	}
	elapsed := end.Sub(start).Seconds()
	pgCPU, selfCPUs := postgresCPU(postmaster)-pg0, selfCPU()-self0
	// The snapshot's files, before the live phase adds any.
	var files, bytes, committed int64
	for _, t := range tpch.Tables {
		f, b, r, err := summary(ctx, cat, table.Identifier{"tpch", t})
		if err != nil {
			return err
		}
		files, bytes, committed = files+f, bytes+b, committed+r
	}
	if committed != rows {
		return fmt.Errorf("the tables hold %d rows, the source %d", committed, rows)
	}
	if live > 0 {
		pgLive, selfLive := postgresCPU(postmaster), selfCPU()
		if err := drive(ctx, dsn, live, rate, tpch.Rows(sf)["orders"], lag, runErr); err != nil {
			return err
		}
		lag.cpu(postgresCPU(postmaster)-pgLive, selfCPU()-selfLive)
	}
	stop()
	if err := <-runErr; err != nil && runCtx.Err() == nil {
		return err
	}
	mrows := float64(rows) / 1e6
	fmt.Printf("| SF | rows | seconds | rows/s | rows/s per core | source MB/s | Parquet MB/s | data files | avg file MB | CPU s/M rows: Postgres | pipeline | cores |\n")
	fmt.Printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	fmt.Printf("| %g | %d | %.1f | %.0f | %.0f | %.1f | %.1f | %d | %.1f | %.2f | %.2f | %d |\n",
		sf, rows, elapsed, float64(rows)/elapsed, float64(rows)/elapsed/float64(runtime.NumCPU()),
		float64(heap)/1e6/elapsed, float64(bytes)/1e6/elapsed, files, float64(bytes)/1e6/float64(max(files, 1)),
		pgCPU/mrows, selfCPUs/mrows, runtime.NumCPU())
	if live > 0 {
		lag.report(os.Stdout, rate, live)
	}
	return nil
}

// summary reads a table's totals from its current snapshot's summary.
func summary(ctx context.Context, cat icecatalog.Catalog, ident table.Identifier) (files, bytes, rows int64, err error) {
	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		return 0, 0, 0, err
	}
	s := tbl.CurrentSnapshot()
	if s == nil || s.Summary == nil {
		return 0, 0, 0, nil
	}
	get := func(k string) int64 { v, _ := strconv.ParseInt(s.Summary.Properties[k], 10, 64); return v }
	return get("total-data-files"), get("total-files-size"), get("total-records"), nil
}

// postmasterPID is the parent of this connection's backend.
func postmasterPID(ctx context.Context, conn *pgx.Conn) (int, error) {
	var backend int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		return 0, err
	}
	f, err := procStat(backend)
	if err != nil {
		return 0, fmt.Errorf("Postgres must run on this machine to measure its CPU: %w", err)
	}
	return strconv.Atoi(f[1])
}

// procStat returns /proc/pid/stat's fields after the command name (state is [0], ppid [1], utime [11]).
func procStat(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+2:]), nil
}

const clockTicks = 100 // USER_HZ on Linux

// postgresCPU is the CPU seconds of the postmaster and its children: those alive now (their own time) and
// those that exited (the postmaster's cutime and cstime: it waits for every backend).
func postgresCPU(postmaster int) float64 {
	ents, _ := os.ReadDir("/proc")
	var ticks int64
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f, err := procStat(pid)
		if err != nil || len(f) < 15 {
			continue
		}
		if pid != postmaster && f[1] != strconv.Itoa(postmaster) {
			continue
		}
		for _, i := range []int{11, 12} {
			v, _ := strconv.ParseInt(f[i], 10, 64)
			ticks += v
		}
		if pid == postmaster {
			for _, i := range []int{13, 14} {
				v, _ := strconv.ParseInt(f[i], 10, 64)
				ticks += v
			}
		}
	}
	return float64(ticks) / clockTicks
}

// selfCPU is this process's user and system CPU seconds.
func selfCPU() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
