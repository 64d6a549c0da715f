package postgres

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	iceberg "github.com/icewriter/iceberg"
)

// chunk is a range of a table's heap pages copied as one unit: [from, to), to < 0 for the last chunk (open
// ended, so pages added since the plan are copied too). A table of one chunk is copied without a ctid range.
type chunk struct {
	t        *tableInfo
	i, n     int
	from, to int64
	upsert   bool // a chunk copied again after a crash: upserted, in the table's live phase
}

// plan is a table's snapshot plan, recorded as a position so that a restart copies the same chunks: the
// slot's consistent point, the pages per chunk and the number of chunks.
type plan struct {
	lsn      uint64
	perChunk int64
	chunks   int
}

func (pl plan) String() string { return fmt.Sprintf("%d:%d:%d", pl.lsn, pl.perChunk, pl.chunks) }

func parsePlan(s string) (plan, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return plan{}, fmt.Errorf("snapshot plan %q", s)
	}
	var pl plan
	var err1, err2, err3 error
	pl.lsn, err1 = strconv.ParseUint(parts[0], 10, 64)
	pl.perChunk, err2 = strconv.ParseInt(parts[1], 10, 64)
	pl.chunks, err3 = strconv.Atoi(parts[2])
	if err1 != nil || err2 != nil || err3 != nil || pl.chunks < 1 || pl.perChunk < 1 {
		return plan{}, fmt.Errorf("snapshot plan %q", s)
	}
	return pl, nil
}

