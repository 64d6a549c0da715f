package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	iceberg "github.com/icewriter/iceberg"
)

// Mode is what Run does.
type Mode string

const (
	// ModeFull copies the tables (the initial snapshot, unless done), then streams their changes until ctx
	// ends.
	ModeFull Mode = "full"
	// ModeSnapshot copies the tables (unless done) and returns. The slot stays, so a later ModeFull run goes
	// on from the snapshot's consistent point.
	ModeSnapshot Mode = "snapshot"
)

// Config configures Run. Only DSN is required.
type Config struct {
	// DSN is the source database's connection string (a libpq URL or key=value string). Its role needs the
	// REPLICATION attribute (or superuser), and the server wal_level=logical.
	DSN string
	// Tables are the tables to copy, "schema.table" or "table" (schema public). Default: every ordinary and
	// partitioned table outside the system schemas (not the partitions: a partitioned table's rows go to one
	// Iceberg table). Every column needs a type mapping (see Run); a table without a primary key is append-only
	// (ErrNoPrimaryKey).
	Tables []string
	// Namespace is the Iceberg namespace the tables go to. Default: the table's Postgres schema name.
	Namespace []string
	// Slot is the logical replication slot's name; the pipeline creates it on its first run and resumes from
	// it afterwards. Default: "icewriter".
	Slot string
	// Publication is the publication's name (created FOR TABLE the tables when missing; the tables it lacks
	// are added to it, unless it is FOR ALL TABLES). Default: the slot's.
	Publication string
	// Mode is ModeFull (default) or ModeSnapshot.
	Mode Mode
	// Workers is the number of connections that copy the snapshot in parallel. Default: GOMAXPROCS.
	Workers int
	// ChunkPages is the number of heap pages (8 KiB each) one snapshot chunk covers: the unit of parallel
	// copying and of resuming after a crash. Default: 8192 (64 MiB).
	ChunkPages int64
	// BatchRows is the number of rows handed to the writer at once. Default: 131072
	// (iceberg.DefaultRowGroupRows): a snapshot's records are then its bulk files' row groups as they are,
	// without joining smaller ones first.
	BatchRows int
	// FlushInterval is how often the live phase commits what it has read and then confirms the slot's LSN to
	// the server. Default: 1 s.
	FlushInterval time.Duration
	// KeepReplicaIdentity leaves the tables' REPLICA IDENTITY as it is. Default: false, and the pipeline sets
	// REPLICA IDENTITY FULL on every table that has another, so that an update's old row carries every column:
	// TOAST values an update leaves unchanged (which pgoutput does not resend) are taken from it. With this
	// set, such an update on a table without FULL is an error naming the table and column.
	KeepReplicaIdentity bool
	// NumericPrecision and NumericScale are the decimal an unconstrained numeric column maps to. Default:
	// DefaultNumericPrecision, DefaultNumericScale (38, 18).
	NumericPrecision, NumericScale int
	// RouterOptions and WriterOptions are passed to the Router (WithBulkTargetFileSize, ...) and to every
	// table's writer (WithMemoryLimit, WithMaxInFlight, WithTargetFileSize, WithMode, ...). Run adds
	// WithCheckpoints, WithSchemaEvolution, WithChangeColumns and WithWriterID("pg2iceberg-"+Slot).
	RouterOptions []iceberg.RouterOption
	WriterOptions []iceberg.Option
	// CreateOptions configure the Iceberg tables Run creates (FormatVersion, PartitionBy, TableProperties);
	// Run adds IdentifierFields of each table's primary key. Default: none (format version 2, unpartitioned).
	CreateOptions []iceberg.CreateOption
	// ReconnectTimeout is how long Run keeps reconnecting after it lost the server (a restart, a dropped or
	// terminated connection, a slot still held by the lost connection's walsender) before it gives up with the
	// last error. Each attempt commits what was checkpointed, then starts over as a new Run would: the changes
	// not committed are read again from the slot, exactly once. Attempts are spaced by a jittered backoff from
	// 50 ms doubling up to a quarter of FlushInterval (within 100 ms and 5 s: a refused connection costs little,
	// and a longer wait would outlast the server's restart); each loss and reconnection is logged. The
	// time counts from the first error after the pipeline last made progress. Default: 5 minutes; negative:
	// Run returns the first such error.
	ReconnectTimeout time.Duration
	// Logger logs the pipeline's progress. Default: slog.Default().
	Logger *slog.Logger
	// OnEvent, when set, is called at each step of the pipeline (a chunk copied, the snapshot done, a live
	// commit confirmed), on the pipeline's goroutines: it must be quick and must not block.
	OnEvent func(Event)
}

