package iceberg

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/icewriter/iceberg/internal/commit"
	"github.com/icewriter/iceberg/internal/redact"
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

// roundRunKey marks the context of a gated pipeline's run commit: its CommitTable joins the router's round.
type roundRunKey = commit.RoundRunKey

// gatedLocked reports whether the pipeline commits in a router's rounds.
func (p *pipeline) gatedLocked() bool { return p.cfg.shared != nil && p.cfg.shared.gated }

// runCtx is the context of a run's commit: the pipeline's own, marked when the run joins a round.
func (p *pipeline) runCtx() context.Context {
	if p.gatedLocked() {
		return context.WithValue(p.ctx, roundRunKey{}, true)
	}
	return p.ctx
}

// cutForRound seals the open buffer (unless seal is false: a table in its bulk phase on a timed round keeps
// filling its batch) and returns the sequence number the round commits up to, and whether there is anything
// to commit.
func (p *pipeline) cutForRound(seal bool) (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.life.closed || p.life.failed != nil {
		return 0, false
	}
	target := p.sealedTargetLocked()
	if seal {
		target = p.flushTargetLocked()
	} else if p.bulk.carry {
		// Batches in bulk files still open commit only once a file closes: a timed round takes what may
		// commit now, instead of waiting for files the round does not close.
		n := 0
		for n < len(p.queue) && p.queue[n].staged {
			n++
		}
		target = p.committed
		if n = p.runEndLocked(n); n > 0 {
			target = p.queue[n-1].seq
		}
	}
	return target, target > p.committed
}

// waitStaged waits until every batch up to target is encoded and uploaded, and reports whether they all are
// (false: the pipeline failed or closed meanwhile, and commits nothing more of them).
func (p *pipeline) waitStaged(target int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		if p.life.failed != nil || p.life.closed {
			return false
		}
		ready := true
		for _, b := range p.queue {
			if b.seq <= target && !b.staged {
				ready = false
				break
			}
		}
		if ready {
			return true
		}
		_ = p.waitLocked(context.Background())
	}
}

// releaseTo lets the commit loop commit up to target.
func (p *pipeline) releaseTo(target int64) {
	p.mu.Lock()
	p.released = max(p.released, target)
	p.mu.Unlock()
	p.kickLoop()
}

// roundDone reports whether the pipeline will commit nothing more up to target (it did, or it stopped), and
// otherwise returns the channel its next change closes.
func (p *pipeline) roundDone(target int64) (bool, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.done:
		return true, nil
	default:
	}
	if p.committed >= target || p.life.failed != nil {
		return true, nil
	}
	return false, p.changed
}

// rounds is the router's commit rounds' state: the run commits that joined the round in progress.
type rounds struct {
	cat icecatalog.Catalog // masked (redact): commits a lone run, loads tables after a round
	tc  icecatalog.TransactionalCatalog
	log *slog.Logger
	// timeout bounds one multi-table commit (WithCommitTimeout): a catalog that never answers fails the round's
	// commits with an error, which the writers' proofs resolve, instead of holding them forever.
	timeout time.Duration

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced when a run joins
	active   bool          // a round is in progress: run commits join it
	arrivals []*arrival
	// perTable: the catalog answered that it does not support multi-table commits; rounds then send each run
	// alone (still together in time, but not atomically), and the router says so once.
	perTable bool
	multi    atomic.Int64 // multi-table commits that applied
	events   *callbacks   // HookRoundCommitted (WithRouterHooks)
}

// sent reports a send of a round to the router's hooks.
func (rd *rounds) sent(arrivals []*arrival, whole bool, start time.Time) {
	if !rd.events.wants(hookRound) {
		return
	}
	ev := RoundCommit{Atomic: whole, Duration: time.Since(start), At: time.Now()}
	for _, a := range arrivals {
		ev.Tables = append(ev.Tables, a.commit.Identifier)
		if ev.Err == nil && a.err != nil {
			ev.Err = a.err
		}
	}
	slices.SortFunc(ev.Tables, func(a, b table.Identifier) int { return strings.Compare(commit.IdentKey(a), commit.IdentKey(b)) })
	rd.events.emit(ev)
}

