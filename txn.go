package iceberg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/icewriter/iceberg/internal/redact"
)

// txEnv commits table transactions through the catalog. Every path that calls CommitTable goes through its
// commit method: a run's commit (catalogCommitter.Commit), the fence that takes a writer ID over (NewWriter),
// compaction, schema evolution and maintenance. So all of them retry the same way (backoff within the commit
// timeout, a reload before every retry), classify a failed attempt the same way (any error may hide an applied
// commit: only the path's proof, run on the reloaded table, clears it), check fencing on the metadata every
// attempt builds on, and run the same post-commit steps. What differs per path is in its txOp.
//
// Transactions are committed with CommitTable directly, not Transaction.Commit, whose internal retry would
// replay a commit a proxy reported as failed after it applied. TableCommit asserts the branch head on every
// transaction, metadata-only ones included, and a fence is a snapshot that moves the head: an attempt built
// before a takeover fails its requirement, and the retry finds the newer epoch.
type txEnv struct {
	cat     catalog.Catalog
	tables  *tables // the catalog's loads and what commits leave (see tables)
	log     *slog.Logger
	timeout time.Duration // no retry but the first starts later than this after the call began (WithCommitTimeout)
	minWait time.Duration // the backoff before the first retry; it doubles up to maxWait (see backoff)
	maxWait time.Duration
	events  *callbacks // the writer's hooks (nil: none, as for NewCatalogCommitter's)
}

func newTxEnv(cat catalog.Catalog, tabs *tables, log *slog.Logger, timeout time.Duration) txEnv {
	if tabs == nil {
		tabs = newTables()
	}
	return txEnv{cat: cat, tables: tabs, log: log, timeout: timeout, minWait: 50 * time.Millisecond, maxWait: 5 * time.Second}
}

// txOp is one transaction for txEnv.commit: the table, fencing, limits and the path's hooks.
type txOp struct {
	ident  table.Identifier
	branch string
	what   string // names the transaction in errors and logs
	kind   CommitKind

	// fenceID is a stable writer ID and epoch the epoch it holds: an attempt built on metadata whose epoch for
	// fenceID is newer stops with ErrFenced before anything is sent. Empty for random writer IDs (which no one
	// can take over) and for the fence itself.
	fenceID string
	epoch   int64

	// start is the table the first attempt builds on; nil loads it from the catalog first.
	start *table.Table
	// maxAttempts bounds the attempts besides the timeout (0: the timeout alone). The paths that hold the
	// writer's commit queue for work no row waits on (compaction, schema evolution, maintenance) set it, so
	// that a conflict storm delays the writer's commits by seconds, not by the commit timeout.
	maxAttempts int
	// maxBuilds is how many times build may fail on one table head before the call gives up with its error
	// (0 or 1: the first failure is final). A head that moved since makes a failed build a fresh try.
	maxBuilds int

	// build stages the transaction on tbl (attempt counts from 0). A nil transaction, or one without updates,
	// means nothing is left to commit: commit returns txNothing with tbl. An error is a build failure: nothing
	// reached the catalog.
	build func(ctx context.Context, tbl *table.Table, attempt int) (*table.Transaction, error)
	// prove establishes on a reloaded table whether an earlier attempt applied after all (its reply lost, or a
	// retrying proxy turned a success into a conflict): base is the head the first attempt that may have
	// applied was built on. With proveFirst it also runs before the first attempt (first set, base nil), for a
	// transaction an earlier call may have sent already (a coordinator that re-sends a run). Without prove, a
	// retry simply builds again on the reloaded table: build must then find what is already done (a schema
	// change already made, snapshots already expired).
	prove      func(tbl *table.Table, base *int64, first bool) outcome
	proveFirst bool
	// failed runs after every failed attempt (sent: it reached the catalog).
	failed func(sent bool)
	// committed runs after a successful CommitTable and the update hooks: pre is the table the attempt was
	// built on, next the table the commit left.
	committed func(ctx context.Context, pre, next *table.Table)
}

// txHow says how a transaction ended.
type txHow int

const (
	txCommitted txHow = iota // an attempt's CommitTable succeeded
	txProven                 // the proof found that an earlier attempt applied
	txNothing                // build found nothing left to commit
)

