//go:build integration

package postgres_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/icewriter/iceberg/postgres"
)

// reconnectFixture is a pipeline streaming a keyed table (k) and an append-only one (c, fed by an inserter
// until the test's disruption), with its models.
type reconnectFixture struct {
	p     *runningPipeline
	dsn   string
	ks    model
	cs    model
	readK func() (model, error)
	readC func() (model, error)
	// steady is how long a change took to show in the Iceberg table before the disruption.
	steady time.Duration
}

func startReconnectFixture(t *testing.T, flush time.Duration) *reconnectFixture {
	ctx := context.Background()
	dsn, slot := sourceDB(t)
	execSQL(t, dsn, "CREATE TABLE k (id int PRIMARY KEY, v int)", "INSERT INTO k SELECT i, 0 FROM generate_series(1, 100) i",
		"CREATE TABLE c (line text)")
	cat := openCatalog(t, catalogURI(t))
	f := &reconnectFixture{dsn: dsn, ks: model{}, cs: model{}}
	for i := 1; i <= 100; i++ {
		f.ks[strconv.Itoa(i)] = map[string]string{"v": "0"}
	}
	f.readK = func() (model, error) { return readTable(ctx, cat, table.Identifier{"public", "k"}, "id") }
	f.readC = func() (model, error) { return readTable(ctx, cat, table.Identifier{"public", "c"}, "line") }
	f.p = startPipeline(t, cat, postgres.Config{DSN: dsn, Slot: slot, FlushInterval: flush})
	f.p.wait(t, "live-start")
	t0 := time.Now()
	execSQL(t, dsn, "INSERT INTO c VALUES ('before')")
	f.cs["before"] = map[string]string{}
	f.p.converge(t, f.readC, f.cs)
	f.steady = time.Since(t0)
	stop := inserter(t, dsn, "c")
	// Changes read, some committed, some not, when the connection goes.
	execSQL(t, dsn, "UPDATE k SET v = 1 WHERE id <= 50")
	for i := 1; i <= 50; i++ {
		f.ks[strconv.Itoa(i)]["v"] = "1"
	}
	f.p.wait(t, "confirmed")
	n := stop()
	for i := 1; i <= n; i++ {
		f.cs["line "+strconv.Itoa(i)] = map[string]string{}
	}
	return f
}

// after makes changes once the connection is back, waits until both tables equal their models (Run must not
// end meanwhile) and returns how long the first change took to show in the Iceberg table.
func (f *reconnectFixture) after(t *testing.T) time.Duration {
	t0 := time.Now()
	execSQL(t, f.dsn, "INSERT INTO c VALUES ('after')", "UPDATE k SET v = 2 WHERE id > 90")
	f.cs["after"] = map[string]string{}
	f.p.converge(t, f.readC, f.cs)
	lag := time.Since(t0)
	for i := 91; i <= 100; i++ {
		f.ks[strconv.Itoa(i)]["v"] = "2"
	}
	f.p.converge(t, f.readK, f.ks)
	return lag
}

// TestRunReconnectsAfterTerminatedConnection: the walsender's backend is terminated while the pipeline
// streams; Run reconnects and resumes from the slot: both tables equal Postgres, nothing lost or twice.
func TestRunReconnectsAfterTerminatedConnection(t *testing.T) {
	f := startReconnectFixture(t, 200*time.Millisecond)
	execSQL(t, f.dsn, "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE database = current_database()")
	f.p.wait(t, "disconnected")
	f.p.wait(t, "reconnected")
	f.after(t)
}

// TestRunReconnectsAfterServerRestart restarts the server (pg_ctl restart, fast and immediate) while the
// pipeline streams: Run reconnects once the server is back and both tables equal Postgres. It needs the
// server's pg_ctl and data folder (ICEWRITER_PG_CTL, ICEWRITER_PG_DATA; ICEWRITER_PG_RUNAS: the user to run
// pg_ctl as, through su), which scripts/integration.sh exports. The lag of the first change made after the
// restart is logged, in flush intervals (docs/benchmarks.md).
func TestRunReconnectsAfterServerRestart(t *testing.T) {
	ctl, data := os.Getenv("ICEWRITER_PG_CTL"), os.Getenv("ICEWRITER_PG_DATA")
	if ctl == "" || data == "" {
		t.Skip("ICEWRITER_PG_CTL and ICEWRITER_PG_DATA not set (scripts/integration.sh sets them): no server to restart")
	}
	const flush = time.Second
	for _, mode := range []string{"fast", "immediate"} {
		t.Run(mode, func(t *testing.T) {
			f := startReconnectFixture(t, flush)
			cmd := ctl + " -D '" + data + "' -l '" + data + "/server.log' -m " + mode + " -w -t 60 restart"
			var c *exec.Cmd
			if u := os.Getenv("ICEWRITER_PG_RUNAS"); u != "" {
				c = exec.Command("su", u, "-s", "/bin/sh", "-c", cmd)
			} else {
				c = exec.Command("/bin/sh", "-c", cmd)
			}
			t0 := time.Now()
			if out, err := c.CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", cmd, err, out)
			}
			restart := time.Since(t0)
			lag := f.after(t)
			t.Logf("restart (%s) took %v; a change made right after it showed in the Iceberg table after %v = %.2f flush intervals (before the restart: %v)",
				mode, restart.Round(time.Millisecond), lag.Round(time.Millisecond), float64(lag)/float64(flush), f.steady.Round(time.Millisecond))
		})
	}
}

