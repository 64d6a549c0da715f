package commit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	icecatalog "github.com/icewriter/iceberg/catalog"
)

// The transaction helper on a real table (an embedded catalog), without a writer's pipeline around it: the
// transaction marks a snapshot with a nonce and sets a property, as the fence does.

// txCatalog injects what a real catalog does not produce on demand: commits that apply and then report an
// error (a lost reply), commits that fail before reaching the table, loads that fail.
type txCatalog struct {
	catalog.Catalog
	mu                         sync.Mutex
	lose, failCommit, failLoad int
}

func (c *txCatalog) take(n *int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if *n == 0 {
		return false
	}
	*n--
	return true
}

func (c *txCatalog) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	if c.take(&c.failLoad) {
		return nil, errors.New("injected: load failed")
	}
	return c.Catalog.LoadTable(ctx, ident)
}

func (c *txCatalog) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
	if c.take(&c.failCommit) {
		return nil, "", errors.New("injected: commit failed")
	}
	meta, loc, err := c.Catalog.CommitTable(ctx, ident, reqs, updates)
	if err == nil && c.take(&c.lose) {
		return nil, "", errors.New("injected: reply lost")
	}
	return meta, loc, err
}

// txFixture is a table and a transaction environment on it, with fast retries.
type txFixture struct {
	env   Env
	cat   *txCatalog
	ident table.Identifier
	// builds counts build calls, committed the committed hook's.
	builds, committed int
}

func newTxFixture(t *testing.T) *txFixture {
	ctx := context.Background()
	base, err := icecatalog.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = base.(catalog.Closer).Close() })
	ident := table.Identifier{"b", "t"}
	if err := base.CreateNamespace(ctx, catalog.NamespaceFromIdent(ident), nil); err != nil {
		t.Fatal(err)
	}
	sc := ice.NewSchema(0, ice.NestedField{ID: 1, Name: "id", Type: ice.PrimitiveTypes.Int64, Required: true})
	if _, err := base.CreateTable(ctx, ident, sc); err != nil {
		t.Fatal(err)
	}
	cat := &txCatalog{Catalog: base}
	env := NewEnv(cat, nil, slog.New(slog.DiscardHandler), time.Minute)
	env.MinWait, env.MaxWait = time.Millisecond, 5*time.Millisecond
	return &txFixture{env: env, cat: cat, ident: ident}
}

