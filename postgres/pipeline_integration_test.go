//go:build integration

package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/jackc/pglogrepl"

	"github.com/icewriter/iceberg/postgres"
)

func TestSnapshotThenLiveChangesMatchModel(t *testing.T) {
	ctx := context.Background()
	dsn, slot := sourceDB(t)
	execSQL(t, dsn, itemsDDL)
	items := model{}
	insertItems(t, dsn, items, 1, 1501, 0)
	// The big values are stored out of line: the updates below that leave them unchanged send them as
	// "unchanged TOAST" in pgoutput.
	var toast, toasted int64
	conn := mustConn(t, dsn)
	var toastRel string
	if err := conn.QueryRow(ctx, "SELECT reltoastrelid::regclass::text FROM pg_class WHERE oid = 'items'::regclass").
		Scan(&toastRel); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, "SELECT count(DISTINCT chunk_id), (SELECT count(*) FROM items WHERE big IS NOT NULL) FROM "+toastRel).
		Scan(&toast, &toasted); err != nil || toast == 0 || toast != toasted {
		t.Fatalf("%d values in %s for %d big values (%v): want every big value out of line", toast, toastRel, toasted, err)
	}
	orders := model{}
	execSQL(t, dsn, "INSERT INTO orders SELECT i, 'b' || i, i * 2 FROM generate_series(1, 200) i")
	for i := 1; i <= 200; i++ {
		orders[strconv.Itoa(i)+"|b"+strconv.Itoa(i)] = map[string]string{"qty": strconv.Itoa(i * 2)}
	}

	uri := catalogURI(t)
	cat := openCatalog(t, uri)
	p := startPipeline(t, cat, postgres.Config{DSN: dsn, Slot: slot, ChunkPages: 16, Workers: 2,
		BatchRows: 500, FlushInterval: 100 * time.Millisecond})
	p.wait(t, "snapshot-done")
	start := p.wait(t, "live-start")
	itemsID := table.Identifier{"public", "items"}
	ordersID := table.Identifier{"public", "orders"}
	readItems := func() (model, error) { return readTable(ctx, cat, itemsID, "id") }
	readOrders := func() (model, error) { return readTable(ctx, cat, ordersID, "a", "b") }
	p.converge(t, readItems, items)
	p.converge(t, readOrders, orders)

	// Live: inserts, updates that leave the TOASTed column unchanged, a key-changing update, deletes, a new
	// column, a truncate and rows after it.
	insertItems(t, dsn, items, 2001, 2101, 1)
	for id := int64(10); id <= 300; id += 10 { // every tenth row has a TOAST value
		updateItem(t, dsn, items, id, 2)
	}
	execSQL(t, dsn, "UPDATE items SET id = 100000 + id WHERE id IN (20, 21)")
	for _, id := range []int{20, 21} {
		k, nk := strconv.Itoa(id), strconv.Itoa(100000+id)
		items[nk] = items[k]
		items[nk]["id"] = nk
		delete(items, k)
	}
	execSQL(t, dsn, "DELETE FROM items WHERE id BETWEEN 400 AND 449")
	for id := 400; id <= 449; id++ {
		delete(items, strconv.Itoa(id))
	}
	execSQL(t, dsn, "ALTER TABLE items ADD COLUMN extra bigint", "UPDATE items SET extra = id * 3 WHERE id <= 5")
	for k, row := range items {
		row["extra"] = "NULL"
		if id, _ := strconv.Atoi(k); id <= 5 {
			row["extra"] = strconv.Itoa(id * 3)
		}
	}
	execSQL(t, dsn, "BEGIN; INSERT INTO orders VALUES (9999, 'x', 1); TRUNCATE orders; "+
		"INSERT INTO orders VALUES (1, 'after', 7); COMMIT")
	orders = model{"1|after": {"qty": "7"}}

	p.converge(t, readItems, items)
	p.converge(t, readOrders, orders)

	p.stopCleanly(t)
	// The slot confirmed past its consistent point: only after the commits that hold the changes.
	var advanced bool
	if err := conn.QueryRow(ctx, "SELECT confirmed_flush_lsn > $2::pg_lsn FROM pg_replication_slots WHERE slot_name = $1",
		slot, pglogrepl.LSN(start.LSN).String()).Scan(&advanced); err != nil {
		t.Fatal(err)
	}
	if !advanced {
		t.Fatal("the slot's confirmed_flush_lsn did not advance past its consistent point")
	}
}

