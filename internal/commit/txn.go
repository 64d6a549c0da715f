package commit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/icewriter/iceberg/internal/redact"
)

// Env commits table transactions through the catalog. Every path that calls CommitTable goes through its
// commit method: a run's commit (CatalogCommitter.Commit), the fence that takes a writer ID over (NewWriter),
// compaction, schema evolution and maintenance. So all of them retry the same way (backoff within the commit
// timeout, a reload before every retry), classify a failed attempt the same way (any error may hide an applied
// commit: only the path's proof, run on the reloaded table, clears it), check fencing on the metadata every
// attempt builds on, and run the same post-commit steps. What differs per path is in its Op.
//
// Transactions are committed with CommitTable directly, not Transaction.Commit, whose internal retry would
// replay a commit a proxy reported as failed after it applied. TableCommit asserts the branch head on every
// transaction, metadata-only ones included, and a fence is a snapshot that moves the head: an attempt built
// before a takeover fails its requirement, and the retry finds the newer epoch.
type Env struct {
	Cat     catalog.Catalog
	Tables  *Tables // the catalog's loads and what commits leave (see Tables)
	Log     *slog.Logger
	Timeout time.Duration // no retry but the first starts later than this after the call began (WithCommitTimeout)
	MinWait time.Duration // the backoff before the first retry; it doubles up to MaxWait (see backoff)
	MaxWait time.Duration
	Report  Reporter // the writer's hooks (nil: none, as for NewCatalogCommitter's)
}

// NewEnv is an Env with a run's waits: 50 ms doubling up to 5 s. A nil tabs starts a Tables of its own.
func NewEnv(cat catalog.Catalog, tabs *Tables, log *slog.Logger, timeout time.Duration) Env {
	if tabs == nil {
		tabs = NewTables()
	}
	return Env{Cat: cat, Tables: tabs, Log: log, Timeout: timeout, MinWait: 50 * time.Millisecond, MaxWait: 5 * time.Second}
}

// Op is one transaction for Env.Commit: the table, fencing, limits and the path's hooks.
type Op struct {
	Ident  table.Identifier
	Branch string
	What   string // names the transaction in errors and logs
	Kind   Kind

	// FenceID is a stable writer ID and Epoch the epoch it holds: an attempt built on metadata whose epoch for
	// FenceID is newer stops with ErrFenced before anything is sent. Empty for random writer IDs (which no one
	// can take over) and for the fence itself.
	FenceID string
	Epoch   int64

	// Start is the table the first attempt builds on; nil loads it from the catalog first.
	Start *table.Table
	// MaxAttempts bounds the attempts besides the timeout (0: the timeout alone). The paths that hold the
	// writer's commit queue for work no row waits on (compaction, schema evolution, maintenance) set it, so
	// that a conflict storm delays the writer's commits by seconds, not by the commit timeout.
	MaxAttempts int
	// MaxBuilds is how many times build may fail on one table head before the call gives up with its error
	// (0 or 1: the first failure is final). A head that moved since makes a failed build a fresh try.
	MaxBuilds int

	// Build stages the transaction on tbl (attempt counts from 0). A nil transaction, or one without updates,
	// means nothing is left to commit: Commit returns Nothing with tbl. An error is a build failure: nothing
	// reached the catalog.
	Build func(ctx context.Context, tbl *table.Table, attempt int) (*table.Transaction, error)
	// Prove establishes on a reloaded table whether an earlier attempt applied after all (its reply lost, or a
	// retrying proxy turned a success into a conflict): base is the head the first attempt that may have
	// applied was built on. With ProveFirst it also runs before the first attempt (first set, base nil), for a
	// transaction an earlier call may have sent already (a coordinator that re-sends a run). Without Prove, a
	// retry simply builds again on the reloaded table: build must then find what is already done (a schema
	// change already made, snapshots already expired).
	Prove      func(tbl *table.Table, base *int64, first bool) Outcome
	ProveFirst bool
	// Failed runs after every failed attempt (sent: it reached the catalog).
	Failed func(sent bool)
	// Committed runs after a successful CommitTable and the update hooks: pre is the table the attempt was
	// built on, next the table the commit left.
	Committed func(ctx context.Context, pre, next *table.Table)
	// Yield, when set, is how long the call waits before its first attempt to give a writer of another process
	// its turn (a run commit: YieldWait).
	Yield func(minWait, maxWait time.Duration) time.Duration
}

