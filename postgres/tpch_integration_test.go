//go:build integration

package postgres_test

import (
	"context"
	"testing"

	"github.com/icewriter/iceberg/postgres/tpch"
)

func TestTPCHLoadIsDeterministic(t *testing.T) {
	ctx := context.Background()
	dsn, _ := sourceDB(t)
	conn := mustConn(t, dsn)
	sum := func() map[string]string {
		out := map[string]string{}
		for _, tb := range tpch.Tables {
			var n int64
			var h string
			if err := conn.QueryRow(ctx, "SELECT count(*), md5(string_agg(t::text, '|' ORDER BY t::text)) FROM tpch."+tb+" t").
				Scan(&n, &h); err != nil {
				t.Fatal(err)
			}
			out[tb] = h
			if want := tpch.Rows(0.01)[tb]; tb != "lineitem" && n != want {
				t.Errorf("%s: %d rows, want %d", tb, n, want)
			}
		}
		return out
	}
	if err := tpch.Load(ctx, conn, 0.01); err != nil {
		t.Fatal(err)
	}
	first := sum()
	if err := tpch.Load(ctx, conn, 0.01); err != nil {
		t.Fatal(err)
	}
	for tb, h := range sum() {
		if h != first[tb] {
			t.Errorf("%s differs between two loads at the same scale factor", tb)
		}
	}
}