// txResult is what txEnv.commit reports.
type txResult struct {
	table     *table.Table // what the commit left; for txProven and txNothing, the table that showed it
	how       txHow
	attempts  int // attempts made, including the one that ended the call
	conflicts int // attempts the catalog rejected because the table moved (commit.Cause)
}

// commit builds and commits op's transaction until it applies, is proven applied, has nothing left to do, or
// the call gives up: past the timeout or op.maxAttempts, when ctx ends, on a final build failure, on
// ErrFenced, or when the proof cannot tell. Giving up after any attempt reached the catalog wraps
// ErrCommitStateUnknown: a request the catalog is still processing may land later.
//
// The first retry is made even past the timeout: a first attempt slower than the timeout (a slow catalog, a
// loaded machine) whose reply was a refusal would otherwise stop the writer as "state unknown" although the
// catalog answered, and the retry's reload shows whether it applied (and commits it when it did not).
func (e *txEnv) commit(ctx context.Context, op *txOp) (txResult, error) {
	gp := enterGate(ctx, e.cat, op.ident)
	defer gp.leave()
	deadline := time.Now().Add(e.timeout)
	var res txResult
	tbl := op.start
	var lastErr error
	// unproven is the head the first attempt that may have applied was built on (nil head: an empty table),
	// set from the moment such an attempt was sent until a proof shows that none applied.
	var unproven **int64
	sent := false
	checked := op.prove == nil || !op.proveFirst // the proof before the first attempt ran (or is not wanted)
	buildFails := 0
	var builtOn string // metadata location of the last attempt that failed to build
	// staleStart: the first attempt, built on op.start (a table cached from an earlier commit), was rejected
	// because the table had moved since. That is no race with another committer, so the reload follows at once.
	staleStart := false
	lastConflict := false // the last attempt was refused because the table moved (commit.Cause)
	for attempt := 0; ; attempt++ {
		res.attempts = attempt + 1
		if attempt > 0 {
			if (attempt > 1 && time.Now().After(deadline)) || ctx.Err() != nil || (op.maxAttempts > 0 && attempt >= op.maxAttempts) {
				res.attempts = attempt
				if sent {
					return res, fmt.Errorf("%w: %s: %w", ErrCommitStateUnknown, op.what, lastErr)
				}
				return res, fmt.Errorf("iceberg: %s gave up after %d attempts: %w", op.what, attempt, lastErr)
			}
			var wait time.Duration
			if !staleStart {
				// A conflict proves the catalog answers and another commit landed: waiting longer after each
				// one would not raise the next attempt's odds, only let a writer that commits continuously
				// take every turn (stalls of seconds). So conflicts stop doubling the wait at conflictSteps.
				step := attempt
				if lastConflict {
					step = min(attempt, conflictSteps)
				}
				wait = backoff(step, e.minWait, e.maxWait)
			}
			staleStart = false
			e.retrying(op, attempt, wait, lastErr)
			if err := sleepCtx(ctx, wait); err != nil {
				continue
			}
			tbl = nil
		}
		start := time.Now()
		loaded := tbl == nil // the attempt builds on the head as the catalog has it now, not a cached one
		if tbl == nil {
			fresh, err := e.cat.LoadTable(ctx, op.ident)
			if err != nil {
				lastErr, lastConflict = err, false
				e.attempted(op, attempt, start, false, err)
				if attempt > 0 {
					e.log.Warn("iceberg: reload before retry failed", "table", op.ident, "what", op.what, "attempt", attempt, "err", err)
				}
				continue
			}
			tbl = e.tables.loaded(fresh)
			if builtOn != "" && builtOn != tbl.MetadataLocation() {
				// The table moved since the build failed (e.g. another writer's expiry deleted a manifest the
				// plan read): a build on the new head is a fresh try, not a repeat of a failing one.
				buildFails = 0
			}
		}
		if op.prove != nil && (unproven != nil || !checked) {
			var base *int64
			if unproven != nil {
				base = *unproven
			}
			switch op.prove(tbl, base, !checked) {
			case outcomeApplied:
				res.table, res.how = tbl, txProven
				return res, nil
			case outcomeUnknown:
				return res, fmt.Errorf("%w: %s: an attempt may have applied and the snapshots since it was built "+
					"were expired before the writer could look (another writer's snapshot expiry); it is not "+
					"committed again: %w", ErrCommitStateUnknown, op.what, lastErr)
			}
			unproven, checked = nil, true
		}
		if op.fenceID != "" {
			if ep := tableEpoch(tbl.Metadata(), op.fenceID); ep > op.epoch {
				e.fenced(op, ep)
				return res, fmt.Errorf("%w: %s: table epoch %d, this writer's %d", ErrFenced, op.what, ep, op.epoch)
			}
		}
		tx, err := op.build(ctx, tbl, attempt)
		var tc table.TableCommit
		if err == nil && tx != nil {
			tc, err = tx.TableCommit()
		}
		if err != nil {
			lastErr, lastConflict = err, false
			e.attempted(op, attempt, start, false, err)
			if op.failed != nil {
				op.failed(false)
			}
			buildFails++
			builtOn = tbl.MetadataLocation()
			// A position moved on a freshly loaded head is the table's answer, not a hiccup: a later head has it
			// moved too. On a cached head it may only be stale: the next attempt reloads.
			if buildFails >= max(op.maxBuilds, 1) || (loaded && errors.Is(err, ErrPositionMoved)) {
				return res, err
			}
			continue
		}
		if tx == nil || len(tc.Updates) == 0 {
			res.table, res.how = tbl, txNothing
			return res, nil
		}
		sendUpdates, err := detachSnapshots(tc.Updates)
		if err != nil { // a bug, not a hiccup: no retry
			if sent {
				return res, fmt.Errorf("%w: %s: %w", ErrCommitStateUnknown, op.what, err)
			}
			return res, err
		}
		meta, loc, err := e.cat.CommitTable(ctx, op.ident, tc.Requirements, sendUpdates)
		cause := e.attempted(op, attempt, start, true, err)
		if err == nil {
			next := e.tables.derive(tbl, meta, loc, e.cat)
			postCommit(ctx, e.log, tbl, next, tc.Updates, e.cat.CatalogType() != catalog.REST)
			if op.committed != nil {
				op.committed(ctx, tbl, next)
			}
			res.table, res.how = next, txCommitted
			return res, nil
		}
		lastErr = err
		lastConflict = cause != ""
		if cause != "" {
			gp.conflicted()
			res.conflicts++
			staleStart = attempt == 0 && op.start != nil
		}
		builtOn = ""
		sent = true
		// Any error from CommitTable may hide an applied commit, a conflict included (a retrying proxy can turn
		// a success into a 409): only a proof on a reloaded table clears it.
		if unproven == nil {
			h := headID(tbl.Metadata(), op.branch)
			unproven = &h
		}
		if op.failed != nil {
			op.failed(true)
		}
	}
}