func (f *txFixture) load(t *testing.T) *table.Table {
	t.Helper()
	tbl, err := f.cat.Catalog.LoadTable(context.Background(), f.ident)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// nonceKey is the summary key the fixture's transactions mark their snapshot with.
const nonceKey = "icewriter.nonce"

// op sets property key to val in a snapshot that carries a nonce, unless the table has it already.
func (f *txFixture) op(key, val string) *Op {
	nonce := fmt.Sprint(time.Now().UnixNano())
	return &Op{
		Ident: f.ident, Branch: table.MainBranch, What: "set " + key,
		Build: func(ctx context.Context, tbl *table.Table, _ int) (*table.Transaction, error) {
			f.builds++
			if tbl.Properties()[key] == val {
				return nil, nil
			}
			tx := tbl.NewTransaction()
			if err := tx.SetProperties(ice.Properties{key: val}); err != nil {
				return nil, err
			}
			return tx, tx.AddFiles(ctx, nil, ice.Properties{nonceKey: nonce}, true)
		},
		Prove:     NonceProof(table.MainBranch, nonceKey, nonce, nil),
		Committed: func(context.Context, *table.Table, *table.Table) { f.committed++ },
	}
}

// TestTxRetriesOnAMovedHead: an attempt built on a head that moved fails its requirement; the retry reloads,
// builds again and commits.
func TestTxRetriesOnAMovedHead(t *testing.T) {
	f := newTxFixture(t)
	op := f.op("k", "1")
	op.Start = f.load(t) // stale once the next commit lands
	if _, err := f.env.Commit(context.Background(), f.op("other", "1")); err != nil {
		t.Fatal(err)
	}
	f.committed = 0
	res, err := f.env.Commit(context.Background(), op)
	if err != nil || res.How != Committed || res.Attempts != 2 || f.committed != 1 {
		t.Fatalf("commit on a stale head: %+v, %v, committed hooks %d", res, err, f.committed)
	}
	if got := f.load(t).Properties()["k"]; got != "1" {
		t.Fatalf("property k = %q", got)
	}
}

// TestTxLostReplyProven: a commit that applied and lost its reply is proven applied on the reloaded table, and
// neither built nor committed again.
func TestTxLostReplyProven(t *testing.T) {
	f := newTxFixture(t)
	f.cat.lose = 1
	res, err := f.env.Commit(context.Background(), f.op("k", "1"))
	if err != nil || res.How != Proven || res.Attempts != 2 || f.builds != 1 || f.committed != 0 {
		t.Fatalf("lost reply: %+v, %v, builds %d, committed hooks %d", res, err, f.builds, f.committed)
	}
}

// TestTxLostReplyWithoutProofBuildsAgain: without a proof, the retry builds on the reloaded table, which finds
// the work done.
func TestTxLostReplyWithoutProofBuildsAgain(t *testing.T) {
	f := newTxFixture(t)
	f.cat.lose = 1
	op := f.op("k", "1")
	op.Prove = nil
	res, err := f.env.Commit(context.Background(), op)
	if err != nil || res.How != Nothing || f.builds != 2 {
		t.Fatalf("lost reply without a proof: %+v, %v, builds %d", res, err, f.builds)
	}
}

// TestTxFenced: a writer whose ID's epoch in the table is newer than its own builds nothing and gets ErrFenced;
// the epoch's own writer commits.
func TestTxFenced(t *testing.T) {
	f := newTxFixture(t)
	if _, err := f.env.Commit(context.Background(), f.op(EpochPropPrefix+"x", "2")); err != nil {
		t.Fatal(err)
	}
	op := f.op("k", "1")
	op.FenceID, op.Epoch = "x", 1
	before := f.builds
	if _, err := f.env.Commit(context.Background(), op); !errors.Is(err, ErrFenced) || f.builds != before {
		t.Fatalf("fenced: %v, builds %d (want none)", err, f.builds-before)
	}
	op = f.op("k", "1")
	op.FenceID, op.Epoch = "x", 2
	if _, err := f.env.Commit(context.Background(), op); err != nil {
		t.Fatalf("the epoch's own writer: %v", err)
	}
}

// TestTxFencedWhileBuilt: a takeover between the load and the commit moves the branch head, so the attempt
// fails its requirement and the retry finds the newer epoch.
func TestTxFencedWhileBuilt(t *testing.T) {
	f := newTxFixture(t)
	op := f.op("k", "1")
	op.FenceID, op.Epoch = "x", 1
	op.Start = f.load(t)
	if _, err := f.env.Commit(context.Background(), f.op(EpochPropPrefix+"x", "2")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.env.Commit(context.Background(), op); !errors.Is(err, ErrFenced) {
		t.Fatalf("fenced meanwhile: %v", err)
	}
	if _, ok := f.load(t).Properties()["k"]; ok {
		t.Fatal("a fenced transaction committed")
	}
}

// TestTxGivesUp: past its attempts the helper gives up; once an attempt was sent the outcome is unknown
// (ErrCommitStateUnknown), while failed loads alone are a plain give-up.
func TestTxGivesUp(t *testing.T) {
	f := newTxFixture(t)
	f.cat.failCommit = 100
	op := f.op("k", "1")
	op.MaxAttempts = 3
	res, err := f.env.Commit(context.Background(), op)
	if !errors.Is(err, ErrCommitStateUnknown) || res.Attempts != 3 {
		t.Fatalf("sent and failed: %+v, %v; want ErrCommitStateUnknown after 3 attempts", res, err)
	}
	f.cat.failCommit, f.cat.failLoad = 0, 100
	if _, err := f.env.Commit(context.Background(), op); err == nil || errors.Is(err, ErrCommitStateUnknown) {
		t.Fatalf("nothing sent: %v; want a plain give-up", err)
	}
}

// TestTxRetriesOnceAfterASlowFirstAttempt: a first attempt that alone takes longer than the timeout (here any
// attempt does) and fails is retried once: the retry's reload shows it did not apply, and it commits. Failing
// again, the call gives up after those two attempts with ErrCommitStateUnknown.
func TestTxRetriesOnceAfterASlowFirstAttempt(t *testing.T) {
	f := newTxFixture(t)
	f.env.Timeout = time.Nanosecond
	f.cat.failCommit = 1
	res, err := f.env.Commit(context.Background(), f.op("k", "1"))
	if err != nil || res.How != Committed || res.Attempts != 2 {
		t.Fatalf("a first attempt slower than the timeout: %+v, %v; want committed by the second attempt", res, err)
	}
	if got := f.load(t).Properties()["k"]; got != "1" {
		t.Fatalf("property k = %q", got)
	}
	f.cat.failCommit = 100
	res, err = f.env.Commit(context.Background(), f.op("k", "2"))
	if !errors.Is(err, ErrCommitStateUnknown) || res.Attempts != 2 {
		t.Fatalf("every attempt failing: %+v, %v; want ErrCommitStateUnknown after 2 attempts", res, err)
	}
}

// TestTxBuildFailures: a build that keeps failing on one head ends the call after maxBuilds builds (one by
// default), with the build's error.
func TestTxBuildFailures(t *testing.T) {
	f := newTxFixture(t)
	op := f.op("k", "1")
	errBuild := errors.New("build failed")
	op.Build = func(context.Context, *table.Table, int) (*table.Transaction, error) {
		f.builds++
		return nil, errBuild
	}
	op.MaxBuilds = 3
	if _, err := f.env.Commit(context.Background(), op); !errors.Is(err, errBuild) || f.builds != 3 {
		t.Fatalf("failing build: %v after %d builds, want it after 3", err, f.builds)
	}
	f.builds = 0
	op.MaxBuilds = 0
	if _, err := f.env.Commit(context.Background(), op); !errors.Is(err, errBuild) || f.builds != 1 {
		t.Fatalf("failing build without retries: %v after %d builds, want it after 1", err, f.builds)
	}
}
