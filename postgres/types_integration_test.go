//go:build integration

package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/icewriter/iceberg/postgres"
)

// edgeRows are values at both ends of what each temporal type and numeric(38,s) maps to, as SQL literals and as
// the Iceberg table must show them (cell's formats).
var edgeRows = []map[string]cellv{
	{
		"ts":    {"'4713-11-24 00:00:00 BC'", "-4712-11-24T00:00:00.000000"},
		"tstz":  {"'4713-11-24 00:00:00+00 BC'", "-4712-11-24T00:00:00.000000"},
		"d":     {"'4713-01-01 BC'", "-4712-01-01"},
		"t":     {"'00:00:00'", "00:00:00.000000"},
		"n38":   {"-" + strings.Repeat("9", 38), "-" + strings.Repeat("9", 38)},
		"n3810": {"-" + strings.Repeat("9", 28) + "." + strings.Repeat("9", 10), "-" + strings.Repeat("9", 28) + "." + strings.Repeat("9", 10)},
		"nu":    {"-" + strings.Repeat("9", 20) + "." + strings.Repeat("9", 18), "-" + strings.Repeat("9", 20) + "." + strings.Repeat("9", 18)},
	},
	{
		"ts":    {"'294247-01-10 04:00:54.775807'", "294247-01-10T04:00:54.775807"},
		"tstz":  {"'294247-01-10 04:00:54.775807+00'", "294247-01-10T04:00:54.775807"},
		"d":     {"'5874897-12-31'", "5874897-12-31"},
		"t":     {"'23:59:59.999999'", "23:59:59.999999"},
		"n38":   {strings.Repeat("9", 38), strings.Repeat("9", 38)},
		"n3810": {strings.Repeat("9", 28) + "." + strings.Repeat("9", 10), strings.Repeat("9", 28) + "." + strings.Repeat("9", 10)},
		"nu":    {"0.000000000000000001", "0.000000000000000001"},
	},
}

var edgeCols = []string{"ts", "tstz", "d", "t", "n38", "n3810", "nu"}

const edgesDDL = `SET TIME ZONE 'Asia/Kolkata'; CREATE TABLE edges (id int PRIMARY KEY, ts timestamp, tstz timestamptz, d date,
  t time, n38 numeric(38,0), n3810 numeric(38,10), nu numeric)`

// insertEdges inserts edgeRows with ids from first, and records them in m.
func insertEdges(t *testing.T, dsn string, m model, first int) {
	t.Helper()
	for i, r := range edgeRows {
		id := fmt.Sprint(first + i)
		vals := []string{id}
		want := map[string]string{"id": id}
		for _, c := range edgeCols {
			vals = append(vals, r[c].sql)
			want[c] = r[c].want
		}
		execSQL(t, dsn, "INSERT INTO edges (id, "+strings.Join(edgeCols, ", ")+") VALUES ("+strings.Join(vals, ", ")+")")
		m[id] = want
	}
}

// TestTemporalAndNumericEdgesMatchPostgres: values at both ends of every temporal type's Iceberg range and the
// largest numeric(38,s) values arrive exactly through the snapshot (COPY) and the live (pgoutput) paths.
func TestTemporalAndNumericEdgesMatchPostgres(t *testing.T) {
	ctx := context.Background()
	dsn, slot := sourceDB(t)
	execSQL(t, dsn, edgesDDL)
	want := model{}
	insertEdges(t, dsn, want, 1)
	cat := openCatalog(t, catalogURI(t))
	p := startPipeline(t, cat, postgres.Config{DSN: dsn, Slot: slot, FlushInterval: 100 * time.Millisecond})
	p.wait(t, "live-start")
	read := func() (model, error) { return readTable(ctx, cat, table.Identifier{"public", "edges"}, "id") }
	p.converge(t, read, want)
	insertEdges(t, dsn, want, 11)
	p.converge(t, read, want)
}

