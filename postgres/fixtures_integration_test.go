//go:build integration

package postgres_test

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/jackc/pgx/v5"

	"github.com/icewriter/iceberg/catalog"
	"github.com/icewriter/iceberg/postgres"
)

// sourceDB creates a database of its own on the integration suite's Postgres (ICEWRITER_PG_DSN, started by
// scripts/integration.sh with wal_level=logical) and returns its DSN; the database and its replication slots
// are dropped when the test ends. name is the database's name, unique: tests use it as their slot's name too
// (slots are named cluster-wide).
func sourceDB(t *testing.T) (dsn, name string) {
	t.Helper()
	admin := os.Getenv("ICEWRITER_PG_DSN")
	if admin == "" {
		t.Skip("ICEWRITER_PG_DSN not set: run scripts/integration.sh")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	var level string
	if err := conn.QueryRow(ctx, "SHOW wal_level").Scan(&level); err != nil || level != "logical" {
		conn.Close(ctx)
		t.Fatalf("wal_level = %q (%v): the source needs wal_level=logical", level, err)
	}
	b := make([]byte, 4)
	_, _ = crand.Read(b)
	name = "pg17_" + hex.EncodeToString(b)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	t.Cleanup(func() {
		// A connection of its own: a test may have restarted the server since.
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Errorf("dropping database %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		_, _ = conn.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1", name)
		_, _ = conn.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)")
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String(), name
}

// execSQL runs statements on dsn.
func execSQL(t *testing.T, dsn string, sqls ...string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, s := range sqls {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%.200s: %v", s, err)
		}
	}
}

// mustConn connects to dsn for the test's duration.
func mustConn(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// catalogURI is a fresh embedded catalog's URI in a temporary folder.
func catalogURI(t *testing.T) string {
	dir := t.TempDir()
	return "sqlite://" + filepath.Join(dir, "catalog.db") + "?warehouse=file://" + filepath.Join(dir, "warehouse")
}

func openCatalog(t *testing.T, uri string) icecatalog.Catalog {
	t.Helper()
	cat, err := catalog.Open(context.Background(), uri)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c, ok := cat.(icecatalog.Closer); ok {
			_ = c.Close()
		}
	})
	return cat
}

// The test table covers every mapped type; big is a TOASTed value on every tenth row.
const itemsDDL = `CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE TABLE items (id bigint PRIMARY KEY, small smallint NOT NULL, n int, price numeric(12,2), amount numeric,
  f8 double precision, ok boolean, name varchar(40), doc jsonb, raw json, data bytea, u uuid, d date, t time,
  ts timestamp, tstz timestamptz, tags text[], nums int[], m mood, big text);
CREATE TABLE orders (a int, b text, qty int NOT NULL, PRIMARY KEY (a, b));`

var itemsCols = []string{"id", "small", "n", "price", "amount", "f8", "ok", "name", "doc", "raw", "data", "u", "d",
	"t", "ts", "tstz", "tags", "nums", "m", "big"}

// cellv is one value: its SQL literal and what the Iceberg table must show for it (see cell).
type cellv struct{ sql, want string }

