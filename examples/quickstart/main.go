// Command quickstart writes 1,000,000 seed events into an Iceberg table kept in a local folder (an embedded
// SQLite catalog and a local warehouse), then reads the table back and prints what it holds.
//
//	go run ./examples/quickstart            # writes into ./data
//	go run ./examples/quickstart -rows 5000000 -batch 10000 -dir /tmp/ice
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/catalog"
	"github.com/icewriter/iceberg/internal/seed"
)

func main() {
	dir := flag.String("dir", "data", "folder for the catalog database and the warehouse")
	rows := flag.Int("rows", 1_000_000, "events to write")
	batch := flag.Int("batch", 1000, "rows per Write call")
	flag.Parse()
	if err := run(context.Background(), *dir, *rows, *batch); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, dir string, rows, batchRows int) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	cat, err := catalog.Open(ctx, "sqlite://"+filepath.Join(abs, "catalog.db"))
	if err != nil {
		return err
	}
	defer cat.(icecatalog.Closer).Close()

	ident := table.Identifier{"quickstart", fmt.Sprintf("events_%d", time.Now().Unix())}
	w, err := iceberg.NewWriter(ctx, cat, ident,
		iceberg.WithCreate(seed.Schema, iceberg.PartitionBy("day(ts)")),
		iceberg.WithFlushInterval(500*time.Millisecond))
	if err != nil {
		return err
	}
	gen := seed.New(0, 42)
	start := time.Now()
	bar := newProgress(os.Stderr, rows)
	for written := 0; written < rows; {
		n := min(batchRows, rows-written)
		rec := gen.Batch(n)
		err := w.Write(ctx, rec)
		rec.Release()
		if err != nil {
			return err
		}
		written += n
		bar.set(written, w.Stats().RowsCommitted)
	}
	if err := w.Close(ctx); err != nil {
		return err
	}
	elapsed := time.Since(start)
	bar.done(rows)
	st := w.Stats()
	fmt.Printf("wrote %d rows in %s: %.0f rows/s, %d commits, %d files (%.1f MiB of Parquet)\n",
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
	fmt.Printf("table %s at %s holds %d rows\n", ident, tbl.Location(), count)
	if count != int64(rows) {
		return fmt.Errorf("read back %d rows, wrote %d", count, rows)
	}
	return nil
}

// progress draws a one-line progress bar on a terminal.
type progress struct {
	out   *os.File
	total int
	last  time.Time
}

func newProgress(out *os.File, total int) *progress { return &progress{out: out, total: total} }

func (p *progress) set(n int, committed int64) {
	if time.Since(p.last) < 100*time.Millisecond {
		return
	}
	p.last = time.Now()
	const width = 40
	filled := width * n / p.total
	bar := make([]byte, width)
	for i := range bar {
		bar[i] = ' '
		if i < filled {
			bar[i] = '='
		}
	}
	fmt.Fprintf(p.out, "\r[%s] %3d%%  %d written, %d committed", bar, 100*n/p.total, n, committed)
}

func (p *progress) done(n int) {
	p.last = time.Time{}
	p.set(n, int64(n))
	fmt.Fprintln(p.out)
}