// conflictSteps is how far conflicts double the wait between attempts (see backoff): the third retry's wait,
// 100 to 200 ms for a run, at most.
const conflictSteps = 3

// gates make the writers of one process take turns on a table after a conflict: a commit call that lost one
// (the table moved under its attempt) holds back the calls that start on the table afterwards until it ends, or
// for maxGateWait at most, so its retry meets no commit of this process. Racing at the catalog alone, a writer
// that commits continuously took every turn from one that reloads and rebuilds after each loss, which then
// stalled for seconds (docs/benchmarks.md, BenchmarkTwoWritersStall). Writers in other processes meet at the
// catalog only, where conflictSteps bounds the waits.
var gates = struct {
	sync.Mutex
	m map[gateKey]*gate
}{m: map[gateKey]*gate{}}

// maxGateWait bounds how long a commit call waits for another's retry (a loser's build may be long: a
// copy-on-write rewrite).
const maxGateWait = time.Second

type gateKey struct {
	cat   catalog.Catalog // the backend, behind the writers' own wrappers
	table string
}

// gate is a table's state in gates.
type gate struct {
	losers int           // calls that lost a conflict and have not ended
	users  int           // calls entered: the entry goes with the last
	clear  chan struct{} // closed when losers drops to 0
}

// gatePass is one commit call's passage through its table's gate (nil: the call takes no part).
type gatePass struct {
	key  gateKey
	g    *gate
	lost bool
}