// unsupported reports whether the catalog refused multi-table commits.
func (rd *rounds) unsupported() bool {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	return rd.perTable
}

// arrival is one run commit waiting in a round: its table commit, and the answer the round gives it.
type arrival struct {
	ctx     context.Context
	commit  table.TableCommit
	done    chan struct{}
	meta    table.Metadata
	loc     string
	err     error
	applied bool // sent in a multi-table commit that succeeded
}

// roundCatalog is the catalog a gated writer commits through: its run commits join the round, the rest goes
// to the catalog.
type roundCatalog struct {
	icecatalog.Catalog
	rd *rounds
}

// CommitTable joins the round in progress when ctx marks a run commit, else commits alone.
func (c *roundCatalog) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
	if run, _ := ctx.Value(roundRunKey{}).(bool); !run {
		return c.Catalog.CommitTable(ctx, ident, reqs, updates)
	}
	a := &arrival{ctx: ctx, commit: table.TableCommit{Identifier: ident, Requirements: reqs, Updates: updates},
		done: make(chan struct{})}
	rd := c.rd
	rd.mu.Lock()
	if !rd.active {
		// No round waits for it (its writer was stopped from outside while the run was being built): alone.
		rd.mu.Unlock()
		return c.Catalog.CommitTable(ctx, ident, reqs, updates)
	}
	rd.arrivals = append(rd.arrivals, a)
	close(rd.changed)
	rd.changed = make(chan struct{})
	rd.mu.Unlock()
	// The round answers every arrival: it sends them before it ends.
	<-a.done
	return a.meta, a.loc, a.err
}

// member is a table of a round: its pipeline and the sequence number the round commits up to.
type member struct {
	ident  table.Identifier
	p      *pipeline
	target int64
}

// drive waits for the members' run commits and sends them, until every member is done.
func (rd *rounds) drive(ctx context.Context, members []member) {
	for {
		arrivals, more := rd.gather(members)
		if len(arrivals) > 0 {
			rd.send(ctx, arrivals)
		}
		if !more {
			return
		}
	}
}

// gather waits until every member that is not done has joined, takes the arrivals, and reports whether any
// member is not done yet (so another send may follow: a retry).
func (rd *rounds) gather(members []member) ([]*arrival, bool) {
	for {
		rd.mu.Lock()
		joined := map[string]bool{}
		for _, a := range rd.arrivals {
			joined[commit.IdentKey(a.commit.Identifier)] = true
		}
		wake := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(rd.changed)}}
		rd.mu.Unlock()
		waiting, open := false, false
		for _, m := range members {
			done, ch := m.p.roundDone(m.target)
			if done {
				continue
			}
			open = true
			if !joined[commit.IdentKey(m.ident)] {
				waiting = true
				wake = append(wake, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
			}
		}
		if !waiting {
			rd.mu.Lock()
			arrivals := rd.arrivals
			rd.arrivals = nil
			rd.mu.Unlock()
			return arrivals, open
		}
		reflect.Select(wake)
	}
}

