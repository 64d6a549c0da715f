package kafka_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/catalog"
	"github.com/icewriter/iceberg/kafka"
)

// memberEnv holds a member process's spec (JSON): the test binary runs as that member instead of its tests.
const memberEnv = "ICEWRITER_KAFKA_MEMBER"

// memberSpec is what a member process runs: the sink's config in plain data.
type memberSpec struct {
	Brokers        []string          `json:"brokers"`
	Catalog        string            `json:"catalog"` // a catalog.Open URI
	CatalogProps   map[string]string `json:"catalog-props,omitempty"`
	Table          []string          `json:"table"`
	WriterID       string            `json:"writer-id"`
	Upsert         bool              `json:"upsert,omitempty"`
	MaxPoll        int               `json:"max-poll"`
	FlushInterval  time.Duration     `json:"flush-interval"`
	SessionTimeout time.Duration     `json:"session-timeout"`
	// Report, when set, is a file the member writes its writer's counters to (memberReport) when it ends.
	Report string `json:"report,omitempty"`
}

// memberReport is what a member process reports when it ends gracefully.
type memberReport struct {
	Commits   int64 `json:"commits"`
	Conflicts int64 `json:"conflicts"`
	Rows      int64 `json:"rows"`
	// CommitNanos is the sum of the commits' durations (forming the run to the commit's return, retries
	// included); AppliedNanos the sum of the durations of the attempts that applied (one per commit: build and
	// catalog commit), Attempts the run attempts in all.
	CommitNanos  int64 `json:"commit-nanos"`
	AppliedNanos int64 `json:"applied-nanos"`
	Attempts     int64 `json:"attempts"`
}

func TestMain(m *testing.M) {
	if spec := os.Getenv(memberEnv); spec != "" {
		os.Exit(runMember(spec))
	}
	os.Exit(m.Run())
}

// counters is a hook that adds up a member's commits.
type counters struct {
	mu sync.Mutex
	r  memberReport
}

func (c *counters) OnCommitted(ci iceberg.CommitInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.r.Commits++
	c.r.Conflicts += int64(ci.Conflicts)
	c.r.Rows += ci.Rows
	c.r.CommitNanos += int64(ci.Duration)
}

func (c *counters) OnCommitAttempt(a iceberg.CommitAttempt) {
	if a.Kind != iceberg.KindRun {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.r.Attempts++
	if a.Err == nil {
		c.r.AppliedNanos += int64(a.Duration)
	}
}

// runMember is a member process: it consumes until SIGTERM, then leaves the group gracefully (exit 0). SIGKILL
// ends it without leaving the group, as a crash does.
func runMember(specJSON string) int {
	var spec memberSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "member spec:", err)
		return 2
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	cat, err := catalog.OpenWithProperties(ctx, spec.Catalog, spec.CatalogProps)
	if err != nil {
		fmt.Fprintln(os.Stderr, "catalog:", err)
		return 1
	}
	var c counters
	s, err := kafka.New(ctx, kafka.Config{
		Brokers: spec.Brokers, Group: group, Topics: []string{topic},
		Catalog: cat, Table: table.Identifier(spec.Table), WriterID: spec.WriterID, Metadata: meta,
		MaxPollRecords: spec.MaxPoll, Upsert: spec.Upsert,
		WriterOptions: []iceberg.Option{iceberg.WithFlushInterval(spec.FlushInterval), iceberg.WithHooks(&c)},
		ClientOptions: []kgo.Opt{kgo.FetchMaxWait(100 * time.Millisecond), kgo.ClientID(spec.WriterID),
			kgo.SessionTimeout(spec.SessionTimeout), kgo.HeartbeatInterval(spec.SessionTimeout / 10),
			kgo.RebalanceTimeout(2 * spec.SessionTimeout)},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "sink:", err)
		return 1
	}
	if err := s.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "run:", err)
		return 1
	}
	if spec.Report != "" {
		c.mu.Lock()
		data, _ := json.Marshal(c.r)
		c.mu.Unlock()
		if err := os.WriteFile(spec.Report, data, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "report:", err)
			return 1
		}
	}
	return 0
}

// lockedBuffer collects a process's output.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// process is a member process started by the test.
type process struct {
	t    testing.TB
	id   string
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan error // Wait's result
}

// spawn starts this test binary as a member process with spec.
func spawn(t testing.TB, spec memberSpec) *process {
	t.Helper()
	data, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), memberEnv+"="+string(data))
	p := &process{t: t, id: spec.WriterID, cmd: cmd, out: &lockedBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("member %s output:\n%s", p.id, p.out.String())
		}
	})
	return p
}

// kill ends the process with SIGKILL: no LeaveGroup, no last commit.
func (p *process) kill() {
	p.t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		p.t.Fatal(err)
	}
	<-p.done
}

// stop ends the process with SIGTERM and fails unless it ended gracefully.
func (p *process) stop(ctx context.Context) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatal(err)
	}
	select {
	case err := <-p.done:
		if err != nil {
			p.t.Fatalf("member %s: %v\n%s", p.id, err, p.out.String())
		}
	case <-ctx.Done():
		p.t.Fatalf("member %s did not stop\n%s", p.id, p.out.String())
	}
}

// spec is the harness's member spec for a member process with writer ID id.
func (h *harness) spec(id string) memberSpec {
	return memberSpec{Brokers: h.cluster.ListenAddrs(), Catalog: h.be.uri, CatalogProps: h.be.props, Table: h.ident, WriterID: id,
		Upsert: h.keys > 0, MaxPoll: 100, FlushInterval: 20 * time.Millisecond, SessionTimeout: time.Second}
}

// TestSinkMemberProcesses runs the group as member processes (this test binary, re-executed) against the
// cluster in the test: three members start; one is killed with SIGKILL while records flow (it leaves no
// LeaveGroup: the others take its partitions once its session times out, resuming from the table); it is
// restarted with the same writer ID and rejoins; all stop gracefully. In append mode the table holds every
// produced record exactly once; in upsert mode (identifier field id, a key in the value that also picks the
// partition) it holds the last record of each key, once. Either way each partition's position is its end.
func TestSinkMemberProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	memberProcesses(t, func(t *testing.T) (backend, table.Identifier) {
		return embedded(t), table.Identifier{"kafka", "events"}
	})
}

// memberProcesses runs TestSinkMemberProcesses's scenario, in append then upsert mode, on the table open names.
func memberProcesses(t *testing.T, open func(t *testing.T) (backend, table.Identifier)) {
	for _, mode := range []string{"append", "upsert"} {
		t.Run(mode, func(t *testing.T) {
			be, ident := open(t)
			var h *harness
			if mode == "upsert" {
				h = newHarnessOn(t, be, ident, iceberg.IdentifierFields("id"))
				h.keys = 64
			} else {
				h = newHarnessOn(t, be, ident)
			}
			const batch = 300
			h.produce(batch)
			var ms [3]*process
			for i := range ms {
				ms[i] = spawn(t, h.spec(fmt.Sprintf("member-%d", i)))
			}
			h.waitStable(3)
			h.produce(batch)
			h.waitCommitted(0.5)

			h.produce(batch)
			ms[1].kill() // mid-stream: records polled, some not committed
			h.produce(batch)
			h.waitStable(2) // after member-1's session timed out
			h.produce(batch)
			h.waitCommitted(0.8)

			ms[1] = spawn(t, h.spec("member-1")) // restarted: same writer ID, fences what the killed one left
			h.waitStable(3)
			h.produce(batch)
			h.waitCommitted(1)
			for _, m := range ms {
				m.stop(h.ctx)
			}
			h.check()
		})
	}
}