// snapshot copies every table whose snapshot is not done (see Run). name is the exported snapshot ("" when the
// slot existed: chunks are then copied from a fresh snapshot each, as upserts where the table holds rows
// already); lsn is the consistent point of the snapshot name (or, without one, the slot's confirmed LSN), which
// a table's new plan records.
func (p *pipeline) snapshot(ctx context.Context, name string, lsn uint64, positions map[*tableInfo]map[string]string) error {
	var chunks []chunk
	left := map[*tableInfo]int{}
	plans := map[*tableInfo]plan{}
	for _, t := range p.tables {
		if _, done := p.slotPos[t.String()]; done {
			continue
		}
		pos := positions[t]
		if s, ok := pos[p.planPartition()]; ok {
			pl, err := parsePlan(s)
			if err != nil {
				return fmt.Errorf("postgres: table %s: %w", t, err)
			}
			plans[t] = pl
			for i := range pl.chunks {
				if pos[p.chunkPartition(i)] == "done" {
					continue
				}
				if len(t.key) == 0 {
					return fmt.Errorf("%w: %s: its snapshot was interrupted, and a new snapshot's rows cannot be matched to those copied: drop its Iceberg table to copy it again",
						ErrNoPrimaryKey, t)
				}
				chunks = append(chunks, newChunk(t, i, pl, true))
				left[t]++
			}
			p.cfg.Logger.Info("postgres: resuming the snapshot", "table", t.String(), "chunks_left", left[t],
				"chunks", pl.chunks)
			p.event(Event{Kind: "snapshot-resume", Table: t.String(), Rows: int64(left[t])})
		} else {
			var pages int64
			if err := p.conn.QueryRow(ctx, `SELECT pg_relation_size($1::oid::regclass) / current_setting('block_size')::bigint`,
				t.oid).Scan(&pages); err != nil {
				return fmt.Errorf("postgres: size of %s: %w", t, err)
			}
			pl := plan{lsn: lsn, perChunk: p.cfg.ChunkPages, chunks: int(max(1, (pages+p.cfg.ChunkPages-1)/p.cfg.ChunkPages))}
			if t.partitioned {
				pl.chunks = 1 // its heap is its partitions': copied through the root, in one chunk
			}
			plans[t] = pl
			// The plan is the table's first position: every commit of its rows carries it.
			if err := p.writer(t).CheckpointPositions(ctx, map[string]string{p.planPartition(): pl.String()}); err != nil {
				return err
			}
			if err := p.router.SetPhase(ctx, t.ident, iceberg.PhaseBulk); err != nil {
				return err
			}
			for i := range pl.chunks {
				chunks = append(chunks, newChunk(t, i, pl, false))
			}
			left[t] = pl.chunks
		}
	}
	if len(left) == 0 {
		p.event(Event{Kind: "snapshot-done"})
		return nil
	}
	began := time.Now()
	stats := map[*tableInfo]*copyStats{}
	for t := range left {
		stats[t] = &copyStats{}
		if left[t] == 0 { // every chunk done, the slot position not committed: commit it now
			if err := p.tableDone(ctx, t, plans[t], stats[t]); err != nil {
				return err
			}
			delete(left, t)
		}
	}
	// Tables of more chunks first: the last chunks to finish are then those of small tables.
	slices.SortStableFunc(chunks, func(a, b chunk) int { return b.n - a.n })
	work := make(chan chunk, len(chunks))
	for _, c := range chunks {
		work <- c
	}
	close(work)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range min(p.cfg.Workers, len(chunks)) {
		wg.Go(func() {
			if err := p.copyWorker(ctx, name, work, func(c chunk) {
				mu.Lock()
				if st := stats[c.t]; st.began.IsZero() {
					st.began = time.Now()
				}
				mu.Unlock()
			}, func(c chunk, rows int64) error {
				mu.Lock()
				left[c.t]--
				last := left[c.t] == 0
				st := stats[c.t]
				st.rows += rows
				mu.Unlock()
				if last {
					return p.tableDone(ctx, c.t, plans[c.t], st)
				}
				return nil
			}); err != nil {
				cancel(err)
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return err
	}
	if err := p.router.Flush(ctx); err != nil {
		return fmt.Errorf("postgres: committing the snapshot: %w", err)
	}
	for _, t := range p.tables {
		// Leaving the bulk phase loads the key index from the table's files: only the live phase needs it (a
		// later run opens the tables in their live phase anyway).
		if ph, _ := p.router.Phase(t.ident); ph == iceberg.PhaseBulk && p.cfg.Mode != ModeSnapshot {
			if err := p.router.SetPhase(ctx, t.ident, iceberg.PhaseLive); err != nil {
				return err
			}
		}
	}
	for t, pl := range plans {
		// What tableDone recorded: the live phase, which may start before the plan's LSN (a table new to the
		// slot), skips for the table the transactions its copy holds.
		p.slotPos[t.String()] = pl.lsn - 1
	}
	var rows int64
	for _, st := range stats {
		rows += st.rows
	}
	took := time.Since(began)
	p.cfg.Logger.Info("postgres: snapshot done", "tables", len(stats), "rows", rows, "took", took.Round(time.Millisecond),
		"rows_per_s", perSecond(rows, took))
	p.event(Event{Kind: "snapshot-done", Rows: rows})
	return nil
}

// copyStats is a table's progress in this run's snapshot.
type copyStats struct {
	began time.Time // its first chunk's start (zero: no chunk copied in this run)
	rows  int64
}

func perSecond(n int64, d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64(float64(n) / d.Seconds())
}

func newChunk(t *tableInfo, i int, pl plan, upsert bool) chunk {
	c := chunk{t: t, i: i, n: pl.chunks, from: int64(i) * pl.perChunk, to: int64(i+1) * pl.perChunk, upsert: upsert}
	if i == pl.chunks-1 {
		c.to = -1
	}
	return c
}

// tableDone records that the table's snapshot is done: it holds every transaction committed before the plan's
// consistent point.
// st is what this run copied of it.
func (p *pipeline) tableDone(ctx context.Context, t *tableInfo, pl plan, st *copyStats) error {
	pos := pl.lsn - 1
	if err := p.writer(t).CheckpointPositions(ctx, map[string]string{p.slotPartition(): strconv.FormatUint(pos, 10)}); err != nil {
		return err
	}
	var took time.Duration
	if !st.began.IsZero() {
		took = time.Since(st.began)
	}
	p.cfg.Logger.Info("postgres: table copied", "table", t.String(), "rows", st.rows,
		"took", took.Round(time.Millisecond), "rows_per_s", perSecond(st.rows, took))
	p.event(Event{Kind: "table-copied", Table: t.String(), Rows: st.rows})
	return nil
}

// copyWorker copies chunks from work in one repeatable-read transaction (on the exported snapshot when name is
// set); start is called before each chunk, done after its last rows (rows in all) and position are handed to
// the writer.
func (p *pipeline) copyWorker(ctx context.Context, name string, work <-chan chunk, start func(chunk),
	done func(c chunk, rows int64) error) error {
	cfg, err := pgx.ParseConfig(p.cfg.DSN)
	if err != nil {
		return fmt.Errorf("postgres: snapshot connection: %w", err)
	}
	// COPY's rows come one per message, a few hundred bytes each: pgproto3 reads the socket 8 KiB at a time,
	// a read system call per few dozen rows; a buffer of copyReadBuffer takes what the socket holds at once.
	cfg.BuildFrontend = func(r io.Reader, w io.Writer) *pgproto3.Frontend {
		return pgproto3.NewFrontend(bufio.NewReaderSize(r, copyReadBuffer), w)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("postgres: snapshot connection: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"); err != nil {
		return err
	}
	if name != "" {
		if _, err := conn.Exec(ctx, "SET TRANSACTION SNAPSHOT "+quoteLiteral(name)); err != nil {
			return fmt.Errorf("postgres: importing snapshot %s: %w", name, err)
		}
	}
	sizes := map[*tableInfo]*rowSizes{} // each table's largest record so far, to presize the next chunks'
	for c := range work {
		start(c)
		rows, err := p.copyChunk(ctx, conn.PgConn(), c, sizes)
		if err != nil {
			return err
		}
		if err := done(c, rows); err != nil {
			return err
		}
	}
	_, err = conn.Exec(ctx, "COMMIT")
	return err
}

// copyReadBuffer is the read buffer of a snapshot connection.
const copyReadBuffer = 256 << 10

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// copyChunk copies one chunk with COPY (SELECT ...) TO STDOUT (FORMAT binary), handing the writer a record
// every BatchRows rows, each followed by the chunk's progress as a position (a row boundary a commit may end
// at), then "done". It returns the rows copied. sizes holds the worker's largest record of each table, which
// the chunk's records are presized to (and which it updates).
func (p *pipeline) copyChunk(ctx context.Context, conn *pgconn.PgConn, c chunk, sizes map[*tableInfo]*rowSizes) (int64, error) {
	t := c.t
	cols := make([]string, len(t.cols))
	for i, col := range t.cols {
		cols[i] = pgx.Identifier{col.name}.Sanitize()
	}
	from := " FROM ONLY "
	if t.partitioned {
		from = " FROM " // the rows of its partitions
	}
	sql := "COPY (SELECT " + strings.Join(cols, ", ") + from + t.qualified()
	if c.n > 1 {
		sql += fmt.Sprintf(" WHERE ctid >= '(%d,0)'::tid", c.from)
		if c.to >= 0 {
			sql += fmt.Sprintf(" AND ctid < '(%d,0)'::tid", c.to)
		}
	}
	sql += ") TO STDOUT (FORMAT binary)"
	b := newRowBuilder(t.String(), t.cols, t.key, t.arrow)
	defer b.release()
	if sizes[t] == nil {
		sizes[t] = &rowSizes{}
	}
	b.sizes = sizes[t]
	// Each chunk is a partition of its own: its position covers exactly its rows handed over so far, whatever
	// the other chunks of the table interleave with them.
	src := p.writer(t).Source(p.chunkPartition(c.i))
	var rows int64
	flush := func() error {
		if b.rows == 0 {
			return nil
		}
		rec := b.record()
		var err error
		if c.upsert {
			err = src.Upsert(ctx, rec)
		} else {
			err = src.Write(ctx, rec)
		}
		rec.Release()
		if err != nil {
			return fmt.Errorf("postgres: table %s chunk %d: %w", t, c.i, err)
		}
		return src.Checkpoint(ctx, strconv.FormatInt(rows, 10))
	}
	parser := &copyParser{row: func(vals [][]byte) error {
		if len(vals) != len(t.cols) {
			return fmt.Errorf("postgres: table %s: COPY row of %d columns, want %d", t, len(vals), len(t.cols))
		}
		if b.rows == 0 {
			b.presize() // a record's first row: the room of the table's largest record
		}
		for i, v := range vals {
			if err := b.appendValue(i, v); err != nil {
				return b.withKey(err, func(j int) []byte { return vals[j] })
			}
		}
		b.rows++
		rows++
		if b.rows >= p.cfg.BatchRows {
			return flush()
		}
		return nil
	}}
	if _, err := conn.CopyTo(ctx, parser, sql); err != nil {
		return 0, fmt.Errorf("postgres: copying %s chunk %d: %w", t, c.i, err)
	}
	if err := parser.finish(); err != nil {
		return 0, err
	}
	if err := flush(); err != nil {
		return 0, err
	}
	if err := src.Checkpoint(ctx, "done"); err != nil {
		return 0, err
	}
	p.event(Event{Kind: "chunk", Table: t.String(), Chunk: c.i, Rows: rows})
	return rows, nil
}
