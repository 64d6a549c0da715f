package iceberg_test

import (
	"context"
	"flag"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
)

// Package setup of the external tests: log levels, the seeds of the random tests, a logger that records, and
// must.

// TestMain keeps the writers' Info lines (one per commit) out of the output of tests and benchmarks; the tests
// of what is logged give their writers loggers of their own.
//
// Parallel tests: a test calls t.Parallel() unless it sets a package hook (resolveHash, changes.Hash,
// testHook*), measures memory, time or fairness between writers, or stalls storage (holding a writer's
// background pass is that writer's option, WithHoldRewritesForTest). Go runs the parallel ones only after every
// other test of the package has ended, so they never overlap the tests that must run alone. They spend much of
// their time waiting (commits, fsyncs, flush intervals, child processes), so TestMain runs twice GOMAXPROCS of
// them at a time unless -parallel is given, which keeps two cores busy where the default (GOMAXPROCS) left them
// idle about a third of the time (docs/benchmarks.md, "The hermetic suite's time").
func TestMain(m *testing.M) {
	slog.SetLogLoggerLevel(slog.LevelWarn)
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", strconv.Itoa(2*runtime.GOMAXPROCS(0))); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}

// seedFlag pins the seed of the random tests that draw one per run (runSeed).
var seedFlag = flag.Uint64("seed", 0, "random tests (runSeed): the seed to use (0: a new one each run, logged)")

// runSeed returns the seed of a random test: -seed when given, else one drawn for this run, so that runs cover
// different operation sequences where a fixed seed would repeat one. It logs the seed, and on failure how to
// rerun with it. Only tests whose assertions hold for every seed use it.
func runSeed(t testing.TB) uint64 {
	t.Helper()
	s := *seedFlag
	if s == 0 {
		s = rand.Uint64()
	}
	t.Logf("seed %d", s)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("rerun with go test -run '^%s$' -seed=%d", t.Name(), s)
		}
	})
	return s
}

// must fails the test on err.
func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// logRecords collects the records of a logger (WithLogger(slog.New(l))) for a test to look through.
type logRecords struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }

func (l *logRecords) WithAttrs([]slog.Attr) slog.Handler { return l }

func (l *logRecords) WithGroup(string) slog.Handler { return l }

func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r.Clone())
	return nil
}

// errs returns the errors logged with message msg (attribute "err").
func (l *logRecords) errs(msg string) []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []error
	for _, r := range l.recs {
		if r.Message != msg {
			continue
		}
		r.Attrs(func(a slog.Attr) bool {
			if err, ok := a.Value.Any().(error); ok && a.Key == "err" {
				out = append(out, err)
			}
			return true
		})
	}
	return out
}
