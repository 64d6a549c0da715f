package iceberg_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/seed"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// childProcess is this test binary running the test named test as a child process, with the folder dir.
func childProcess(t testing.TB, dir, test string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.v")
	cmd.Env = append(append(os.Environ(), "ICEWRITER_CHILD_DIR="+dir), env...)
	return cmd
}

// startChild starts a child process (childProcess) whose standard input stays open until the test ends (the
// child waits on it: it ends if this process does), and returns its standard output and what it writes to
// standard error.
func startChild(t testing.TB, child *exec.Cmd) (stdout io.Reader, stderr *strings.Builder) {
	t.Helper()
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stdin.Close() })
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr = new(strings.Builder)
	child.Stderr = stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	return out, stderr
}

// killChild kills a child process and waits for it to end.
func killChild(t testing.TB, child *exec.Cmd) {
	t.Helper()
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
}

// TestMultiProcessWriters: two processes with distinct writer IDs append to one table in a shared SQLite
// catalog at the same time; every row lands once.
func TestMultiProcessWriters(t *testing.T) {
	t.Parallel() // see TestMain
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	ctx := context.Background()
	cat := openCatalogAt(t, filepath.Join(dir, "catalog.db"))
	ident := table.Identifier{"procs", "events"}
	createTable(t, ctx, cat, ident, seed.Schema)
	var cmds []*exec.Cmd
	for i := 0; i < 2; i++ {
		cmd := childProcess(t, dir, "TestWriterChild", fmt.Sprintf("ICEWRITER_CHILD_ID=p%d", i), fmt.Sprintf("ICEWRITER_CHILD_FIRST=%d", i*4000),
			"ICEWRITER_CHILD_ROWS=4000")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("child: %v", err)
		}
	}
	counts, _ := readRows(t, cat, ident)
	assertIDs(t, counts, 0, 8000)
	cat.(icecatalog.Closer).Close()
}

// TestFencingAcrossProcesses: a process keeps writing with writer ID "job"; the test opens a writer with the same
// ID; the older process's next commit fails with ErrFenced, and nothing it accepted after the takeover lands.
func TestFencingAcrossProcesses(t *testing.T) {
	t.Parallel() // see TestMain
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	ctx := context.Background()
	cat := openCatalogAt(t, filepath.Join(dir, "catalog.db"))
	ident := table.Identifier{"procs", "events"}
	createTable(t, ctx, cat, ident, seed.Schema)
	zombie := childProcess(t, dir, "TestWriterChild", "ICEWRITER_CHILD_ID=job", "ICEWRITER_CHILD_FIRST=0", "ICEWRITER_CHILD_ROWS=100000000",
		"ICEWRITER_CHILD_FLUSH=1")
	// Take over once the older process has committed 1,000 rows, as it reports after each Flush: a takeover
	// before its NewWriter would make it the newer one, and it would write its 100,000,000 rows unfenced (a
	// fixed wait, on a starved machine, could end before a -race child had started).
	out := watchOutput(t, zombie, func(line string) bool {
		n, ok := strings.CutPrefix(line, childCommittedPrefix)
		rows, _ := strconv.Atoi(n)
		return ok && rows >= 1000
	})
	if err := zombie.Start(); err != nil {
		t.Fatal(err)
	}
	if !out.waitMatch() {
		_ = zombie.Wait()
		t.Fatalf("the older process ended before it committed 1,000 rows:\n%s", out)
	}
	newer, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithWriterID("job"), iceberg.WithQuickRetriesForTest())
	if err != nil {
		t.Fatal(err)
	}
	takeover := newer.Table().CurrentSnapshot().SnapshotID
	out.drain() // Wait closes the pipe: read it to its end first
	err = zombie.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("the older process should stop with ErrFenced (exit 3), got %v:\n%s", err, out.String())
	}
	_ = newer.Close(ctx)
	// Nothing committed by the older process after the takeover snapshot.
	tbl := tabletest.Load(t, cat, ident)
	for s := tbl.CurrentSnapshot(); s != nil && s.SnapshotID != takeover; {
		if s.Summary.Properties["icewriter.writer-id"] == "job" && s.Summary.Properties["icewriter.epoch"] == "1" {
			t.Fatalf("snapshot %d committed by the fenced process after the takeover", s.SnapshotID)
		}
		if s.ParentSnapshotID == nil {
			break
		}
		s = tbl.Metadata().SnapshotByID(*s.ParentSnapshotID)
	}
	counts, _ := readRows(t, cat, ident)
	for id, n := range counts {
		if n != 1 {
			t.Fatalf("id %d appears %d times", id, n)
		}
	}
}

// childCommittedPrefix starts the line TestWriterChild prints after each Flush (ICEWRITER_CHILD_FLUSH=1),
// followed by the rows it has committed.
const childCommittedPrefix = "committed rows: "

// childOutput collects a child process's output and tells when a line of it matched.
type childOutput struct {
	mu      sync.Mutex
	text    strings.Builder
	matched chan struct{} // closed at the first line match is true of
	done    chan struct{} // closed when the output ended (the child exited)
}

// watchOutput routes cmd's stdout and stderr into a childOutput that watches for a line match is true of; call
// it before cmd.Start.
func watchOutput(t *testing.T, cmd *exec.Cmd, match func(line string) bool) *childOutput {
	t.Helper()
	pr, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	o := &childOutput{matched: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(o.done)
		sc := bufio.NewScanner(pr)
		for found := false; sc.Scan(); {
			o.mu.Lock()
			o.text.WriteString(sc.Text() + "\n")
			o.mu.Unlock()
			if !found && match(sc.Text()) {
				found = true
				close(o.matched)
			}
		}
	}()
	return o
}

// waitMatch waits for a matching line (true) or the end of the output without one (false).
func (o *childOutput) waitMatch() bool {
	select {
	case <-o.matched:
		return true
	case <-o.done:
		select {
		case <-o.matched:
			return true
		default:
			return false
		}
	}
}

// drain waits for the end of the output.
func (o *childOutput) drain() { <-o.done }

func (o *childOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.text.String()
}

// TestWriterChild is the process the multi-process tests start.
func TestWriterChild(t *testing.T) {
	dir := os.Getenv("ICEWRITER_CHILD_DIR")
	if dir == "" {
		t.Skip("run by the multi-process tests")
	}
	ctx := context.Background()
	cat := openCatalogAt(t, filepath.Join(dir, "catalog.db"))
	first, _ := strconv.ParseInt(os.Getenv("ICEWRITER_CHILD_FIRST"), 10, 64)
	rows, _ := strconv.Atoi(os.Getenv("ICEWRITER_CHILD_ROWS"))
	flushEach := os.Getenv("ICEWRITER_CHILD_FLUSH") == "1"
	w, err := iceberg.NewWriter(ctx, cat, table.Identifier{"procs", "events"},
		iceberg.WithWriterID(os.Getenv("ICEWRITER_CHILD_ID")), iceberg.WithFlushRows(500))
	if err != nil {
		t.Fatal(err)
	}
	g := seed.New(first, uint64(first))
	for n := 0; n < rows; n += 250 {
		rec := g.Batch(250)
		err := w.Write(ctx, rec)
		rec.Release()
		if err == nil && flushEach {
			if err = w.Flush(ctx); err == nil {
				fmt.Printf("%s%d\n", childCommittedPrefix, n+250)
			}
		}
		if errors.Is(err, iceberg.ErrFenced) {
			fmt.Println("fenced:", err)
			os.Exit(3)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