// readPG reads a query's rows from Postgres as a model: the first column is the key, the others by name.
func readPG(t *testing.T, dsn, query string) model {
	t.Helper()
	conn := mustConn(t, dsn)
	rows, err := conn.Query(context.Background(), query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	m := model{}
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		row := map[string]string{}
		for i, f := range rows.FieldDescriptions()[1:] {
			row[f.Name] = fmt.Sprint(vals[i+1])
		}
		m[fmt.Sprint(vals[0])] = row
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestKeyMovesInOneTransactionAreExact: with a DEFERRABLE primary key, transactions that move keys onto keys
// that still hold a row (a shift, a swap, a cycle, a move onto a key whose row then moves on), a chain of moves,
// a key moved then deleted and a key deleted then inserted again leave the Iceberg table equal to Postgres, for
// a table of REPLICA IDENTITY FULL and one of DEFAULT (which the pipeline sets to FULL). With
// KeepReplicaIdentity, a deferrable key without FULL is refused before anything is copied.
func TestKeyMovesInOneTransactionAreExact(t *testing.T) {
	for _, identity := range []string{"FULL", "DEFAULT"} {
		t.Run(identity, func(t *testing.T) {
			ctx := context.Background()
			dsn, slot := sourceDB(t)
			execSQL(t, dsn, "CREATE TABLE td (id int PRIMARY KEY DEFERRABLE INITIALLY DEFERRED, v text)",
				"ALTER TABLE td REPLICA IDENTITY "+identity,
				"INSERT INTO td SELECT i, 'v' || i FROM generate_series(1, 10) i",
				"INSERT INTO td SELECT i, 'v' || i FROM unnest(ARRAY[20, 21, 30, 40, 41, 42, 50, 60, 70, 71]) i")
			cat := openCatalog(t, catalogURI(t))
			p := startPipeline(t, cat, postgres.Config{DSN: dsn, Slot: slot, FlushInterval: 100 * time.Millisecond,
				KeepReplicaIdentity: identity == "FULL"})
			p.wait(t, "live-start")
			const query = "SELECT id, v FROM td"
			read := func() (model, error) { return readTable(ctx, cat, table.Identifier{"public", "td"}, "id") }
			p.converge(t, read, readPG(t, dsn, query))
			execSQL(t, dsn,
				"UPDATE td SET id = id + 1 WHERE id <= 10",                                                        // shift
				"UPDATE td SET id = 41 - id WHERE id IN (20, 21)",                                                 // swap
				"BEGIN; UPDATE td SET id = 31 WHERE id = 30; UPDATE td SET id = 32 WHERE id = 31; COMMIT",         // chain
				"UPDATE td SET id = CASE id WHEN 40 THEN 41 WHEN 41 THEN 42 ELSE 40 END WHERE id IN (40, 41, 42)", // cycle
				"BEGIN; UPDATE td SET id = 55 WHERE id = 50; DELETE FROM td WHERE id = 55; COMMIT",                // moved, deleted
				"BEGIN; DELETE FROM td WHERE id = 60; INSERT INTO td VALUES (60, 'again'); COMMIT",                // deleted, inserted
				// 70 moves onto 71, then 71's own row moves on to 72.
				"BEGIN; UPDATE td SET id = 71 WHERE id = 70; UPDATE td SET id = 72 WHERE id = 71 AND v = 'v71'; COMMIT",
				// All in one transaction.
				"BEGIN; UPDATE td SET id = id + 100; UPDATE td SET id = 211 - id WHERE id IN (102, 109); DELETE FROM td WHERE id = 103; "+
					"INSERT INTO td VALUES (103, 'back'); COMMIT")
			p.converge(t, read, readPG(t, dsn, query))
		})
	}
	t.Run("DEFAULT kept", func(t *testing.T) {
		dsn, slot := sourceDB(t)
		execSQL(t, dsn, "CREATE TABLE td (id int PRIMARY KEY DEFERRABLE INITIALLY DEFERRED, v text)")
		err := postgres.Run(context.Background(), openCatalog(t, catalogURI(t)),
			postgres.Config{DSN: dsn, Slot: slot, KeepReplicaIdentity: true, Mode: postgres.ModeSnapshot})
		if err == nil || !strings.Contains(err.Error(), "public.td") || !strings.Contains(err.Error(), "REPLICA IDENTITY FULL") {
			t.Fatalf("Run: %v, want an error naming public.td and REPLICA IDENTITY FULL", err)
		}
	})
}