func lit(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

var base = time.Date(2024, 2, 29, 23, 59, 58, 0, time.UTC)

// itemRow is row id at version ver (a deterministic function of both).
func itemRow(id int64, ver int) map[string]cellv {
	r := rand.New(rand.NewPCG(uint64(id), uint64(ver)))
	ts := base.Add(time.Duration(id)*time.Second + time.Duration(ver)*time.Microsecond)
	price := fmt.Sprintf("%d.%02d", r.IntN(1_000_000), r.IntN(100))
	if id%7 == 0 {
		price = "-" + price
	}
	amt := fmt.Sprintf("%d.%06d", r.IntN(1<<30), r.IntN(1_000_000))
	row := map[string]cellv{
		"id":     {strconv.FormatInt(id, 10), strconv.FormatInt(id, 10)},
		"small":  {strconv.Itoa(int(id%30000) - 15000), strconv.Itoa(int(id%30000) - 15000)},
		"n":      {strconv.Itoa(ver), strconv.Itoa(ver)},
		"price":  {lit(price), price},
		"amount": {lit(amt), amt + "000000000000"},
		"f8":     {strconv.FormatFloat(float64(id)*1.5+float64(ver), 'g', -1, 64), strconv.FormatFloat(float64(id)*1.5+float64(ver), 'g', -1, 64)},
		"ok":     {strconv.FormatBool(id%2 == 0), strconv.FormatBool(id%2 == 0)},
		"name":   {lit(fmt.Sprintf("náme-%d-%d", id, ver)), fmt.Sprintf("náme-%d-%d", id, ver)},
		"doc":    {lit(fmt.Sprintf(`{"k":%d,"v":[%d]}`, id, ver)), fmt.Sprintf(`{"k": %d, "v": [%d]}`, id, ver)},
		"raw":    {lit(fmt.Sprintf(`{"k" :%d}`, id)), fmt.Sprintf(`{"k" :%d}`, id)},
		"data":   {fmt.Sprintf(`'\x%02x%02x00'::bytea`, id%256, ver%256), fmt.Sprintf("%02x%02x00", id%256, ver%256)},
		"u":      {lit(fmt.Sprintf("00000000-0000-4000-8000-%012d", id)), fmt.Sprintf("00000000-0000-4000-8000-%012d", id)},
		"d":      {lit(ts.Format("2006-01-02")), ts.Format("2006-01-02")},
		"t":      {lit(ts.Format("15:04:05.000000")), ts.Format("15:04:05.000000")},
		"ts":     {lit(ts.Format("2006-01-02 15:04:05.000000")), ts.Format("2006-01-02T15:04:05.000000")},
		"tstz":   {lit(ts.In(time.FixedZone("x", 5*3600)).Format("2006-01-02 15:04:05.000000-07")), ts.Format("2006-01-02T15:04:05.000000")},
		"tags":   {fmt.Sprintf("ARRAY['a%d', NULL, 'b']", id), fmt.Sprintf("[a%d NULL b]", id)},
		"nums":   {"'{}'::int[]", "[]"},
		"m":      {lit([]string{"sad", "ok", "happy"}[id%3]) + "::mood", []string{"sad", "ok", "happy"}[id%3]},
		"big":    {"NULL", "NULL"},
	}
	if ver%3 == 1 {
		row["n"], row["ok"], row["tags"] = cellv{"NULL", "NULL"}, cellv{"NULL", "NULL"}, cellv{"NULL", "NULL"}
		row["nums"] = cellv{fmt.Sprintf("ARRAY[%d, %d]", id, -ver), fmt.Sprintf("[%d %d]", id, -ver)}
	}
	if id%10 == 0 { // out of line: 6,000 random hex characters do not compress under TOAST's 2 KiB threshold
		b := make([]byte, 3000)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		s := hex.EncodeToString(b)
		row["big"] = cellv{lit(s), s}
	}
	return row
}

// model is what a table must hold: rows by key, each column's expected text.
type model map[string]map[string]string

// insertItems inserts rows lo..hi-1 at version ver into items, in one statement, and records them in m.
func insertItems(t *testing.T, dsn string, m model, lo, hi int64, ver int) {
	t.Helper()
	var sb strings.Builder
	sb.WriteString("INSERT INTO items (" + strings.Join(itemsCols, ", ") + ") VALUES ")
	for id := lo; id < hi; id++ {
		row := itemRow(id, ver)
		if id > lo {
			sb.WriteString(", ")
		}
		sb.WriteString("(")
		want := map[string]string{}
		for i, c := range itemsCols {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString(row[c].sql)
			want[c] = row[c].want
		}
		sb.WriteString(")")
		if m != nil {
			m[strconv.FormatInt(id, 10)] = want
		}
	}
	execSQL(t, dsn, sb.String())
}

// updateItem sets every column of row id but big (left unchanged: TOAST) to version ver.
func updateItem(t *testing.T, dsn string, m model, id int64, ver int) {
	t.Helper()
	row := itemRow(id, ver)
	var sets []string
	key := strconv.FormatInt(id, 10)
	for _, c := range itemsCols {
		if c == "id" || c == "big" {
			continue
		}
		sets = append(sets, c+" = "+row[c].sql)
		m[key][c] = row[c].want
	}
	execSQL(t, dsn, "UPDATE items SET "+strings.Join(sets, ", ")+" WHERE id = "+key)
}

// readTable reads the Iceberg table back with iceberg-go's scanner: rows by key (the key columns' texts joined
// with "|"), each column's text (see cell).
func readTable(ctx context.Context, cat icecatalog.Catalog, ident table.Identifier, key ...string) (model, error) {
	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		return nil, err
	}
	_, it, err := tbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		return nil, err
	}
	out := model{}
	for rec, err := range it {
		if err != nil {
			return nil, err
		}
		sc := rec.Schema()
		for i := range int(rec.NumRows()) {
			row := map[string]string{}
			for j, f := range sc.Fields() {
				row[f.Name] = cell(rec.Column(j), i)
			}
			var k []string
			for _, c := range key {
				k = append(k, row[c])
			}
			ks := strings.Join(k, "|")
			if _, dup := out[ks]; dup {
				rec.Release()
				return nil, fmt.Errorf("key %s twice in the table", ks)
			}
			out[ks] = row
		}
		rec.Release()
	}
	return out, nil
}

