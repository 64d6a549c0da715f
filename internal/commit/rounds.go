package commit

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

	"github.com/icewriter/iceberg/internal/redact"
)

// Rounds is the router's commit rounds' state: the run commits that joined the round in progress.
type Rounds struct {
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
	// OnSent, when set before the first round, hears of each send: the tables, whether they went as one
	// atomic commit, how long it took and the first table's error.
	OnSent func(tables []table.Identifier, atomic bool, d time.Duration, err error)
}

// sent reports a send of a round (OnSent).
func (rd *Rounds) sent(arrivals []*arrival, whole bool, start time.Time) {
	if rd.OnSent == nil {
		return
	}
	var tables []table.Identifier
	var err error
	for _, a := range arrivals {
		tables = append(tables, a.commit.Identifier)
		if err == nil && a.err != nil {
			err = a.err
		}
	}
	slices.SortFunc(tables, func(a, b table.Identifier) int { return strings.Compare(IdentKey(a), IdentKey(b)) })
	rd.OnSent(tables, whole, time.Since(start), err)
}

// Unsupported reports whether the catalog refused multi-table commits.
func (rd *Rounds) Unsupported() bool {
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
	rd *Rounds
}

// CommitTable joins the round in progress when ctx marks a run commit, else commits alone.
func (c *roundCatalog) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
	if run, _ := ctx.Value(RoundRunKey{}).(bool); !run {
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

// RoundMember is a table of a round: its pipeline and the sequence number the round commits up to.
type RoundMember struct {
	Ident  table.Identifier
	Pipe   RoundPipe
	Target int64
}

// RoundPipe is a member's pipeline as a round drives it: the round waits until its batches up to the target
// are staged, releases them to its commit loop, and waits until it committed them (or stopped).
type RoundPipe interface {
	// WaitStaged waits until every batch up to target is encoded and uploaded, and reports whether they all
	// are (false: the pipeline failed or closed meanwhile).
	WaitStaged(target int64) bool
	// ReleaseTo lets the commit loop commit up to target.
	ReleaseTo(target int64)
	// RoundDone reports whether the pipeline will commit nothing more up to target (it did, or it stopped),
	// and otherwise returns the channel its next change closes.
	RoundDone(target int64) (bool, <-chan struct{})
}

// Drive waits for the members' run commits and sends them, until every member is done.
func (rd *Rounds) Drive(ctx context.Context, members []RoundMember) {
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
func (rd *Rounds) gather(members []RoundMember) ([]*arrival, bool) {
	for {
		rd.mu.Lock()
		joined := map[string]bool{}
		for _, a := range rd.arrivals {
			joined[IdentKey(a.commit.Identifier)] = true
		}
		wake := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(rd.changed)}}
		rd.mu.Unlock()
		waiting, open := false, false
		for _, m := range members {
			done, ch := m.Pipe.RoundDone(m.Target)
			if done {
				continue
			}
			open = true
			if !joined[IdentKey(m.Ident)] {
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
func (rd *Rounds) send(ctx context.Context, arrivals []*arrival) {
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

// Begin opens a round: run commits join it from now on.
func (rd *Rounds) Begin() {
	rd.mu.Lock()
	rd.active = true
	rd.mu.Unlock()
}

// End closes the round; a run commit that joined after the last send (its writer stopped from outside) is sent
// now, so that none waits forever.
func (rd *Rounds) End(ctx context.Context) {
	rd.mu.Lock()
	rd.active = false
	late := rd.arrivals
	rd.arrivals = nil
	rd.mu.Unlock()
	if len(late) > 0 {
		rd.send(ctx, late)
	}
}

// NewRounds sets up commit rounds over cat when it commits several tables atomically and perTable is off:
// the writers' catalog and the round state; nil when the router commits table by table.
func NewRounds(cat icecatalog.Catalog, log *slog.Logger, timeout time.Duration) (*Rounds, icecatalog.Catalog) {
	masked := redact.WrapCatalog(cat, nil)
	tc, ok := masked.(icecatalog.TransactionalCatalog)
	if !ok {
		return nil, masked
	}
	log = redact.Logger(log, redact.RedactorOf(masked)) // a refusal may quote the server
	rd := &Rounds{cat: masked, tc: tc, log: log, timeout: timeout, changed: make(chan struct{})}
	// The writers' catalog is masked as the router's is (same redactor), so NewWriter keeps it as it is.
	return rd, redact.WrapCatalog(&roundCatalog{Catalog: masked, rd: rd}, redact.RedactorOf(masked))
}

// Multi counts the multi-table commits that applied.
func (rd *Rounds) Multi() int64 { return rd.multi.Load() }