// send commits the arrivals: one multi-table commit, or the lone one (or each, perTable) through CommitTable.
func (rd *rounds) send(ctx context.Context, arrivals []*arrival) {
	start, whole := time.Now(), false
	defer func() {
		rd.sent(arrivals, whole, start)
		for _, a := range arrivals {
			close(a.done)
		}
	}()
	rd.mu.Lock()
	perTable := rd.perTable
	rd.mu.Unlock()
	if len(arrivals) == 1 || perTable {
		for _, a := range arrivals {
			a.meta, a.loc, a.err = rd.cat.CommitTable(a.ctx, a.commit.Identifier, a.commit.Requirements, a.commit.Updates)
		}
		return
	}
	commits := make([]table.TableCommit, len(arrivals))
	names := make([]string, len(arrivals))
	for i, a := range arrivals {
		commits[i] = a.commit
		names[i] = strings.Join(a.commit.Identifier, ".")
	}
	tctx, cancel := context.WithTimeout(ctx, rd.timeout)
	err := rd.tc.CommitTransaction(tctx, commits)
	cancel()
	whole = err == nil || !endpointUnsupported(err)
	if err != nil && endpointUnsupported(err) {
		// Nothing was sent (the REST client checks the server's advertised endpoints first): commit each alone
		// from now on.
		rd.mu.Lock()
		rd.perTable = true
		rd.mu.Unlock()
		rd.log.Warn("iceberg: router: the catalog does not support multi-table commits; tables commit one by one", "err", err)
		for _, a := range arrivals {
			a.meta, a.loc, a.err = rd.cat.CommitTable(a.ctx, a.commit.Identifier, a.commit.Requirements, a.commit.Updates)
		}
		return
	}
	if err != nil {
		// Every table's commit failed, or (a lost reply) every one applied: the writers' proofs tell, table by
		// table, and agree, since the commit was atomic.
		for _, a := range arrivals {
			a.err = fmt.Errorf("iceberg: router: multi-table commit of [%s]: %w", strings.Join(names, ", "), err)
		}
		return
	}
	rd.multi.Add(1)
	// The multi-table commit answers with no metadata: each table is loaded back. A table another writer
	// committed to meanwhile shows that commit too, which the writer handles as any concurrent commit.
	for _, a := range arrivals {
		a.applied = true
		tbl, err := rd.cat.LoadTable(a.ctx, a.commit.Identifier)
		if err != nil {
			// Applied, but unseen: the writer's retry proves it applied by its marker, and commits nothing twice.
			a.err = fmt.Errorf("iceberg: router: load %v after its multi-table commit: %w", a.commit.Identifier, err)
			continue
		}
		a.meta, a.loc = tbl.Metadata(), tbl.MetadataLocation()
	}
}

// endpointUnsupported reports iceberg-go's REST client's refusal of an endpoint the server does not advertise
// (rest.ErrEndpointNotSupported, "endpoint not supported by server"), matched by its text so that the core does
// not import the REST client.
func endpointUnsupported(err error) bool {
	return strings.Contains(err.Error(), "endpoint not supported")
}

// begin opens a round: run commits join it from now on.
func (rd *rounds) begin() {
	rd.mu.Lock()
	rd.active = true
	rd.mu.Unlock()
}

// end closes the round; a run commit that joined after the last send (its writer stopped from outside) is sent
// now, so that none waits forever.
func (rd *rounds) end(ctx context.Context) {
	rd.mu.Lock()
	rd.active = false
	late := rd.arrivals
	rd.arrivals = nil
	rd.mu.Unlock()
	if len(late) > 0 {
		rd.send(ctx, late)
	}
}

// roundRequest asks the round goroutine for a round that starts after the request; done is closed after it.
type roundRequest struct{ done chan struct{} }

// newRounds sets up commit rounds over cat when it commits several tables atomically and perTable is off:
// the writers' catalog and the round state; nil when the router commits table by table.
func newRounds(cat icecatalog.Catalog, log *slog.Logger, timeout time.Duration) (*rounds, icecatalog.Catalog) {
	masked := redact.WrapCatalog(cat, nil)
	tc, ok := masked.(icecatalog.TransactionalCatalog)
	if !ok {
		return nil, masked
	}
	log = redact.Logger(log, redact.RedactorOf(masked)) // a refusal may quote the server
	rd := &rounds{cat: masked, tc: tc, log: log, timeout: timeout, changed: make(chan struct{})}
	// The writers' catalog is masked as the router's is (same redactor), so NewWriter keeps it as it is.
	return rd, redact.WrapCatalog(&roundCatalog{Catalog: masked, rd: rd}, redact.RedactorOf(masked))
}

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
	var members []member
	for _, t := range r.opened() {
		if target, ok := t.w.pipe.cutForRound(asked || Phase(t.phase.Load()) != PhaseBulk); ok {
			members = append(members, member{ident: t.ident, p: t.w.pipe, target: target})
		}
	}
	r.cutMu.Unlock()
	ready := members[:0]
	for _, m := range members {
		if m.p.waitStaged(m.target) {
			ready = append(ready, m)
		}
	}
	if len(ready) == 0 {
		return
	}
	r.rounds.begin()
	for _, m := range ready {
		m.p.releaseTo(m.target)
	}
	r.rounds.drive(ctx, ready)
	r.rounds.end(ctx)
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
