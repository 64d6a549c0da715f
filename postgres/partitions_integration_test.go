//go:build integration

package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/icewriter/iceberg/postgres"
)

// TestPartitionedTableIsOneIcebergTable: a table partitioned by list (two partitions, one of them sub-partitioned
// by range) is found among "all tables" without its partitions, copied through its root, and its partitions'
// changes (inserts into each, an update that moves a row to another partition, deletes) reach one Iceberg table
// (the publication sends them as the root's): the table equals the model. Listing a partition is an error
// naming its partitioned table.
func TestPartitionedTableIsOneIcebergTable(t *testing.T) {
	ctx := context.Background()
	dsn, slot := sourceDB(t)
	execSQL(t, dsn, `CREATE TABLE events (region text, id bigint, qty int, PRIMARY KEY (region, id)) PARTITION BY LIST (region);
CREATE TABLE events_eu PARTITION OF events FOR VALUES IN ('eu');
CREATE TABLE events_us PARTITION OF events FOR VALUES IN ('us') PARTITION BY RANGE (id);
CREATE TABLE events_us_low PARTITION OF events_us FOR VALUES FROM (MINVALUE) TO (1000);
CREATE TABLE events_us_high PARTITION OF events_us FOR VALUES FROM (1000) TO (MAXVALUE);
INSERT INTO events SELECT r, i, i FROM unnest(ARRAY['eu', 'us']) r, generate_series(1, 1500) i;`)
	want := model{}
	set := func(region string, id, qty int) {
		want[fmt.Sprintf("%s|%d", region, id)] = map[string]string{"qty": fmt.Sprint(qty)}
	}
	for _, r := range []string{"eu", "us"} {
		for i := 1; i <= 1500; i++ {
			set(r, i, i)
		}
	}
	cat := openCatalog(t, catalogURI(t))
	err := postgres.Run(ctx, cat, postgres.Config{DSN: dsn, Slot: slot, Tables: []string{"events_us_low"}})
	if err == nil || !strings.Contains(err.Error(), "public.events_us_low is a partition of public.events_us") {
		t.Fatalf("listing a partition: %v, want an error naming its partitioned table", err)
	}

	p := startPipeline(t, cat, postgres.Config{DSN: dsn, Slot: slot, Workers: 2, BatchRows: 500,
		FlushInterval: 100 * time.Millisecond})
	p.wait(t, "live-start")
	ident := table.Identifier{"public", "events"}
	read := func() (model, error) { return readTable(ctx, cat, ident, "region", "id") }
	p.converge(t, read, want)
	for _, leaf := range []string{"events_eu", "events_us", "events_us_low", "events_us_high"} {
		if _, err := cat.LoadTable(ctx, table.Identifier{"public", leaf}); !errors.Is(err, icecatalog.ErrNoSuchTable) {
			t.Fatalf("Iceberg table of partition %s: %v, want none", leaf, err)
		}
	}

	execSQL(t, dsn, "INSERT INTO events VALUES ('eu', 5000, 1), ('us', 5000, 2), ('us', 7, 3) ON CONFLICT (region, id) DO UPDATE SET qty = 3",
		"UPDATE events SET qty = qty + 100 WHERE id BETWEEN 990 AND 1010",                               // both sub-partitions and eu
		"UPDATE events SET id = id + 2000 WHERE region = 'us' AND id BETWEEN 1 AND 5",                   // low to high
		"UPDATE events SET region = 'us', id = id + 10000 WHERE region = 'eu' AND id BETWEEN 20 AND 24", // eu to us
		"DELETE FROM events WHERE region = 'us' AND id BETWEEN 1400 AND 1449")
	set("eu", 5000, 1)
	set("us", 5000, 2)
	set("us", 7, 3)
	for _, r := range []string{"eu", "us"} {
		for i := 990; i <= 1010; i++ {
			set(r, i, i+100)
		}
	}
	for i := 1; i <= 5; i++ {
		delete(want, fmt.Sprintf("us|%d", i))
		set("us", i+2000, i)
	}
	for i := 20; i <= 24; i++ {
		delete(want, fmt.Sprintf("eu|%d", i))
		set("us", i+10000, i)
	}
	for i := 1400; i <= 1449; i++ {
		delete(want, fmt.Sprintf("us|%d", i))
	}
	p.converge(t, read, want)
	p.stopCleanly(t)
}
