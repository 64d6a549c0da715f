//go:build integration

package postgres_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/postgres"
)

// TestColumnAddedWithDefaultStopsThenRecopies: on format v2 Iceberg tables (no initial-default), a column
// added with a default while streaming (Postgres shows the default on the rows that existed, which no change
// carries) stops Run with ErrAddedColumnDefault naming the table and column, before any NULL for it reaches the
// Iceberg table; so does a run started after such a change. Dropping the Iceberg table, as the error says, copies the table anew: every row then reads the default.
func TestColumnAddedWithDefaultStopsThenRecopies(t *testing.T) {
	ctx := context.Background()
	dsn, slot := sourceDB(t)
	execSQL(t, dsn, "CREATE TABLE t (id int PRIMARY KEY, v text)",
		"INSERT INTO t SELECT i, 'v' || i FROM generate_series(1, 20) i", "CREATE TABLE u (id int PRIMARY KEY)")
	want := model{}
	for i := 1; i <= 20; i++ {
		want[strconv.Itoa(i)] = map[string]string{"v": "v" + strconv.Itoa(i)}
	}
	cat := openCatalog(t, catalogURI(t))
	ident := table.Identifier{"public", "t"}
	read := func() (model, error) { return readTable(ctx, cat, ident, "id") }
	cfg := postgres.Config{DSN: dsn, Slot: slot, Tables: []string{"t"}, FlushInterval: 50 * time.Millisecond}
	p := startPipeline(t, cat, cfg)
	p.wait(t, "live-start")
	p.converge(t, read, want)

	wantErr := func(err error) {
		t.Helper()
		if !errors.Is(err, postgres.ErrAddedColumnDefault) || !strings.Contains(err.Error(), "public.t") ||
			!strings.Contains(err.Error(), `"c"`) {
			t.Fatalf("Run = %v, want ErrAddedColumnDefault naming public.t and c", err)
		}
	}
	execSQL(t, dsn, "ALTER TABLE t ADD COLUMN c int NOT NULL DEFAULT 7", "INSERT INTO t VALUES (21, 'v21', 8)")
	timeout := time.After(2 * time.Minute)
wait:
	for {
		select {
		case err := <-p.errc:
			wantErr(err)
			break wait
		case <-p.kick:
			if got, err := read(); err == nil && got["21"] != nil {
				t.Fatalf("the pipeline went on past the added column: row 1 reads c = %s", got["1"]["c"])
			}
		case <-timeout:
			t.Fatal("the pipeline neither stopped nor went on")
		}
	}
	// A new run meets the column before the stream: the same error.
	wantErr(postgres.Run(ctx, cat, cfg))
	// A volatile default fills the rows by a rewrite the stream does not carry: refused too.
	execSQL(t, dsn, "CREATE TABLE w (id int PRIMARY KEY)", "INSERT INTO w VALUES (1)")
	wcfg := postgres.Config{DSN: dsn, Slot: slot + "_w", Tables: []string{"w"}, Mode: postgres.ModeSnapshot}
	if err := postgres.Run(ctx, cat, wcfg); err != nil {
		t.Fatal(err)
	}
	execSQL(t, dsn, "ALTER TABLE w ADD COLUMN c int NOT NULL DEFAULT (random() * 0 + 7)::int")
	if err := postgres.Run(ctx, cat, wcfg); !errors.Is(err, postgres.ErrAddedColumnDefault) ||
		!strings.Contains(err.Error(), "public.w") {
		t.Fatalf("Run after a volatile default = %v, want ErrAddedColumnDefault naming public.w", err)
	}

	// Copied anew, every row reads the default.
	if err := cat.DropTable(ctx, ident); err != nil {
		t.Fatal(err)
	}
	for _, row := range want {
		row["c"] = "7"
	}
	want["21"] = map[string]string{"v": "v21", "c": "8"}
	p = startPipeline(t, cat, cfg)
	p.wait(t, "live-start")
	p.converge(t, read, want)
	execSQL(t, dsn, "UPDATE t SET c = 9 WHERE id = 1")
	want["1"]["c"] = "9"
	p.converge(t, read, want)
	p.stopCleanly(t)
}