func TestUnmappedTypeFailsBeforeTheSnapshot(t *testing.T) {
	ctx := context.Background()
	dsn, slot := sourceDB(t)
	execSQL(t, dsn, "CREATE TABLE spans (id int PRIMARY KEY, took interval)")
	cat := openCatalog(t, catalogURI(t))
	err := postgres.Run(ctx, cat, postgres.Config{DSN: dsn, Slot: slot, Tables: []string{"spans"}})
	if !errors.Is(err, postgres.ErrUnsupportedType) || !strings.Contains(err.Error(), "public.spans") ||
		!strings.Contains(err.Error(), `"took"`) {
		t.Fatalf("err = %v, want ErrUnsupportedType naming public.spans and took", err)
	}
	var slots int
	if err := mustConn(t, dsn).QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", slot).
		Scan(&slots); err != nil || slots != 0 {
		t.Fatalf("%d slots (%v): nothing may be created before the checks pass", slots, err)
	}
}

// TestTableWithoutKeyIsAppendOnly: a table without a primary key is copied and its inserts appended (the table
// equals the model); a delete of it in the stream stops the pipeline with ErrNoPrimaryKey naming the table.
func TestTableWithoutKeyIsAppendOnly(t *testing.T) {
	ctx := context.Background()
	dsn, slot := sourceDB(t)
	execSQL(t, dsn, "CREATE TABLE logs (line text, n int)",
		"INSERT INTO logs SELECT 'line ' || i, i FROM generate_series(1, 300) i")
	want := model{}
	for i := 1; i <= 300; i++ {
		want["line "+strconv.Itoa(i)] = map[string]string{"n": strconv.Itoa(i)}
	}
	cat := openCatalog(t, catalogURI(t))
	p := startPipeline(t, cat, postgres.Config{DSN: dsn, Slot: slot, Tables: []string{"logs"},
		FlushInterval: 100 * time.Millisecond})
	p.wait(t, "live-start")
	read := func() (model, error) { return readTable(ctx, cat, table.Identifier{"public", "logs"}, "line") }
	p.converge(t, read, want)
	execSQL(t, dsn, "INSERT INTO logs SELECT 'line ' || i, i FROM generate_series(301, 350) i")
	for i := 301; i <= 350; i++ {
		want["line "+strconv.Itoa(i)] = map[string]string{"n": strconv.Itoa(i)}
	}
	p.converge(t, read, want)
	execSQL(t, dsn, "DELETE FROM logs WHERE n = 1")
	select {
	case err := <-p.errc:
		if !errors.Is(err, postgres.ErrNoPrimaryKey) || !strings.Contains(err.Error(), "public.logs") {
			t.Fatalf("Run after a delete: %v, want ErrNoPrimaryKey naming public.logs", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the pipeline went on past a delete of a table without a primary key")
	}
}

// inserter inserts rows "line 1", "line 2", ... into a table (line text) of dsn, one transaction each, from a
// goroutine until stop is called, which returns how many it inserted.
func inserter(t *testing.T, dsn, tbl string) (stop func() int) {
	t.Helper()
	conn := mustConn(t, dsn)
	done := make(chan struct{})
	res := make(chan int, 1)
	errc := make(chan error, 1)
	go func() {
		n := 0
		defer func() { res <- n }()
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := conn.Exec(context.Background(), "INSERT INTO "+tbl+" VALUES ($1)", "line "+strconv.Itoa(n+1)); err != nil {
				errc <- err
				return
			}
			n++
		}
	}()
	return func() int {
		close(done)
		n := <-res
		select {
		case err := <-errc:
			t.Fatalf("inserting into %s: %v", tbl, err)
		default:
		}
		return n
	}
}

// TestTableAddedLaterIsStreamed: tables created after the pipeline's first run (one keyed, one append-only)
// are added to the publication on the next run, copied, then streamed: rows inserted while the run starts
// are in the Iceberg table exactly once, and the keyed table's later inserts, updates and deletes arrive.
func TestTableAddedLaterIsStreamed(t *testing.T) {
	ctx := context.Background()
	dsn, slot := sourceDB(t)
	execSQL(t, dsn, "CREATE TABLE a (id int PRIMARY KEY, v text)", "INSERT INTO a SELECT i, 'a' || i FROM generate_series(1, 50) i")
	want := func(lo, hi int, prefix string) model {
		m := model{}
		for i := lo; i <= hi; i++ {
			m[strconv.Itoa(i)] = map[string]string{"v": prefix + strconv.Itoa(i)}
		}
		return m
	}
	as := want(1, 50, "a")
	cat := openCatalog(t, catalogURI(t))
	cfg := postgres.Config{DSN: dsn, Slot: slot, FlushInterval: 100 * time.Millisecond, ChunkPages: 1, Workers: 2}
	read := func(name string, key ...string) func() (model, error) {
		return func() (model, error) { return readTable(ctx, cat, table.Identifier{"public", name}, key...) }
	}
	p := startPipeline(t, cat, cfg)
	p.wait(t, "live-start")
	p.converge(t, read("a", "id"), as)
	p.stopCleanly(t)

	execSQL(t, dsn, "CREATE TABLE b (id int PRIMARY KEY, v text)", "INSERT INTO b SELECT i, 'b' || i FROM generate_series(1, 2000) i",
		"CREATE TABLE c (line text)")
	stop := inserter(t, dsn, "c")
	p = startPipeline(t, cat, cfg)
	p.wait(t, "live-start")
	n := stop()
	cs := model{}
	for i := 1; i <= n; i++ {
		cs["line "+strconv.Itoa(i)] = map[string]string{}
	}
	bs := want(1, 2000, "b")
	p.converge(t, read("c", "line"), cs)
	p.converge(t, read("b", "id"), bs)

	execSQL(t, dsn, "INSERT INTO b VALUES (5000, 'new')", "UPDATE b SET v = 'changed' WHERE id <= 10",
		"DELETE FROM b WHERE id BETWEEN 1991 AND 2000", "INSERT INTO c VALUES ('after')", "UPDATE a SET v = 'x' WHERE id = 1")
	bs["5000"] = map[string]string{"v": "new"}
	for i := 1; i <= 10; i++ {
		bs[strconv.Itoa(i)]["v"] = "changed"
	}
	for i := 1991; i <= 2000; i++ {
		delete(bs, strconv.Itoa(i))
	}
	cs["after"] = map[string]string{}
	as["1"]["v"] = "x"
	p.converge(t, read("b", "id"), bs)
	p.converge(t, read("c", "line"), cs)
	p.converge(t, read("a", "id"), as)
	t.Logf("%d rows inserted into c while the run started", n)
}

// TestSnapshotReportsRowsAndRate: the snapshot logs each table's rows, time and rate, and the totals, and
// reports the rows in its table-copied and snapshot-done events.
func TestSnapshotReportsRowsAndRate(t *testing.T) {
	dsn, slot := sourceDB(t)
	execSQL(t, dsn, "CREATE TABLE s1 (id int PRIMARY KEY)", "INSERT INTO s1 SELECT generate_series(1, 300)",
		"CREATE TABLE s2 (id int PRIMARY KEY)", "INSERT INTO s2 SELECT generate_series(1, 20)")
	var logs syncBuffer
	var mu sync.Mutex // events come from the copy workers too
	var evs []postgres.Event
	err := postgres.Run(context.Background(), openCatalog(t, catalogURI(t)), postgres.Config{DSN: dsn, Slot: slot,
		Mode: postgres.ModeSnapshot, Workers: 1, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		OnEvent: func(e postgres.Event) { mu.Lock(); evs = append(evs, e); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	copied := map[string]int64{}
	var total int64 = -1
	mu.Lock()
	defer mu.Unlock()
	for _, e := range evs {
		switch e.Kind {
		case "table-copied":
			copied[e.Table] = e.Rows
		case "snapshot-done":
			total = e.Rows
		}
	}
	if copied["public.s1"] != 300 || copied["public.s2"] != 20 || total != 320 {
		t.Errorf("table-copied rows %v, snapshot-done rows %d: want s1 300, s2 20, 320", copied, total)
	}
	out := logs.String()
	for _, want := range []string{`msg="postgres: table copied" table=public.s1 rows=300 took=`,
		`msg="postgres: table copied" table=public.s2 rows=20 took=`, `msg="postgres: snapshot done" tables=2 rows=320 took=`} {
		if !strings.Contains(out, want) {
			t.Errorf("no log line with %q in:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "rows_per_s=") {
		t.Errorf("no rate logged:\n%s", out)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
