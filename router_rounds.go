package iceberg

import (
	"context"
	"time"

	"github.com/icewriter/iceberg/internal/commit"
)

// Commit rounds: on a catalog that commits several tables atomically (catalog.TransactionalCatalog: iceberg-go's
// REST catalog with POST /transactions/commit, and this module's SQL catalogs, SQLite included), a Router
// commits the tables that have something to commit together, in rounds:
//
//  1. The round cuts every table at once (sealing its open buffer, with WithCheckpoints at its newest
//     checkpoint) under the router's cut lock, which Router.Checkpoint and RouterSource.Checkpoint also take:
//     a cut never falls between two tables' marks of one checkpoint.
//  2. It waits until every table's batches up to its cut are encoded and uploaded, then releases them: until
//     then a table's commit loop commits nothing (pipeline.released).
//  3. Each released table's commit loop forms its run and commits it as usual (markers, positions, retries,
//     fencing), except that the run's CommitTable (marked by its context) joins the round instead of going to
//     the catalog; once every released table has joined (or finished without joining: it failed, or a proof
//     showed its run applied), the round sends them all in one multi-table commit. A conflict fails them all;
//     each retries as it would alone and joins again, so the retries are one multi-table commit too.
//
// Rounds run on one goroutine of the router, every flush interval (WithFlushInterval among the writer options;
// 1 s when it is 0), on Router.Flush and Close, and when a writer's call waits for a commit. Other commits of a writer (its fence, schema changes,
// maintenance) go to the catalog alone: they change no rows.

// roundRequest asks the round goroutine for a round that starts after the request; done is closed after it.
type roundRequest struct{ done chan struct{} }

// roundLoop runs rounds every interval, on request (Flush, Close) and when a writer's call waits for a commit
// (wanted: the next timed round, brought forward), until stop is closed.
func (r *Router) roundLoop(interval time.Duration, wanted <-chan struct{}, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		var reqs []roundRequest
		select {
		case <-stop:
			return
		case <-tick.C:
		case <-wanted:
		case req := <-r.roundReqs:
			reqs = append(reqs, req)
		}
		r.runRound(len(reqs) > 0)
		for _, req := range reqs {
			close(req.done)
		}
	}
}

// runRound cuts every table, waits for their batches, releases them together and sends their run commits. A
// timed round (asked is false) leaves the open buffers of tables in their bulk phase alone.
func (r *Router) runRound(asked bool) {
	ctx := context.Background()
	r.cutMu.Lock()
	var members []commit.RoundMember
	for _, t := range r.opened() {
		if target, ok := t.w.pipe.CutForRound(asked || Phase(t.phase.Load()) != PhaseBulk); ok {
			members = append(members, commit.RoundMember{Ident: t.ident, Pipe: t.w.pipe, Target: target})
		}
	}
	r.cutMu.Unlock()
	ready := members[:0]
	for _, m := range members {
		if m.Pipe.WaitStaged(m.Target) {
			ready = append(ready, m)
		}
	}
	if len(ready) == 0 {
		return
	}
	r.rounds.Begin()
	for _, m := range ready {
		m.Pipe.ReleaseTo(m.Target)
	}
	r.rounds.Drive(ctx, ready)
	r.rounds.End(ctx)
}

// round asks for a round that starts after the call and waits for it, as far as ctx allows.
func (r *Router) round(ctx context.Context) error {
	req := roundRequest{done: make(chan struct{})}
	select {
	case r.roundReqs <- req:
	case <-r.roundsDone:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-req.done:
		return nil
	case <-r.roundsDone:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}
