package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// lagMeter pairs each driver transaction (its commit time and the WAL insert position read just before its
// commit) with the first confirmed Iceberg commit past that position: the lag from Postgres commit to Iceberg
// commit (the confirmed LSN is a transaction's end, so a confirmation past the position read inside a
// transaction covers it).
type lagMeter struct {
	mu        sync.Mutex
	pending   []txMark // not yet confirmed, in commit order
	lags      []time.Duration
	changes   int64
	maxBehind time.Duration
}

type txMark struct {
	lsn uint64
	at  time.Time
}

func newLagMeter() *lagMeter { return &lagMeter{} }

func (m *lagMeter) committed(lsn uint64, at time.Time, changes int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pending = append(m.pending, txMark{lsn, at})
	m.changes += int64(changes)
}

func (m *lagMeter) confirmed(lsn uint64, at time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for n < len(m.pending) && m.pending[n].lsn < lsn {
		lag := at.Sub(m.pending[n].at)
		m.lags = append(m.lags, lag)
		m.maxBehind = max(m.maxBehind, lag)
		n++
	}
	m.pending = m.pending[n:]
}

func (m *lagMeter) report(w io.Writer, rate int, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	lags := slices.Clone(m.lags)
	slices.Sort(lags)
	pct := func(p float64) time.Duration {
		if len(lags) == 0 {
			return 0
		}
		return lags[min(len(lags)-1, int(p*float64(len(lags))))]
	}
	fmt.Fprintf(w, "\n| live | target changes/s | changes/s committed by the driver | transactions | confirmed | lag p50 | p99 | max | unconfirmed at the end |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|\n")
	fmt.Fprintf(w, "| %s | %d | %.0f | %d | %d | %s | %s | %s | %d |\n", d, rate, float64(m.changes)/d.Seconds(),
		len(lags)+len(m.pending), len(lags), pct(0.5).Round(time.Millisecond), pct(0.99).Round(time.Millisecond),
		m.maxBehind.Round(time.Millisecond), len(m.pending))
}

// drive commits updates of lineitem (rate changes per second, in 100 transactions per second) for d, then
// waits up to 30 s for the pipeline to confirm the last of them.
func drive(ctx context.Context, dsn string, d time.Duration, rate int, orders int64, m *lagMeter, runErr <-chan error) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	perTx := max(1, rate/100)
	r := rand.New(rand.NewPCG(1, 2))
	keys := make([]int64, perTx)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		select {
		case err := <-runErr:
			return fmt.Errorf("pipeline stopped: %v", err)
		case <-tick.C:
		}
		for i := range keys {
			keys[i] = 1 + r.Int64N(orders)
		}
		tx, err := conn.Begin(ctx)
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE tpch.lineitem SET l_quantity = l_quantity + 1
			WHERE l_orderkey = ANY($1) AND l_linenumber = 1`, keys)
		if err != nil {
			return err
		}
		var pos string
		if err := tx.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&pos); err != nil {
			return err
		}
		if err := tx.Commit(ctx); err != nil {
			return err
		}
		lsn, err := pglogrepl.ParseLSN(pos)
		if err != nil {
			return err
		}
		m.committed(uint64(lsn), time.Now(), int(tag.RowsAffected()))
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		m.mu.Lock()
		left := len(m.pending)
		m.mu.Unlock()
		if left == 0 {
			break
		}
		select {
		case err := <-runErr:
			return fmt.Errorf("pipeline stopped: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}