// outOfRange are values no Iceberg type holds: each must stop Run with ErrOutOfRange naming the table, the
// column and the row's key, through either path.
var outOfRange = []struct{ typ, sql, says string }{
	{"timestamp", "'294276-12-31 23:59:59.999999'", "294276-12-31 23:59:59.999999"},
	{"timestamptz", "'294276-12-31 23:59:59.999999+00'", "294276-12-31 23:59:59.999999"},
	{"timestamp", "'infinity'", "'infinity'"},
	{"timestamptz", "'-infinity'", "'-infinity'"},
	{"date", "'infinity'", "'infinity'"},
	{"date", "'-infinity'", "'-infinity'"},
	{"time", "'24:00:00'", "24:00:00"},
	{"numeric", "'NaN'", "NaN"},
	{"numeric", "'Infinity'", "Infinity"},
	{"numeric", "'-Infinity'", "-Infinity"},
	{"numeric", "'1" + strings.Repeat("0", 20) + "'", "does not fit decimal(38,18)"},
}

// checkOutOfRange requires err to be ErrOutOfRange naming table bad_i, column v, key id=7 and the value.
func checkOutOfRange(t *testing.T, i int, err error) {
	t.Helper()
	c := outOfRange[i]
	for _, s := range []string{fmt.Sprintf("public.bad_%d", i), `"v"`, "id=7", c.says} {
		if !errors.Is(err, postgres.ErrOutOfRange) || !strings.Contains(err.Error(), s) {
			t.Fatalf("%s %s: Run = %v, want ErrOutOfRange saying %s", c.typ, c.sql, err, s)
		}
	}
}

// TestOutOfRangeValuesStopTheSnapshot: a row holding a value outside its Iceberg type's range stops the
// snapshot with an error naming the table, column and key.
func TestOutOfRangeValuesStopTheSnapshot(t *testing.T) {
	dsn, slot := sourceDB(t)
	cat := openCatalog(t, catalogURI(t))
	for i, c := range outOfRange {
		execSQL(t, dsn, fmt.Sprintf("CREATE TABLE bad_%d (id int PRIMARY KEY, v %s)", i, c.typ),
			fmt.Sprintf("INSERT INTO bad_%d VALUES (6, NULL), (7, %s)", i, c.sql))
		err := postgres.Run(context.Background(), cat, postgres.Config{DSN: dsn, Slot: fmt.Sprintf("%s_%d", slot, i),
			Tables: []string{fmt.Sprintf("bad_%d", i)}, Mode: postgres.ModeSnapshot})
		checkOutOfRange(t, i, err)
	}
}

// TestOutOfRangeValuesStopTheStream: such a value inserted while streaming stops Run with the same error, and
// nothing after it is written.
func TestOutOfRangeValuesStopTheStream(t *testing.T) {
	ctx := context.Background()
	dsn, slot := sourceDB(t)
	cat := openCatalog(t, catalogURI(t))
	for i, c := range outOfRange {
		name := fmt.Sprintf("bad_%d", i)
		execSQL(t, dsn, fmt.Sprintf("CREATE TABLE %s (id int PRIMARY KEY, v %s)", name, c.typ),
			"INSERT INTO "+name+" VALUES (6, NULL)")
		p := startPipeline(t, cat, postgres.Config{DSN: dsn, Slot: fmt.Sprintf("%s_%d", slot, i), Tables: []string{name},
			FlushInterval: 50 * time.Millisecond})
		p.wait(t, "live-start")
		execSQL(t, dsn, fmt.Sprintf("INSERT INTO %s VALUES (7, %s)", name, c.sql), "INSERT INTO "+name+" VALUES (8, NULL)")
		// The pipeline must stop; a table that takes row 8 went past the bad value.
		read := func() (model, error) { return readTable(ctx, cat, table.Identifier{"public", name}, "id") }
		timeout := time.After(2 * time.Minute)
	wait:
		for {
			select {
			case err := <-p.errc:
				checkOutOfRange(t, i, err)
				break wait
			case <-p.kick:
				if got, err := read(); err == nil && got["8"] != nil {
					t.Fatalf("%s %s: the pipeline wrote rows past it: %v", c.typ, c.sql, got)
				}
			case <-timeout:
				t.Fatalf("%s %s: the pipeline neither stopped nor went on", c.typ, c.sql)
			}
		}
	}
}