// TestKeyTypePromotionStreamsOn: ALTER COLUMN ... TYPE bigint on a primary key (single and composite) and
// real to double precision on a key promote the Iceberg table's key columns, and the changes after it (updates
// and deletes of rows copied before it, new keys past int's range, a key move) apply exactly, before and after a
// restart.
func TestKeyTypePromotionStreamsOn(t *testing.T) {
	ctx := context.Background()
	dsn, slot := sourceDB(t)
	execSQL(t, dsn, "CREATE TABLE k (id int PRIMARY KEY, v text)", "CREATE TABLE kc (a int, b text, v text, PRIMARY KEY (a, b))",
		"CREATE TABLE kf (f real PRIMARY KEY, v text)",
		"INSERT INTO k SELECT i, 'a' FROM generate_series(1, 10) i",
		"INSERT INTO kc SELECT i, b, 'a' FROM generate_series(1, 5) i, unnest(ARRAY['x', 'y']) b",
		"INSERT INTO kf VALUES (0.5, 'a'), (1.25, 'a'), (-2.75, 'a')")
	wk, wkc, wkf := model{}, model{}, model{}
	for i := 1; i <= 10; i++ {
		wk[strconv.Itoa(i)] = map[string]string{"v": "a"}
	}
	for i := 1; i <= 5; i++ {
		for _, b := range []string{"x", "y"} {
			wkc[strconv.Itoa(i)+"|"+b] = map[string]string{"v": "a"}
		}
	}
	for _, f := range []string{"0.5", "1.25", "-2.75"} {
		wkf[f] = map[string]string{"v": "a"}
	}
	cat := openCatalog(t, catalogURI(t))
	reader := func(name string, key ...string) func() (model, error) {
		return func() (model, error) { return readTable(ctx, cat, table.Identifier{"public", name}, key...) }
	}
	check := func(p *runningPipeline) {
		t.Helper()
		p.converge(t, reader("k", "id"), wk)
		p.converge(t, reader("kc", "a", "b"), wkc)
		p.converge(t, reader("kf", "f"), wkf)
	}
	cfg := postgres.Config{DSN: dsn, Slot: slot, FlushInterval: 50 * time.Millisecond}
	p := startPipeline(t, cat, cfg)
	p.wait(t, "live-start")
	check(p)

	execSQL(t, dsn, "ALTER TABLE k ALTER COLUMN id TYPE bigint", "UPDATE k SET v = 'u' WHERE id = 1",
		"INSERT INTO k VALUES (5000000000, 'big')", "DELETE FROM k WHERE id = 2", "UPDATE k SET id = 3000000000 WHERE id = 3",
		"ALTER TABLE kc ALTER COLUMN a TYPE bigint", "UPDATE kc SET v = 'u' WHERE a = 1", "DELETE FROM kc WHERE a = 2 AND b = 'y'",
		"INSERT INTO kc VALUES (6000000000, 'x', 'big')",
		"ALTER TABLE kf ALTER COLUMN f TYPE double precision", "UPDATE kf SET v = 'u' WHERE f = 0.5",
		"DELETE FROM kf WHERE f = 1.25", "INSERT INTO kf VALUES (0.1, 'new')")
	wk["1"]["v"] = "u"
	wk["5000000000"] = map[string]string{"v": "big"}
	delete(wk, "2")
	wk["3000000000"] = wk["3"]
	delete(wk, "3")
	for _, b := range []string{"x", "y"} {
		wkc["1|"+b]["v"] = "u"
	}
	delete(wkc, "2|y")
	wkc["6000000000|x"] = map[string]string{"v": "big"}
	wkf["0.5"]["v"] = "u"
	delete(wkf, "1.25")
	wkf["0.1"] = map[string]string{"v": "new"}
	check(p)
	p.stopCleanly(t)

	// After a restart (the key index loaded from files of both types).
	p = startPipeline(t, cat, cfg)
	p.wait(t, "live-start")
	execSQL(t, dsn, "UPDATE k SET v = 'r' WHERE id IN (4, 5000000000)", "DELETE FROM k WHERE id = 5",
		"UPDATE kc SET v = 'r' WHERE a = 3", "UPDATE kf SET v = 'r' WHERE f = -2.75")
	wk["4"]["v"], wk["5000000000"]["v"] = "r", "r"
	delete(wk, "5")
	wkc["3|x"]["v"], wkc["3|y"]["v"] = "r", "r"
	wkf["-2.75"]["v"] = "r"
	check(p)
	p.stopCleanly(t)
}