// How says how a transaction ended.
type How int

const (
	Committed How = iota // an attempt's CommitTable succeeded
	Proven               // the proof found that an earlier attempt applied
	Nothing              // build found nothing left to commit
)

// Result is what Env.Commit reports.
type Result struct {
	Table     *table.Table // what the commit left; for Proven and Nothing, the table that showed it
	How       How
	Attempts  int // attempts made, including the one that ended the call
	Conflicts int // attempts the catalog rejected because the table moved (Cause)
}

// Commit builds and commits op's transaction until it applies, is proven applied, has nothing left to do, or
// the call gives up: past the timeout or op.MaxAttempts, when ctx ends, on a final build failure, on
// ErrFenced, or when the proof cannot tell. Giving up after any attempt reached the catalog wraps
// ErrCommitStateUnknown: a request the catalog is still processing may land later.
//
// The first retry is made even past the timeout: a first attempt slower than the timeout (a slow catalog, a
// loaded machine) whose reply was a refusal would otherwise stop the writer as "state unknown" although the
// catalog answered, and the retry's reload shows whether it applied (and commits it when it did not).
func (e *Env) Commit(ctx context.Context, op *Op) (Result, error) {
	gp := enterGate(ctx, e.Cat, op.Ident)
	defer gp.leave()
	if op.Yield != nil {
		_ = sleepCtx(ctx, op.Yield(e.MinWait, e.MaxWait)) // the first attempt sees ctx ended
	}
	deadline := time.Now().Add(e.Timeout)
	var res Result
	tbl := op.Start
	var lastErr error
	// unproven is the head the first attempt that may have applied was built on (nil head: an empty table),
	// set from the moment such an attempt was sent until a proof shows that none applied.
	var unproven **int64
	sent := false
	checked := op.Prove == nil || !op.ProveFirst // the proof before the first attempt ran (or is not wanted)
	buildFails := 0
	var builtOn string // metadata location of the last attempt that failed to build
	// staleStart: the first attempt, built on op.start (a table cached from an earlier commit), was rejected
	// because the table had moved since. That is no race with another committer, so the reload follows at once.
	staleStart := false
	lastConflict := false // the last attempt was refused because the table moved (Cause)
	for attempt := 0; ; attempt++ {
		res.Attempts = attempt + 1
		if attempt > 0 {
			if (attempt > 1 && time.Now().After(deadline)) || ctx.Err() != nil || (op.MaxAttempts > 0 && attempt >= op.MaxAttempts) {
				res.Attempts = attempt
				if sent {
					return res, fmt.Errorf("%w: %s: %w", ErrCommitStateUnknown, op.What, lastErr)
				}
				return res, fmt.Errorf("iceberg: %s gave up after %d attempts: %w", op.What, attempt, lastErr)
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
				wait = backoff(step, e.MinWait, e.MaxWait)
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
			fresh, err := e.Cat.LoadTable(ctx, op.Ident)
			if err != nil {
				lastErr, lastConflict = err, false
				e.attempted(op, attempt, start, false, err)
				if attempt > 0 {
					e.Log.Warn("iceberg: reload before retry failed", "table", op.Ident, "what", op.What, "attempt", attempt, "err", err)
				}
				continue
			}
			tbl = e.Tables.Loaded(fresh)
			if builtOn != "" && builtOn != tbl.MetadataLocation() {
				// The table moved since the build failed (e.g. another writer's expiry deleted a manifest the
				// plan read): a build on the new head is a fresh try, not a repeat of a failing one.
				buildFails = 0
			}
		}
		if op.Prove != nil && (unproven != nil || !checked) {
			var base *int64
			if unproven != nil {
				base = *unproven
			}
			switch op.Prove(tbl, base, !checked) {
			case Applied:
				res.Table, res.How = tbl, Proven
				return res, nil
			case Unknown:
				return res, fmt.Errorf("%w: %s: an attempt may have applied and the snapshots since it was built "+
					"were expired before the writer could look (another writer's snapshot expiry); it is not "+
					"committed again: %w", ErrCommitStateUnknown, op.What, lastErr)
			}
			unproven, checked = nil, true
		}
		if op.FenceID != "" {
			if ep := TableEpoch(tbl.Metadata(), op.FenceID); ep > op.Epoch {
				e.fenced(op, ep)
				return res, fmt.Errorf("%w: %s: table epoch %d, this writer's %d", ErrFenced, op.What, ep, op.Epoch)
			}
		}
		tx, err := op.Build(ctx, tbl, attempt)
		var tc table.TableCommit
		if err == nil && tx != nil {
			tc, err = tx.TableCommit()
		}
		if err != nil {
			lastErr, lastConflict = err, false
			e.attempted(op, attempt, start, false, err)
			if op.Failed != nil {
				op.Failed(false)
			}
			buildFails++
			builtOn = tbl.MetadataLocation()
			// A position moved on a freshly loaded head is the table's answer, not a hiccup: a later head has it
			// moved too. On a cached head it may only be stale: the next attempt reloads.
			if buildFails >= max(op.MaxBuilds, 1) || (loaded && errors.Is(err, ErrPositionMoved)) {
				return res, err
			}
			continue
		}
		if tx == nil || len(tc.Updates) == 0 {
			res.Table, res.How = tbl, Nothing
			return res, nil
		}
		sendUpdates, err := DetachSnapshots(tc.Updates)
		if err != nil { // a bug, not a hiccup: no retry
			if sent {
				return res, fmt.Errorf("%w: %s: %w", ErrCommitStateUnknown, op.What, err)
			}
			return res, err
		}
		meta, loc, err := e.Cat.CommitTable(ctx, op.Ident, tc.Requirements, sendUpdates)
		cause := e.attempted(op, attempt, start, true, err)
		if err == nil {
			next := e.Tables.Derive(tbl, meta, loc, e.Cat)
			PostCommit(ctx, e.Log, tbl, next, tc.Updates, e.Cat.CatalogType() != catalog.REST)
			if op.Committed != nil {
				op.Committed(ctx, tbl, next)
			}
			res.Table, res.How = next, Committed
			return res, nil
		}
		lastErr = err
		lastConflict = cause != ""
		if cause != "" {
			gp.conflicted()
			res.Conflicts++
			staleStart = attempt == 0 && op.Start != nil
		}
		builtOn = ""
		sent = true
		// Any error from CommitTable may hide an applied commit, a conflict included (a retrying proxy can turn
		// a success into a 409): only a proof on a reloaded table clears it.
		if unproven == nil {
			h := HeadID(tbl.Metadata(), op.Branch)
			unproven = &h
		}
		if op.Failed != nil {
			op.Failed(true)
		}
	}
}

// A writer that commits continuously wins every race at the catalog against one in another process that
// lost a conflict: the winner builds on the table its own commit left, the loser reloads and rebuilds first, and
// the winner's next commit lands meanwhile. The gates below make writers of one process take turns; across
// processes a writer yields instead: before a run commit, when it made the last yieldStreak or more snapshots
// of the branch in a row and a writer of another process (or a tool) committed on it within yieldWindow, it
// waits longer than a losing retry's longest wait (conflictSteps: 200 to 400 ms for a run), so the other's
// retry lands first. Writers taking turns never yield (a streak of one), a lone writer only for yieldWindow
// after another's commit.
const (
	yieldStreak = 2
	yieldWindow = 10 * time.Second
)

// YieldWait is how long writer id waits before a run commit on branch (0: it does not yield; see
// yieldStreak). local reports whether a writer ID commits from this process, where the gates take turns.
func YieldWait(meta table.Metadata, branch, id string, now time.Time, local func(string) bool, minWait, maxWait time.Duration) time.Duration {
	h := HeadID(meta, branch)
	streak := 0
	for h != nil && streak < 64 {
		snap := meta.SnapshotByID(*h)
		if snap == nil {
			return 0
		}
		if w, _ := SummaryProp(snap, SummaryWriterID); w != id {
			if streak < yieldStreak || now.Sub(time.UnixMilli(snap.TimestampMs)) >= yieldWindow || (w != "" && local(w)) {
				return 0
			}
			return backoff(conflictSteps+1, minWait, maxWait)
		}
		streak++
		h = snap.ParentSnapshotID
	}
	return 0
}

// YieldWindow is how recent another process's commit must be for a writer with a streak to yield (YieldWait).
const YieldWindow = yieldWindow

// localWriters holds the writer IDs that made run commits from this process (one entry an ID, never removed):
// YieldWait leaves their turns to the gates.
var localWriters sync.Map

// NoteLocalWriter records that writer id commits runs from this process.
func NoteLocalWriter(id string) { localWriters.Store(id, struct{}{}) }

// LocalWriter reports whether writer id made run commits from this process (NoteLocalWriter).
func LocalWriter(id string) bool { _, ok := localWriters.Load(id); return ok }

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
	if run, _ := ctx.Value(RoundRunKey{}).(bool); run || b == nil || !reflect.TypeOf(b).Comparable() {
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

// Kind names what a transaction does (the root's CommitKind, an alias).
type Kind string

// KindRun is a run of batches: the rows.
const KindRun Kind = "run"

// Outcome is what a proof establishes about earlier attempts (Op.Prove).
type Outcome int

const (
	NotApplied Outcome = iota // no earlier attempt applied: build and commit again
	Applied                   // an earlier attempt applied
	Unknown                   // the proof cannot tell (the snapshots it needs were expired)
)

// Reporter receives what Commit observes, for the writer's hooks. attempt counts from 0.
type Reporter interface {
	// Attempted reports an attempt that started at start: sent when it reached the catalog's commit, err nil
	// when it applied, cause the conflict err is ("": none).
	Attempted(op *Op, attempt int, start time.Time, sent bool, cause ConflictCause, err error)
	// Retrying reports the retry that starts after wait, attempt being the failed one's number plus one.
	Retrying(op *Op, attempt int, wait time.Duration, cause ConflictCause, err error)
	// Fenced reports that op found its writer ID taken over: the table holds epoch tableEpoch for it.
	Fenced(op *Op, tableEpoch int64)
}

// attempted reports an attempt to e.Report and returns the conflict err is ("": none, or not sent).
func (e *Env) attempted(op *Op, attempt int, start time.Time, sent bool, err error) ConflictCause {
	var cause ConflictCause
	if sent {
		cause = Cause(err)
	}
	if e.Report != nil {
		e.Report.Attempted(op, attempt, start, sent, cause, err)
	}
	return cause
}

// retrying reports the retry that starts after wait: a Warn line with the failure's cause, and e.Report. The
// error is masked by the logger.
func (e *Env) retrying(op *Op, attempt int, wait time.Duration, err error) {
	cause := Cause(err)
	e.Log.Warn("iceberg: commit attempt failed; retrying", "table", op.Ident, "what", op.What, "attempt", attempt,
		"cause", retryCause(cause), "wait", wait, "err", err)
	if e.Report != nil {
		e.Report.Retrying(op, attempt, wait, cause, err)
	}
}

// retryCause names why an attempt failed in a log line: the conflict, or "error" (its err says which).
func retryCause(c ConflictCause) string {
	if c == "" {
		return "error"
	}
	return "conflict: " + string(c)
}

// fenced reports that op found its writer ID taken over.
func (e *Env) fenced(op *Op, tableEpoch int64) {
	if e.Report != nil {
		e.Report.Fenced(op, tableEpoch)
	}
}

// RoundRunKey marks the context of a gated pipeline's run commit (a Router's round, set at the root): its
// CommitTable joins the round, so it takes no part in the table's gate.
type RoundRunKey struct{}

func backoff(attempt int, minWait, maxWait time.Duration) time.Duration {
	d := minWait << min(attempt-1, 16)
	if d > maxWait || d <= 0 {
		d = maxWait
	}
	// Equal jitter, a wait in [d/2, d]: concurrent writers that collided spread out.
	return d/2 + rand.N(d/2+1)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
