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

	"github.com/icewriter/iceberg/postgres"
)

// TestColumnAddedWithDefaultStopsThenRecopies: a column added with a default while streaming (Postgres shows
// the default on the rows that existed, which no change carries) stops Run with ErrAddedColumnDefault naming
// the table and column, before any NULL for it reaches the Iceberg table; so does a run started after such a
// change. Dropping the Iceberg table, as the error says, copies the table anew: every row then reads the default.
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