// enterGate waits, for maxGateWait at most, until no call of this process that lost a conflict on the table is
// still retrying. A run commit of a Router's round takes no part: the round commits several tables at once.
func enterGate(ctx context.Context, cat catalog.Catalog, ident table.Identifier) *gatePass {
	b := redact.Backend(cat)
	if run, _ := ctx.Value(roundRunKey{}).(bool); run || b == nil || !reflect.TypeOf(b).Comparable() {
		return nil
	}
	k := gateKey{cat: b, table: strings.Join(ident, "\x00")}
	gates.Lock()
	g := gates.m[k]
	if g == nil {
		g = &gate{}
		gates.m[k] = g
	}
	g.users++
	var clear chan struct{}
	if g.losers > 0 {
		clear = g.clear
	}
	gates.Unlock()
	if clear != nil {
		t := time.NewTimer(maxGateWait)
		select {
		case <-clear:
		case <-t.C:
		case <-ctx.Done(): // the call's first step sees it
		}
		t.Stop()
	}
	return &gatePass{key: k, g: g}
}

// conflicted marks the call as a loser until it ends: calls that start on the table wait for it.
func (p *gatePass) conflicted() {
	if p == nil || p.lost {
		return
	}
	p.lost = true
	gates.Lock()
	if p.g.losers++; p.g.losers == 1 {
		p.g.clear = make(chan struct{})
	}
	gates.Unlock()
}

// leave ends the call's passage.
func (p *gatePass) leave() {
	if p == nil {
		return
	}
	gates.Lock()
	defer gates.Unlock()
	if p.lost {
		if p.g.losers--; p.g.losers == 0 {
			close(p.g.clear)
		}
	}
	if p.g.users--; p.g.users == 0 {
		delete(gates.m, p.key)
	}
}

// findNonce walks the branch ancestry for the snapshot whose summary holds nonce under key: the proof of a
// transaction that marks its snapshot with a nonce of its own (the fence, a compaction).
func findNonce(meta table.Metadata, branch, key, nonce string) (*table.Snapshot, bool) {
	var found *table.Snapshot
	ancestors(meta, branch, func(s *table.Snapshot) bool {
		if v, _ := summaryProp(s, key); v == nonce {
			found = s
			return true
		}
		return false
	})
	return found, found != nil
}

// nonceProof proves a transaction applied by its nonce. A walk that does not find it means "not applied" even
// when expiry cut it short: the transactions that use it build again from what the table holds, which is
// right whether or not an earlier attempt applied.
func nonceProof(branch, key, nonce string, found func(*table.Snapshot)) func(*table.Table, *int64, bool) outcome {
	return func(tbl *table.Table, _ *int64, _ bool) outcome {
		s, ok := findNonce(tbl.Metadata(), branch, key, nonce)
		if !ok {
			return outcomeNotApplied
		}
		if found != nil {
			found(s)
		}
		return outcomeApplied
	}
}

// txn is the writer's transaction environment for its own transactions (fence, compaction, schema evolution,
// maintenance): its catalog, table cache and logger, the commit timeout, and waits capped at 2 s instead of a
// run's 5 s. These transactions are short and contend with writers that commit in a tight loop: retried up to
// 5 s apart, a takeover next to one lost the race for the branch head for over two minutes (measured: 35
// attempts, 136 s; once for the whole 5 min timeout), and compaction and schema evolution hold the commit queue
// for their 10 attempts.
func (e *writerEnv) txn() *txEnv {
	t := newTxEnv(e.cat, e.tables, e.log, e.timeout)
	t.minWait, t.maxWait = 20*time.Millisecond, 2*time.Second
	t.events = e.events
	if e.retryWaits != nil {
		t.minWait, t.maxWait = e.retryWaits[0], e.retryWaits[1]
	}
	return &t
}

// commitTx commits op on the writer's table and branch, fenced when the writer ID is stable, and makes the
// table it leaves the one the writer and its committer work from. A fenced writer stops: every later call
// returns ErrWriterFailed wrapping ErrFenced (the run commit fails the writer the same way).
func (w *Writer) commitTx(ctx context.Context, op *txOp) (txResult, error) {
	op.ident, op.branch = w.env.ident, w.env.branch
	if w.env.stableID {
		op.fenceID, op.epoch = w.env.id, w.env.epoch
	}
	res, err := w.env.txn().commit(ctx, op)
	if errors.Is(err, ErrFenced) {
		w.pipe.fail(err)
	}
	if err != nil {
		return res, err
	}
	return res, w.install(res.table)
}