// TestColumnAddedWithDefaultOnV3ReadsIt: on format v3 Iceberg tables, a column added with a constant default
// (int NOT NULL DEFAULT 7, a text and a timestamp default) while streaming is added with that default as its
// initial-default before any row carrying it: the rows copied before read the default, as Postgres shows them,
// and inserts and updates after read their own values. A column added while Run is down, with changes of the
// old shape before it still to replay, reads its default too (the replayed changes take its write-default).
// A volatile default still stops Run with ErrAddedColumnDefault.
func TestColumnAddedWithDefaultOnV3ReadsIt(t *testing.T) {
	ctx := context.Background()
	dsn, slot := sourceDB(t)
	execSQL(t, dsn, "CREATE TABLE t (id int PRIMARY KEY, v text)",
		"INSERT INTO t SELECT i, 'v' || i FROM generate_series(1, 20) i")
	cat := openCatalog(t, catalogURI(t))
	ident := table.Identifier{"public", "t"}
	read := func() (model, error) { return readTable(ctx, cat, ident, "id") }
	cfg := postgres.Config{DSN: dsn, Slot: slot, Tables: []string{"t"}, FlushInterval: 50 * time.Millisecond,
		CreateOptions: []iceberg.CreateOption{iceberg.FormatVersion(3)}}
	const query = `SELECT id, COALESCE(v, 'NULL') AS v, COALESCE(c::text, 'NULL') AS c, COALESCE(s, 'NULL') AS s,
		COALESCE(to_char(ts, 'YYYY-MM-DD"T"HH24:MI:SS.US'), 'NULL') AS ts FROM t`
	const queryD = `SELECT id, COALESCE(v, 'NULL') AS v, COALESCE(c::text, 'NULL') AS c, COALESCE(d::text, 'NULL') AS d FROM t`
	p := startPipeline(t, cat, cfg)
	p.wait(t, "live-start")
	p.converge(t, read, readPG(t, dsn, "SELECT id, v FROM t"))

	execSQL(t, dsn, "ALTER TABLE t ADD COLUMN c int NOT NULL DEFAULT 7",
		"ALTER TABLE t ADD COLUMN s text DEFAULT 'it''s {a,b}', ADD COLUMN ts timestamp DEFAULT '2024-05-06 07:08:09.123456'",
		"INSERT INTO t VALUES (21, 'v21', 8, 'x', '2025-01-01 00:00:00')", "UPDATE t SET c = 9 WHERE id = 1",
		"UPDATE t SET v = 'u' WHERE id = 2", "UPDATE t SET s = NULL WHERE id = 3")
	want := readPG(t, dsn, query)
	if want["4"]["c"] != "7" || want["4"]["s"] != "it's {a,b}" || want["4"]["ts"] != "2024-05-06T07:08:09.123456" {
		t.Fatalf("Postgres shows row 4 as %v", want["4"])
	}
	p.converge(t, read, want)
	p.stopCleanly(t)

	// While Run is down: a change of the old shape, then a column with a default, then a change of the new one.
	execSQL(t, dsn, "UPDATE t SET v = 'before' WHERE id = 5", "ALTER TABLE t ADD COLUMN d bigint DEFAULT 42",
		"UPDATE t SET v = 'after' WHERE id = 6", "INSERT INTO t (id, v, d) VALUES (22, 'v22', 43)")
	p = startPipeline(t, cat, cfg)
	p.wait(t, "live-start")
	want = readPG(t, dsn, queryD)
	if want["5"]["d"] != "42" || want["5"]["v"] != "before" {
		t.Fatalf("Postgres shows row 5 as %v", want["5"])
	}
	p.converge(t, read, want)
	p.stopCleanly(t)

	// A volatile default rewrites the rows, which the stream does not carry: refused on v3 too.
	execSQL(t, dsn, "ALTER TABLE t ADD COLUMN r int NOT NULL DEFAULT (random() * 0 + 7)::int")
	if err := postgres.Run(ctx, cat, cfg); !errors.Is(err, postgres.ErrAddedColumnDefault) ||
		!strings.Contains(err.Error(), "public.t") || !strings.Contains(err.Error(), `"r"`) {
		t.Fatalf("Run after a volatile default = %v, want ErrAddedColumnDefault naming public.t and r", err)
	}
}
