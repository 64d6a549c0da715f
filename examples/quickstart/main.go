// Command quickstart writes 1,000,000 seed events into the Iceberg table quickstart.events, kept in a local
// folder (an embedded SQLite catalog and a local warehouse), committing every 200 ms as it goes, then reads the
// table back and says where it is and how to read it. Each run replaces the table the previous run left.
//
//	go run ./examples/quickstart            # writes into ./data
//	go run ./examples/quickstart -rows 5000000 -dir /tmp/ice -v
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/catalog"
	"github.com/icewriter/iceberg/internal/seed"
)

func main() {
	var cfg config
	flag.StringVar(&cfg.dir, "dir", "data", "folder for the catalog database and the warehouse")
	flag.IntVar(&cfg.rows, "rows", 1_000_000, "events to write")
	flag.IntVar(&cfg.batch, "batch", 10_000, "rows per Write call")
	flag.DurationVar(&cfg.interval, "interval", 200*time.Millisecond, "commit interval (WithFlushInterval)")
	flag.BoolVar(&cfg.verbose, "v", false, "log each commit (snapshot, rows, files, duration, attempts)")
	flag.Parse()
	if err := run(context.Background(), cfg, os.Stdout, os.Stderr); err != nil {
		log.Fatal(err)
	}
}

type config struct {
	dir           string
	rows, batch   int
	interval      time.Duration
	verbose       bool
	progressEvery time.Duration // how often the progress line is redrawn (0: 100 ms)
}

// ident is the table every run writes: the run replaces what the previous one left.
var ident = table.Identifier{"quickstart", "events"}

func run(ctx context.Context, cfg config, out, status io.Writer) error {
	abs, err := filepath.Abs(cfg.dir)
	if err != nil {
		return err
	}
	dbPath := filepath.Join(abs, "catalog.db")
	cat, err := catalog.Open(ctx, "sqlite://"+dbPath)
	if err != nil {
		return err
	}
	defer cat.(icecatalog.Closer).Close()
	if err := clearEarlierRuns(ctx, cat, abs, out); err != nil {
		return err
	}

	level := slog.LevelWarn // the progress line says what happens; -v logs each commit
	if cfg.verbose {
		level = slog.LevelInfo
	}
	opts := []iceberg.Option{
		iceberg.WithCreate(seed.Schema, iceberg.PartitionBy("day(ts)")),
		iceberg.WithFlushInterval(cfg.interval), // a commit every interval while rows arrive
		iceberg.WithFlushRows(100_000),          // and batches small enough to encode within one
		iceberg.WithLogger(slog.New(slog.NewTextHandler(status, &slog.HandlerOptions{Level: level}))),
	}
	w, err := iceberg.NewWriter(ctx, cat, ident, opts...)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "writing %d events into %s, committing every %s\n", cfg.rows, strings.Join(ident, "."), cfg.interval)

	bar := newProgress(status, cfg.rows, w, cfg.progressEvery, cfg.verbose)
	gen := seed.New(0, 42)
	start := time.Now()
	for written := 0; written < cfg.rows; {
		n := min(cfg.batch, cfg.rows-written)
		rec := gen.Batch(n)
		err := w.Write(ctx, rec)
		rec.Release()
		if err != nil {
			bar.stop()
			return err
		}
		written += n
	}
	err = w.Close(ctx)
	elapsed := time.Since(start)
	bar.stop()
	if err != nil {
		return err
	}
	st := w.Stats()
	fmt.Fprintf(out, "committed %d rows in %s: %.0f rows/s, %d commits, %d files (%.1f MiB of Parquet)\n",
		st.RowsCommitted, elapsed.Round(time.Millisecond), float64(st.RowsCommitted)/elapsed.Seconds(),
		st.Commits, st.FilesWritten, float64(st.BytesWritten)/(1<<20))

	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		return err
	}
	_, recs, err := tbl.Scan(table.WithSelectedFields("id")).ToArrowRecords(ctx)
	if err != nil {
		return err
	}
	var count int64
	for rec, err := range recs {
		if err != nil {
			return err
		}
		count += rec.NumRows()
		rec.Release()
	}
	if count != int64(cfg.rows) {
		return fmt.Errorf("read back %d rows, wrote %d", count, cfg.rows)
	}
	fmt.Fprintf(out, `read back %d rows with iceberg-go's scanner.

The table %s is in %s:
  catalog    %s (SQLite; catalog name "default")
  data       %s
  metadata   %s
Read it from Go as this program does (catalog.Open, LoadTable, Scan), or for instance with
  DuckDB     SELECT count(*) FROM iceberg_scan('%s');
  PyIceberg  SqlCatalog("default", uri="sqlite:///%s", warehouse="file://%s").load_table("%s")
The next run replaces the table.
`, count, strings.Join(ident, "."), abs, dbPath, strings.TrimPrefix(tbl.Location(), "file://"),
		strings.TrimPrefix(tbl.MetadataLocation(), "file://"), strings.TrimPrefix(tbl.MetadataLocation(), "file://"),
		dbPath, filepath.Join(abs, "warehouse"), strings.Join(ident, "."))
	return nil
}