// cell formats one value as the models write it.
func cell(a arrow.Array, i int) string {
	if _, ok := a.(*extensions.VariantArray); ok { // before IsNull: it is true for the variant null too
		return variantCell(a, i)
	}
	if a.IsNull(i) {
		return "NULL"
	}
	switch a := a.(type) {
	case *array.Decimal128:
		return a.Value(i).ToString(a.DataType().(*arrow.Decimal128Type).Scale)
	case *array.Float64:
		return strconv.FormatFloat(a.Value(i), 'g', -1, 64)
	case *array.Binary:
		return hex.EncodeToString(a.Value(i))
	case *array.LargeBinary:
		return hex.EncodeToString(a.Value(i))
	case *array.Date32:
		return a.Value(i).ToTime().Format("2006-01-02")
	case *array.Time64:
		return a.Value(i).ToTime(arrow.Microsecond).Format("15:04:05.000000")
	case *array.Timestamp:
		return a.Value(i).ToTime(arrow.Microsecond).UTC().Format("2006-01-02T15:04:05.000000")
	case array.ListLike:
		lo, hi := a.ValueOffsets(i)
		var parts []string
		for j := lo; j < hi; j++ {
			parts = append(parts, cell(a.ListValues(), int(j)))
		}
		return "[" + strings.Join(parts, " ") + "]"
	}
	return a.ValueStr(i)
}

// diff describes how got differs from want (columns want has), "" when it does not.
func diff(want, got model) string {
	var out []string
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			out = append(out, "missing "+k)
			continue
		}
		cols := make([]string, 0, len(w))
		for c := range w {
			cols = append(cols, c)
		}
		sort.Strings(cols)
		for _, c := range cols {
			if g[c] != w[c] {
				out = append(out, fmt.Sprintf("%s.%s = %.80q, want %.80q", k, c, g[c], w[c]))
			}
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			out = append(out, "unexpected "+k)
		}
	}
	slices.Sort(out)
	if len(out) > 10 {
		out = append(out[:10], fmt.Sprintf("... %d differences", len(out)))
	}
	return strings.Join(out, "; ")
}

// events funnels a pipeline's events to a test: kick is signalled on every event (a test re-checks its
// condition then), all queues them for waitKind.
type events struct {
	kick chan struct{}
	all  chan postgres.Event
}

func newEvents() *events {
	return &events{kick: make(chan struct{}, 1), all: make(chan postgres.Event, 1<<16)}
}

func (e *events) on(ev postgres.Event) {
	select {
	case e.all <- ev:
	default:
	}
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// waitKind waits for an event of kind.
func (e *events) waitKind(t *testing.T, kind string, errc <-chan error) postgres.Event {
	t.Helper()
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case ev := <-e.all:
			if ev.Kind == kind {
				return ev
			}
		case err := <-errc:
			t.Fatalf("pipeline stopped waiting for %s: %v", kind, err)
		case <-timeout:
			t.Fatalf("no %s event", kind)
		}
	}
}

// converge waits until the Iceberg table equals want, re-reading it at every pipeline event.
func converge(t *testing.T, read func() (model, error), want model, kick <-chan struct{}, errc <-chan error) {
	t.Helper()
	timeout := time.After(2 * time.Minute)
	last := ""
	for {
		got, err := read()
		if err == nil {
			if last = diff(want, got); last == "" {
				return
			}
		} else {
			last = err.Error()
		}
		select {
		case <-kick:
		case err := <-errc:
			t.Fatalf("pipeline stopped: %v (table: %s)", err, last)
		case <-timeout:
			t.Fatalf("table never matched the model: %s", last)
		}
	}
}

// runningPipeline is a pipeline startPipeline runs on a goroutine: its events, and Run's error once it ends.
type runningPipeline struct {
	*events
	errc chan error // Run's result, sent once
	stop context.CancelFunc
}

// startPipeline runs postgres.Run(cat, cfg) on a goroutine, with cfg.OnEvent set to record the events, until
// stop is called or the test ends (its cleanup stops it and waits for Run to return).
func startPipeline(t *testing.T, cat icecatalog.Catalog, cfg postgres.Config) *runningPipeline {
	t.Helper()
	p := &runningPipeline{events: newEvents(), errc: make(chan error, 1)}
	cfg.OnEvent = p.on
	ctx, stop := context.WithCancel(context.Background())
	p.stop = stop
	finished := make(chan struct{})
	t.Cleanup(func() { stop(); <-finished })
	go func() {
		defer close(finished)
		p.errc <- postgres.Run(ctx, cat, cfg)
	}()
	return p
}

// wait waits for an event of kind; the test fails if the pipeline stops first.
func (p *runningPipeline) wait(t *testing.T, kind string) postgres.Event {
	t.Helper()
	return p.waitKind(t, kind, p.errc)
}

// converge waits until read returns want, re-reading at every event; the test fails if the pipeline stops.
func (p *runningPipeline) converge(t *testing.T, read func() (model, error), want model) {
	t.Helper()
	converge(t, read, want, p.kick, p.errc)
}

// stopCleanly stops the pipeline and requires Run to end with context.Canceled (what it returns once it has
// committed what it read).
func (p *runningPipeline) stopCleanly(t *testing.T) {
	t.Helper()
	p.stop()
	if err := <-p.errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run after cancel: %v", err)
	}
}
