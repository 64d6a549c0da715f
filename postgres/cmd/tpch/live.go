package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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
	// CPU seconds of Postgres (with the driver's backend) and of this process (the pipeline and the driver)
	// over the live phase: what a change costs, whatever else loads the machine.
	pgCPU, selfCPU float64
}

func (m *lagMeter) cpu(pg, self float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pgCPU, m.selfCPU = pg, self
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
	per10k := func(s float64) float64 { return s / max(float64(m.changes), 1) * 1e4 }
	fmt.Fprintf(w, "\n| live | target changes/s | changes/s committed by the driver | transactions | confirmed | lag p50 | p99 | max | unconfirmed at the end | CPU s per 10k changes: Postgres | this process |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|---|\n")
	fmt.Fprintf(w, "| %s | %d | %.0f | %d | %d | %s | %s | %s | %d | %.2f | %.2f |\n", d, rate, float64(m.changes)/d.Seconds(),
		len(lags)+len(m.pending), len(lags), pct(0.5).Round(time.Millisecond), pct(0.99).Round(time.Millisecond),
		m.maxBehind.Round(time.Millisecond), len(m.pending), per10k(m.pgCPU), per10k(m.selfCPU))
}

// drive commits updates of lineitem at rate changes per second for d, then waits up to 30 s for the pipeline
// to confirm the last of them. It paces on the changes committed since its start, not on a ticker: a
// transaction that took longer than its 10 ms slot is caught up by the next ones, which carry what is due (up
// to 10 slots' worth), so the rate holds while one connection keeps up. Each transaction is one round trip
// (BEGIN, the UPDATE, the WAL position, COMMIT pipelined in one batch): with four, the driver spent its time
// waiting on the loaded machine and fell short of 10k changes/s.
func drive(ctx context.Context, dsn string, d time.Duration, rate int, orders int64, m *lagMeter, runErr <-chan error) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	perSlot := max(1, rate/100)
	r := rand.New(rand.NewPCG(1, 2))
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	stopWatch := m.watch(stallDump)
	defer stopWatch()
	start := time.Now()
	end := start.Add(d)
	var done int64
	for time.Now().Before(end) {
		select {
		case err := <-runErr:
			return fmt.Errorf("pipeline stopped: %v", err)
		case <-tick.C:
		}
		due := int64(time.Since(start).Seconds()*float64(rate)) - done
		if due <= 0 {
			continue
		}
		keys := make([]int64, min(due, int64(10*perSlot)))
		for i := range keys {
			keys[i] = 1 + r.Int64N(orders)
		}
		b := &pgx.Batch{}
		b.Queue("BEGIN")
		upd := b.Queue(`UPDATE tpch.lineitem SET l_quantity = l_quantity + 1
			WHERE l_orderkey = ANY($1) AND l_linenumber = 1`, keys)
		pos := b.Queue("SELECT pg_current_wal_insert_lsn()::text")
		b.Queue("COMMIT")
		var changed int64
		var lsnText string
		upd.Exec(func(tag pgconn.CommandTag) error { changed = tag.RowsAffected(); return nil })
		pos.QueryRow(func(row pgx.Row) error { return row.Scan(&lsnText) })
		if err := conn.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		lsn, err := pglogrepl.ParseLSN(lsnText)
		if err != nil {
			return err
		}
		// A key drawn twice changes one row: pacing counts the rows changed.
		done += max(changed, 1)
		m.committed(uint64(lsn), time.Now(), int(changed))
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

// watch appends every goroutine's stack to the file path (when set) whenever the oldest unconfirmed
// transaction is 2.5 s old, once per stall and at most 10 times: what the pipeline waits on when it lags.
// It returns the function that stops it.
func (m *lagMeter) watch(path string) func() {
	if path == "" {
		return func() {}
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		dumps := 0
		var dumped uint64 // the LSN of the transaction a dump was taken for
		for dumps < 10 {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			m.mu.Lock()
			var oldest txMark
			if len(m.pending) > 0 {
				oldest = m.pending[0]
			}
			m.mu.Unlock()
			if oldest.lsn == 0 || oldest.lsn == dumped || time.Since(oldest.at) < 2500*time.Millisecond {
				continue
			}
			f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				fmt.Fprintln(os.Stderr, "tpch: stall dump:", err)
				return
			}
			fmt.Fprintf(f, "=== %s: a transaction unconfirmed for %s\n", time.Now().Format(time.RFC3339Nano),
				time.Since(oldest.at).Round(time.Millisecond))
			_ = pprof.Lookup("goroutine").WriteTo(f, 2)
			_ = f.Close()
			dumped = oldest.lsn
			dumps++
		}
	}()
	return func() { close(stop); <-done }
}