// earlierTable matches the tables earlier versions of the quickstart made, one per run (events_<unix time>).
var earlierTable = regexp.MustCompile(`^events(_[0-9]+)?$`)

// clearEarlierRuns drops the table of the previous run and its files, and the per-run tables earlier versions
// of the quickstart left behind; a table's folder inside dir goes too (files of a run that was killed before it
// committed them included).
func clearEarlierRuns(ctx context.Context, cat icecatalog.Catalog, dir string, out io.Writer) error {
	var names []table.Identifier
	for id, err := range cat.ListTables(ctx, table.Identifier{ident[0]}) {
		if errors.Is(err, icecatalog.ErrNoSuchNamespace) {
			return nil
		}
		if err != nil {
			return err
		}
		if earlierTable.MatchString(id[len(id)-1]) {
			names = append(names, id)
		}
	}
	for _, id := range names {
		tbl, err := cat.LoadTable(ctx, id)
		if err == nil {
			if purger, ok := cat.(icecatalog.PurgeableTable); ok {
				err = purger.PurgeTable(ctx, id) // the catalog entry and the files the table references
			} else {
				err = cat.DropTable(ctx, id)
			}
		}
		if err != nil {
			return fmt.Errorf("remove the table of an earlier run %s: %w", strings.Join(id, "."), err)
		}
		if loc, ok := strings.CutPrefix(tbl.Location(), "file://"); ok && strings.HasPrefix(loc, dir+string(filepath.Separator)) {
			if err := os.RemoveAll(loc); err != nil {
				return err
			}
		}
	}
	switch {
	case len(names) == 1 && slices.Equal(names[0], ident):
		fmt.Fprintf(out, "replacing the table of the previous run\n")
	case len(names) == 1:
		fmt.Fprintf(out, "removed the table of an earlier run\n")
	case len(names) > 1:
		fmt.Fprintf(out, "removed %d tables of earlier runs\n", len(names))
	}
	return nil
}

// progress redraws one status line from the writer's Stats: rows committed (the bar), commits, rows accepted,
// time so far.
type progress struct {
	out   io.Writer
	total int
	w     *iceberg.Writer
	start time.Time
	quit  chan struct{}
	done  chan struct{}
	lines bool // one line per redraw instead of redrawing in place (-v: log lines come in between)
}

func newProgress(out io.Writer, total int, w *iceberg.Writer, every time.Duration, lines bool) *progress {
	if every <= 0 {
		every = 100 * time.Millisecond
	}
	p := &progress{out: out, total: total, w: w, start: time.Now(), quit: make(chan struct{}),
		done: make(chan struct{}), lines: lines}
	go func() {
		defer close(p.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.quit:
				p.draw()
				if !p.lines {
					fmt.Fprintln(p.out)
				}
				return
			case <-t.C:
				p.draw()
			}
		}
	}()
	return p
}

func (p *progress) draw() {
	st := p.w.Stats()
	const width = 40
	filled := int(int64(width) * st.RowsCommitted / int64(p.total))
	line := fmt.Sprintf("[%s%s] %3d%%  %d rows committed in %d commits, %d accepted, %.1fs",
		strings.Repeat("=", filled), strings.Repeat(" ", width-filled), 100*st.RowsCommitted/int64(p.total),
		st.RowsCommitted, st.Commits, st.RowsAccepted, time.Since(p.start).Seconds())
	if p.lines {
		fmt.Fprintln(p.out, line)
	} else {
		fmt.Fprint(p.out, "\r"+line)
	}
}

// stop draws the last line and ends the redraws.
func (p *progress) stop() {
	close(p.quit)
	<-p.done
}