// Event is a step of the pipeline, for progress reports and tests.
type Event struct {
	// Kind is "chunk", "snapshot-resume", "table-copied", "snapshot-done", "live-start", "confirmed", or
	// "disconnected" (the server was lost: Run reconnects) and "reconnected" (the first step after it).
	Kind  string
	Table string // schema.table, for "chunk", "snapshot-resume" and "table-copied"
	Chunk int    // for "chunk"
	// Rows is the rows a chunk copied ("chunk"), the chunks left to copy ("snapshot-resume"), the rows this run
	// copied of a table ("table-copied") or of all ("snapshot-done"), or the changes checkpointed so far
	// ("confirmed").
	Rows int64
	LSN  uint64 // for "live-start" and "confirmed": the slot's LSN
}

// Change columns Apply reads: prefixed so that they cannot collide with a source column.
const (
	opColumn     = "_pg_op"
	beforePrefix = "_pg_before_"
)

var slotName = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)

func (c *Config) defaults() error {
	if c.DSN == "" {
		return fmt.Errorf("postgres: Config.DSN is required")
	}
	if c.Slot == "" {
		c.Slot = "icewriter"
	}
	if !slotName.MatchString(c.Slot) {
		return fmt.Errorf("postgres: Config.Slot %q: lower-case letters, digits and underscores, at most 63", c.Slot)
	}
	if c.Publication == "" {
		c.Publication = c.Slot
	}
	switch c.Mode {
	case "":
		c.Mode = ModeFull
	case ModeFull, ModeSnapshot:
	default:
		return fmt.Errorf("postgres: Config.Mode %q: want %q or %q", c.Mode, ModeFull, ModeSnapshot)
	}
	if c.Workers <= 0 {
		c.Workers = runtime.GOMAXPROCS(0)
	}
	if c.ChunkPages <= 0 {
		c.ChunkPages = 8192
	}
	if c.BatchRows <= 0 {
		c.BatchRows = iceberg.DefaultRowGroupRows
	}
	if c.FlushInterval <= 0 {
		c.FlushInterval = time.Second
	}
	if c.NumericPrecision == 0 {
		c.NumericPrecision, c.NumericScale = DefaultNumericPrecision, DefaultNumericScale
	}
	if c.NumericPrecision < 1 || c.NumericPrecision > 38 || c.NumericScale < 0 || c.NumericScale > c.NumericPrecision {
		return fmt.Errorf("postgres: Config.NumericPrecision, NumericScale (%d, %d): want 1 <= scale <= precision <= 38",
			c.NumericPrecision, c.NumericScale)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.ReconnectTimeout == 0 {
		c.ReconnectTimeout = 5 * time.Minute
	}
	return nil
}

// pipeline is one Run's state.
type pipeline struct {
	cfg    Config
	cat    catalog.Catalog
	conn   *pgx.Conn // catalog queries and setup
	mapper *typeMapper
	tables []*tableInfo
	byOID  map[uint32]*tableInfo
	router *iceberg.Router
	// slotPos is each table's position of the slot (decimal LSN; the table holds every transaction that
	// committed at or before it), by schema.table; absent while the table's snapshot is not done.
	slotPos map[string]uint64
	// deferrable: the tables whose primary key is DEFERRABLE, by OID (see liveTable.deferred).
	deferrable map[uint32]bool
	// progress is called at every event (see Run's reconnection).
	progress func(Event)
}

// Partition names of the positions the pipeline records on each table.
func (p *pipeline) slotPartition() string { return "pg/" + p.cfg.Slot }
func (p *pipeline) planPartition() string { return "pg/" + p.cfg.Slot + "/snapshot" }
func (p *pipeline) chunkPartition(i int) string {
	return "pg/" + p.cfg.Slot + "/snapshot/" + strconv.Itoa(i)
}

// Run copies Postgres tables into Iceberg tables of cat and keeps them up to date, exactly once across
// crashes, until ctx ends (ModeFull) or the snapshot is done (ModeSnapshot). It returns ctx's error once ctx
// ends, after committing what it has read.
//
// Setup, before anything is copied: every column's type is mapped (below), a primary key's columns become the
// Iceberg table's identifier fields (a table without one is append-only: see ErrNoPrimaryKey), the
// publication is created FOR TABLE the tables when missing (tables it lacks, added since, are added to it), and
// REPLICA IDENTITY FULL is set (see Config.KeepReplicaIdentity). Errors here name the table and column.
//
// Partitioned tables: one Iceberg table each, copied through the root in one chunk; the publication is created
// with publish_via_partition_root, so their partitions' changes arrive as the root's (a TRUNCATE of a single
// partition is then not published).
//
// Snapshot: on the first run the replication slot is created (pgoutput) with an exported snapshot, and each
// table is copied in chunks of heap pages (ctid ranges), by Config.Workers connections that import that
// snapshot, with COPY ... TO STDOUT (FORMAT binary), into the router's bulk phase. Each finished chunk is
// recorded as a position on its table, committed with its rows. After a crash, chunks not recorded are copied
// again from a new snapshot, as upserts (the table's live phase): rows copied twice, or moved between chunks
// since, are replaced by key, and the changes since the slot's consistent point, which the live phase replays
// in order, bring every row to its current value. A table new to an existing slot is copied from a temporary
// slot's exported snapshot, and takes the stream's transactions from that snapshot's consistent point on.
// Each table's rows, time and rate, and the totals, are logged (and reported as "table-copied" and
// "snapshot-done" events).
//
// Live phase: pgoutput (binary), from the slot's confirmed LSN. Inserts, updates and deletes go through Apply
// in commit order (an update that changes the key deletes the old key first). A table with a DEFERRABLE
// primary key may hold two rows of one key inside a transaction (UPDATE t SET id = id + 1): its changes are
// held until the commit (in memory: a large transaction of such a table is held whole) and applied by their
// net effect per key, matching old rows whole (REPLICA IDENTITY FULL, which such a table needs); a truncate deletes every row of
// the table at that point of the stream; a new column (a changed Relation message) is added to the table by
// schema evolution; one added with a constant default that Postgres shows on the rows that existed (ADD
// COLUMN ... DEFAULT 7), a value the stream never carries, is added to a format v3 table with it as its
// initial-default before any row carrying it (iceberg.Writer.AddColumn), so those rows read it, and on v2
// stops Run with ErrAddedColumnDefault (copy the table anew); so does, on any version, a column added with a
// volatile default or as an identity, which Postgres fills by a table rewrite the stream does not carry. A column whose type widens (integer to bigint,
// real to double precision, a numeric's precision), primary key columns included, is promoted in the Iceberg
// table. Each table's position is the commit LSN of the last transaction it holds, committed with
// its rows; every Config.FlushInterval the pipeline commits what it has read and only then confirms the
// transactions' end LSN to the server, so a restart replays what is not committed and skips, per table, what
// is.
//
// Types: smallint, integer → int; bigint, oid → long; real → float; double precision → double; numeric(p,s)
// → decimal(p,s), its whole range (unconstrained numeric → decimal(NumericPrecision, NumericScale)); boolean;
// text, varchar, char, name, "char" and enums → string; json and jsonb → variant on a format v3 table, string
// on v2 (which has no variant); bytea → binary; uuid → uuid; date; time → time; timestamp → timestamp;
// timestamptz → timestamptz; one-dimensional arrays of these → list (arrays of json or jsonb: of strings);
// domains as their base type. A json or jsonb column an existing Iceberg table already has keeps that column's
// type (a string column stays one on v3). Into a variant, a json value is its text's document and a jsonb value
// Postgres's normalized one; both hold the last value of a key given twice (as Postgres's json functions read
// it), and the JSON null is the variant null, not SQL NULL. A value its Iceberg type cannot hold stops Run with
// an error wrapping ErrOutOfRange that names the table, column and row key: never wrapped or rounded
// (timestamps after 294247-01-10 04:00:54.775807, time 24:00:00, date and timestamp infinities, numeric NaN and
// ±Infinity, an unconstrained numeric that does not fit, a JSON number of more than 38 digits that is not a
// double's or past a double's range).
// Anything else (interval, money, inet, timetz, ranges, composites, ...) is an error wrapping
// ErrUnsupportedType.
//
// Reconnection: when the connection to the server is lost (a restart, a terminated backend, a network error),
// Run commits what it has checkpointed and starts over as a new Run would, with a jittered backoff, until
// Config.ReconnectTimeout; other errors end Run at once.
func Run(ctx context.Context, cat catalog.Catalog, cfg Config) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	backoffMax := min(max(cfg.FlushInterval/4, 100*time.Millisecond), 5*time.Second)
	var lost time.Time // the first error since the pipeline last made progress; zero: none
	backoff := 50 * time.Millisecond
	for attempt := 0; ; attempt++ {
		var progressed atomic.Bool // events come from the copy workers and the committer too
		since := lost
		err := runOnce(ctx, cat, cfg, func(e Event) {
			if !since.IsZero() && !progressed.Swap(true) {
				cfg.Logger.Info("postgres: reconnected", "slot", cfg.Slot, "down_for", time.Since(since).Round(time.Millisecond),
					"attempts", attempt, "step", e.Kind)
				if cfg.OnEvent != nil {
					cfg.OnEvent(Event{Kind: "reconnected"})
				}
			}
			progressed.Store(true)
		})
		if err == nil || ctx.Err() != nil || cfg.ReconnectTimeout < 0 || !connectionLost(err) {
			return err
		}
		now := time.Now()
		if progressed.Load() || lost.IsZero() {
			lost, backoff, attempt = now, 50*time.Millisecond, 0
		}
		if down := now.Sub(lost); down > cfg.ReconnectTimeout {
			return fmt.Errorf("postgres: gave up reconnecting after %s (Config.ReconnectTimeout): %w", down.Round(time.Millisecond), err)
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		backoff = min(2*backoff, backoffMax)
		cfg.Logger.Warn("postgres: connection lost, reconnecting", "slot", cfg.Slot, "err", err, "retry_in", wait.Round(time.Millisecond),
			"down_for", now.Sub(lost).Round(time.Millisecond))
		if cfg.OnEvent != nil {
			cfg.OnEvent(Event{Kind: "disconnected"})
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// connectionLost reports whether err is the loss of the server or of the connection to it, which a new
// connection may overcome: a network error, the server shutting down or starting up, a connection exception,
// or the slot still held by the lost connection's walsender.
func connectionLost(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "57P01", "57P02", "57P03", // admin shutdown (also pg_terminate_backend), crash shutdown, cannot connect now
			"55006": // object in use: the slot is active for the walsender of the lost connection
			return true
		}
		return strings.HasPrefix(pgErr.Code, "08") // connection exception
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connErr) || errors.As(err, &netErr) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE) || pgconn.SafeToRetry(err)
}

// runOnce is one connection's Run: progress is called at every event.
func runOnce(ctx context.Context, cat catalog.Catalog, cfg Config, progress func(Event)) error {
	conn, err := pgx.Connect(ctx, cfg.DSN)
	if err != nil {
		return fmt.Errorf("postgres: connecting: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	lk := &catalogLookup{q: conn, cache: map[uint32]pgType{}}
	p := &pipeline{cfg: cfg, cat: cat, conn: conn, slotPos: map[string]uint64{}, byOID: map[uint32]*tableInfo{}, progress: progress,
		mapper: &typeMapper{lookup: lk.lookup, numPrec: int32(cfg.NumericPrecision), numScale: int32(cfg.NumericScale),
			variantJSON: newJSONPolicy(cat, cfg.CreateOptions).variant}}
	if p.tables, err = discover(ctx, conn, p.mapper, cfg.Tables, cfg.Namespace); err != nil {
		return err
	}
	if len(p.tables) == 0 {
		return fmt.Errorf("postgres: no table to copy")
	}
	for _, t := range p.tables {
		p.byOID[t.oid] = t
	}
	if p.deferrable, err = deferrableKeys(ctx, conn, p.tables); err != nil {
		return err
	}
	if err := p.setup(ctx); err != nil {
		return err
	}
	if err := p.openRouter(ctx); err != nil {
		return err
	}
	err = p.run(ctx)
	closeCtx := context.WithoutCancel(ctx)
	if err != nil && (ctx.Err() == nil || !errors.Is(err, ctx.Err())) {
		// The server is gone: what was checkpointed is committed (the next attempt, or Run, replays the rest).
		if !connectionLost(err) || p.router.Close(closeCtx) != nil {
			_ = p.router.Abort(closeCtx)
		}
		return err
	}
	// Done, or stopped by ctx: commit what was checkpointed (a restart replays the rest).
	if cerr := p.router.Close(closeCtx); cerr != nil {
		return cerr
	}
	return err
}

// setup creates the publication when missing and sets REPLICA IDENTITY FULL (see Config.KeepReplicaIdentity).
func (p *pipeline) setup(ctx context.Context) error {
	var exists bool
	if err := p.conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)`,
		p.cfg.Publication).Scan(&exists); err != nil {
		return fmt.Errorf("postgres: publication %s: %w", p.cfg.Publication, err)
	}
	var partitioned *tableInfo
	for _, t := range p.tables {
		if t.partitioned {
			partitioned = t
		}
	}
	if !exists {
		sql := "CREATE PUBLICATION " + pgx.Identifier{p.cfg.Publication}.Sanitize() + " FOR TABLE "
		for i, t := range p.tables {
			if i > 0 {
				sql += ", "
			}
			sql += t.qualified()
		}
		if partitioned != nil {
			// A partition's changes then come as its partitioned table's: one relation, one Iceberg table.
			sql += " WITH (publish_via_partition_root = true)"
		}
		if _, err := p.conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("postgres: creating publication %s: %w", p.cfg.Publication, err)
		}
	} else {
		var viaRoot, allTables bool
		if err := p.conn.QueryRow(ctx, `SELECT pubviaroot, puballtables FROM pg_publication WHERE pubname = $1`,
			p.cfg.Publication).Scan(&viaRoot, &allTables); err != nil {
			return fmt.Errorf("postgres: publication %s: %w", p.cfg.Publication, err)
		}
		if partitioned != nil && !viaRoot {
			return fmt.Errorf("postgres: publication %s does not publish via the partition root, which partitioned table %s needs: ALTER PUBLICATION %s SET (publish_via_partition_root = true)",
				p.cfg.Publication, partitioned, p.cfg.Publication)
		}
		if !allTables {
			if err := p.extendPublication(ctx); err != nil {
				return err
			}
		}
	}
	if p.cfg.KeepReplicaIdentity {
		for _, t := range p.tables {
			if !p.deferrable[t.oid] {
				continue
			}
			full := t.replIdent == 'f'
			for _, l := range t.leaves {
				full = full && l.replIdent == 'f'
			}
			if !full {
				return fmt.Errorf("postgres: table %s has a DEFERRABLE primary key, whose moves inside a transaction (UPDATE ... SET id = id + 1) only whole old rows can resolve: set REPLICA IDENTITY FULL on it (and its partitions), or unset Config.KeepReplicaIdentity",
					t)
			}
		}
		return nil
	}
	for _, t := range p.tables {
		// A partitioned table's old rows are logged by its leaves: each needs FULL.
		for i, l := range t.leaves {
			if l.replIdent == 'f' {
				continue
			}
			if _, err := p.conn.Exec(ctx, "ALTER TABLE "+l.qualified+" REPLICA IDENTITY FULL"); err != nil {
				return fmt.Errorf("postgres: table %s partition %s: setting REPLICA IDENTITY FULL (or set Config.KeepReplicaIdentity): %w",
					t, l.qualified, err)
			}
			t.leaves[i].replIdent = 'f'
		}
		if t.replIdent == 'f' {
			continue
		}
		if _, err := p.conn.Exec(ctx, "ALTER TABLE "+t.qualified()+" REPLICA IDENTITY FULL"); err != nil {
			return fmt.Errorf("postgres: table %s: setting REPLICA IDENTITY FULL (or set Config.KeepReplicaIdentity): %w", t, err)
		}
		t.replIdent = 'f'
	}
	return nil
}

// deferrableKeys returns the tables whose primary key is DEFERRABLE, by OID.
func deferrableKeys(ctx context.Context, conn *pgx.Conn, tables []*tableInfo) (map[uint32]bool, error) {
	oids := make([]uint32, len(tables))
	for i, t := range tables {
		oids[i] = t.oid
	}
	rows, err := conn.Query(ctx, `SELECT conrelid FROM pg_constraint WHERE contype = 'p' AND condeferrable
		AND conrelid = ANY($1::oid[])`, oids)
	if err != nil {
		return nil, fmt.Errorf("postgres: primary keys: %w", err)
	}
	list, err := pgx.CollectRows(rows, pgx.RowTo[uint32])
	if err != nil {
		return nil, fmt.Errorf("postgres: primary keys: %w", err)
	}
	out := map[uint32]bool{}
	for _, oid := range list {
		out[oid] = true
	}
	return out, nil
}

// extendPublication adds the tables the publication lacks (tables added since it was created, by Config.Tables
// or by the default of every table): their changes are streamed from here on, and the snapshot copies them
// from a snapshot taken after this (see pipeline.run).
func (p *pipeline) extendPublication(ctx context.Context) error {
	rows, err := p.conn.Query(ctx, `SELECT r.prrelid FROM pg_publication_rel r JOIN pg_publication b ON b.oid = r.prpubid
		WHERE b.pubname = $1`, p.cfg.Publication)
	if err != nil {
		return fmt.Errorf("postgres: tables of publication %s: %w", p.cfg.Publication, err)
	}
	in, err := pgx.CollectRows(rows, pgx.RowTo[uint32])
	if err != nil {
		return fmt.Errorf("postgres: tables of publication %s: %w", p.cfg.Publication, err)
	}
	var missing []string
	for _, t := range p.tables {
		if !slices.Contains(in, t.oid) {
			missing = append(missing, t.qualified())
		}
	}
	if len(missing) == 0 {
		return nil
	}
	sql := "ALTER PUBLICATION " + pgx.Identifier{p.cfg.Publication}.Sanitize() + " ADD TABLE " + strings.Join(missing, ", ")
	if _, err := p.conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("postgres: adding %s to publication %s: %w", strings.Join(missing, ", "), p.cfg.Publication, err)
	}
	p.cfg.Logger.Info("postgres: tables added to the publication", "publication", p.cfg.Publication, "tables", missing)
	return nil
}

// openRouter makes the router and opens (creating when missing) every table's Iceberg table.
func (p *pipeline) openRouter(ctx context.Context) error {
	keys := map[string][]string{}
	for _, t := range p.tables {
		keys[identString(t.ident)] = t.key
	}
	wopts := append([]iceberg.Option{
		iceberg.WithFlushInterval(p.cfg.FlushInterval),
	}, p.cfg.WriterOptions...)
	wopts = append(wopts, iceberg.WithCheckpoints(), iceberg.WithSchemaEvolution(),
		iceberg.WithChangeColumns(iceberg.ChangeColumns{Op: opColumn, BeforePrefix: beforePrefix}),
		iceberg.WithWriterID("pg2iceberg-"+p.cfg.Slot), iceberg.WithLogger(p.cfg.Logger))
	ropts := append([]iceberg.RouterOption{iceberg.WithWriterOptions(wopts...),
		iceberg.WithTableConfig(func(ctx context.Context, ident table.Identifier, first *arrow.Schema) (iceberg.TableConfig, error) {
			k := keys[identString(ident)]
			if len(k) == 0 { // append-only (ErrNoPrimaryKey)
				return iceberg.TableConfig{Create: slices.Clone(p.cfg.CreateOptions)}, nil
			}
			return iceberg.TableConfig{
				Create:  append(slices.Clone(p.cfg.CreateOptions), iceberg.IdentifierFields(k...)),
				Options: []iceberg.Option{iceberg.WithKeys(k...)},
			}, nil
		})}, p.cfg.RouterOptions...)
	r, err := iceberg.NewRouter(p.cat, ropts...)
	if err != nil {
		return err
	}
	p.router = r
	for _, t := range p.tables {
		if exists, err := p.cat.CheckTableExists(ctx, t.ident); err != nil {
			return fmt.Errorf("postgres: looking up the Iceberg table of %s: %w", t, err)
		} else if exists {
			// Columns added while Run was down, with a default on the rows that existed: added with it first.
			if err := r.Open(ctx, t.ident); err != nil {
				return fmt.Errorf("postgres: opening the Iceberg table of %s: %w", t, err)
			}
			if err := addColumns(ctx, p.conn, t, p.writer(t), t.cols); err != nil {
				return err
			}
		}
		b := newRowBuilder(t.String(), t.cols, t.key, t.arrow)
		rec := b.record()
		err := r.Write(ctx, t.ident, rec)
		rec.Release()
		b.release()
		if err != nil {
			return fmt.Errorf("postgres: opening the Iceberg table of %s: %w", t, err)
		}
	}
	return nil
}

func identString(id table.Identifier) string {
	s := ""
	for i, p := range id {
		if i > 0 {
			s += "\x00"
		}
		s += p
	}
	return s
}

// writer returns the table's writer.
func (p *pipeline) writer(t *tableInfo) *iceberg.Writer {
	w, _ := p.router.Writer(t.ident)
	return w
}

func (p *pipeline) event(e Event) {
	if p.progress != nil {
		p.progress(e)
	}
	if p.cfg.OnEvent != nil {
		p.cfg.OnEvent(e)
	}
}

// run runs the snapshot (what is left of it), then the live phase.
func (p *pipeline) run(ctx context.Context) error {
	repl, err := connectReplication(ctx, p.cfg.DSN)
	if err != nil {
		return err
	}
	defer repl.Close(context.WithoutCancel(ctx))
	var confirmed uint64
	var exists bool
	var confirmedStr *string
	if err := p.conn.QueryRow(ctx, `SELECT true, confirmed_flush_lsn::text FROM pg_replication_slots
		WHERE slot_name = $1 AND database = current_database()`, p.cfg.Slot).Scan(&exists, &confirmedStr); err != nil &&
		!errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("postgres: slot %s: %w", p.cfg.Slot, err)
	}
	positions := map[*tableInfo]map[string]string{}
	for _, t := range p.tables {
		pos, err := p.writer(t).Positions(ctx)
		if err != nil {
			return fmt.Errorf("postgres: positions of %s: %w", t, err)
		}
		positions[t] = pos
		if s, ok := pos[p.slotPartition()]; ok {
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return fmt.Errorf("postgres: table %s: position %q of slot %s: %w", t, s, p.cfg.Slot, err)
			}
			p.slotPos[t.String()] = v
		}
	}
	var snapshot string
	if !exists {
		for _, t := range p.tables {
			if len(positions[t]) > 0 && positions[t][p.planPartition()] != "" {
				return fmt.Errorf("postgres: slot %s is missing but table %v holds rows copied through it: "+
					"drop the Iceberg tables to copy again, or restore the slot", p.cfg.Slot, t.ident)
			}
		}
		res, err := pglogrepl.CreateReplicationSlot(ctx, repl, p.cfg.Slot, "pgoutput",
			pglogrepl.CreateReplicationSlotOptions{Mode: pglogrepl.LogicalReplication, SnapshotAction: "EXPORT_SNAPSHOT"})
		if err != nil {
			return fmt.Errorf("postgres: creating slot %s: %w", p.cfg.Slot, err)
		}
		lsn, err := pglogrepl.ParseLSN(res.ConsistentPoint)
		if err != nil {
			return err
		}
		confirmed, snapshot = uint64(lsn), res.SnapshotName
		p.cfg.Logger.Info("postgres: slot created", "slot", p.cfg.Slot, "consistent_point", res.ConsistentPoint,
			"snapshot", snapshot)
	} else {
		if confirmedStr == nil {
			return fmt.Errorf("postgres: slot %s has no confirmed LSN (is it a physical slot?)", p.cfg.Slot)
		}
		lsn, err := pglogrepl.ParseLSN(*confirmedStr)
		if err != nil {
			return err
		}
		confirmed = uint64(lsn)
	}
	planLSN := confirmed
	if snapshot == "" && p.needsPlan(positions) {
		// A table new to the slot (added since its first run): its copy must end exactly where its stream begins.
		// A temporary slot's exported snapshot gives both: the copy sees the transactions committed before the
		// slot's consistent point, and the table takes from the stream those committed from it on (it is in the
		// publication since setup, before that point).
		tmp, err := connectReplication(ctx, p.cfg.DSN)
		if err != nil {
			return err
		}
		defer tmp.Close(context.WithoutCancel(ctx))
		name := p.cfg.Slot
		if len(name) > 58 {
			name = name[:58]
		}
		res, err := pglogrepl.CreateReplicationSlot(ctx, tmp, name+"_copy", "pgoutput",
			pglogrepl.CreateReplicationSlotOptions{Temporary: true, Mode: pglogrepl.LogicalReplication,
				SnapshotAction: "EXPORT_SNAPSHOT"})
		if err != nil {
			return fmt.Errorf("postgres: temporary slot %s_copy for the snapshot of tables new to slot %s: %w", name, p.cfg.Slot, err)
		}
		lsn, err := pglogrepl.ParseLSN(res.ConsistentPoint)
		if err != nil {
			return err
		}
		snapshot, planLSN = res.SnapshotName, uint64(lsn)
	}
	if err := p.snapshot(ctx, snapshot, planLSN, positions); err != nil {
		return err
	}
	if p.cfg.Mode == ModeSnapshot {
		return nil
	}
	return p.live(ctx, repl, confirmed)
}

// needsPlan reports whether a table has no snapshot plan yet: its copy has not begun.
func (p *pipeline) needsPlan(positions map[*tableInfo]map[string]string) bool {
	for _, t := range p.tables {
		if _, done := p.slotPos[t.String()]; !done && positions[t][p.planPartition()] == "" {
			return true
		}
	}
	return false
}
