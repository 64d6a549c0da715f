//go:build integration

package postgres_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/postgres"
)

// TestPipelineChild is the pipeline process the kill tests start and kill -9 (it runs only when they set
// PG17_CHILD_DSN). It prints each event and each commit to stdout, one line each, and runs until killed or
// interrupted. With PG17_CHILD_HOLD=1 its snapshot stops at the first chunk copied after a commit of rows (one
// copy worker: the event is called on it) and says "EVENT hold": a kill then lands in the middle of the
// snapshot however fast or loaded the machine, with part of it committed.
func TestPipelineChild(t *testing.T) {
	dsn := os.Getenv("PG17_CHILD_DSN")
	if dsn == "" {
		t.Skip("started by the kill tests only")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cat := openCatalog(t, os.Getenv("PG17_CHILD_CATALOG"))
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf(format+"\n", args...)
	}
	hold := os.Getenv("PG17_CHILD_HOLD") == "1"
	var committed atomic.Bool
	err := postgres.Run(ctx, cat, postgres.Config{
		DSN: dsn, Slot: os.Getenv("PG17_CHILD_SLOT"), ChunkPages: 32, Workers: 1, BatchRows: 250,
		FlushInterval: 100 * time.Millisecond,
		// Bulk files of 64 KiB: the snapshot's files close, and their rows commit, while it runs (at the
		// default 512 MiB target its rows would all commit at its end, leaving nothing to kill it in the middle of).
		RouterOptions: []iceberg.RouterOption{iceberg.WithBulkTargetFileSize(64 << 10)},
		WriterOptions: []iceberg.Option{iceberg.WithMemoryLimit(8 << 20),
			iceberg.WithOnCommit(func(ci iceberg.CommitInfo) {
				say("COMMIT %d", ci.Rows)
				if ci.Rows > 0 {
					committed.Store(true)
				}
			})},
		OnEvent: func(e postgres.Event) {
			say("EVENT %s %s %d %d", e.Kind, e.Table, e.Rows, e.LSN)
			if e.Kind == "chunk" && hold && committed.Load() {
				say("EVENT hold")
				<-ctx.Done()
			}
		},
	})
	if err != nil && ctx.Err() == nil {
		t.Fatal(err)
	}
}

// child is a running pipeline process: its stdout lines arrive on lines (closed when it exits).
type child struct {
	cmd   *exec.Cmd
	lines chan string
	kick  chan struct{}
	exit  chan error
}

func startChild(t *testing.T, dsn, catalogURI, slot string, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestPipelineChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), "PG17_CHILD_DSN="+dsn, "PG17_CHILD_CATALOG="+catalogURI, "PG17_CHILD_SLOT="+slot)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, lines: make(chan string, 1<<16), kick: make(chan struct{}, 1), exit: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if l := sc.Text(); strings.HasPrefix(l, "EVENT ") || strings.HasPrefix(l, "COMMIT ") {
				c.lines <- l
				select {
				case c.kick <- struct{}{}:
				default:
				}
			}
		}
		close(c.lines)
		c.exit <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	return c
}

// kill9 kills the child with SIGKILL and waits for it to be gone.
func (c *child) kill9(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for range c.lines {
	}
	<-c.exit
}

// until reads the child's lines until match returns true; a child that exits first fails the test.
func (c *child) until(t *testing.T, what string, match func(line string) bool) {
	t.Helper()
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				t.Fatalf("pipeline exited before %s: %v", what, <-c.exit)
			}
			if match(l) {
				return
			}
		case <-timeout:
			t.Fatalf("no %s", what)
		}
	}
}

func TestKillDuringSnapshotAndLiveResumesExactly(t *testing.T) {
	ctx := context.Background()
	dsn, slot := sourceDB(t)
	execSQL(t, dsn, itemsDDL)
	items := model{}
	for lo := int64(1); lo <= 30000; lo += 2000 {
		insertItems(t, dsn, items, lo, lo+2000, 0)
	}
	uri := catalogURI(t)
	cat := openCatalog(t, uri)
	itemsID := table.Identifier{"public", "items"}
	read := func() (model, error) { return readTable(ctx, cat, itemsID, "id") }

	// 1. kill -9 in the middle of the snapshot: the child holds its copy once it committed rows.
	c := startChild(t, dsn, uri, slot, "PG17_CHILD_HOLD=1")
	c.until(t, "a commit during the snapshot", func(l string) bool {
		if strings.HasPrefix(l, "EVENT snapshot-done") {
			t.Fatal("the snapshot finished before the kill: copy more rows")
		}
		return l == "EVENT hold"
	})
	c.kill9(t)
	got, err := read()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("killed during the snapshot with %d of %d rows committed", len(got), len(items))
	if len(got) == 0 || len(got) >= len(items) {
		t.Fatalf("%d rows committed at the kill: want part of the snapshot", len(got))
	}

	// Changes while the pipeline is down: updates (new row versions land on other pages), a key change,
	// deletes, inserts.
	for id := int64(5); id <= 30000; id += 97 {
		updateItem(t, dsn, items, id, 1)
	}
	execSQL(t, dsn, "UPDATE items SET id = 200000 + id WHERE id IN (7, 29999)")
	for _, id := range []int{7, 29999} {
		k, nk := strconv.Itoa(id), strconv.Itoa(200000+id)
		items[nk] = items[k]
		items[nk]["id"] = nk
		delete(items, k)
	}
	execSQL(t, dsn, "DELETE FROM items WHERE id % 101 = 3")
	for k := range items {
		if id, _ := strconv.Atoi(k); id%101 == 3 {
			delete(items, k)
		}
	}
	insertItems(t, dsn, items, 40000, 40500, 2)

	// 2. The restart resumes the snapshot (only the chunks not recorded), then goes live; kill -9 it while
	// single-row transactions stream in.
	c = startChild(t, dsn, uri, slot)
	resumed := false
	c.until(t, "the live phase", func(l string) bool {
		resumed = resumed || strings.HasPrefix(l, "EVENT snapshot-resume public.items")
		return strings.HasPrefix(l, "EVENT live-start")
	})
	if !resumed {
		t.Fatal("the restart did not resume the snapshot")
	}
	killed := make(chan struct{})
	go func() { // the kill, at the third confirmed commit (no t.Fatal off the test goroutine)
		defer close(killed)
		confirms := 0
		for l := range c.lines {
			if strings.HasPrefix(l, "EVENT confirmed") {
				if confirms++; confirms == 3 {
					_ = c.cmd.Process.Signal(syscall.SIGKILL)
				}
			}
		}
	}()
	for i, id := 0, int64(11); i < 300; i, id = i+1, id+37 {
		if _, ok := items[strconv.FormatInt(id, 10)]; ok {
			updateItem(t, dsn, items, id, 3)
		}
	}
	<-killed
	<-c.exit
	execSQL(t, dsn, "ALTER TABLE items ADD COLUMN extra text", "UPDATE items SET extra = 'x' || id WHERE id < 100")
	for k, row := range items {
		row["extra"] = "NULL"
		if id, _ := strconv.Atoi(k); id < 100 {
			row["extra"] = "x" + k
		}
	}

	// 3. The last restart catches up: the table must equal the model exactly (no key twice, none missing).
	c = startChild(t, dsn, uri, slot)
	converge(t, read, items, c.kick, nil)
	_ = c.cmd.Process.Signal(os.Interrupt)
	for range c.lines {
	}
	if err := <-c.exit; err != nil {
		t.Fatalf("pipeline after interrupt: %v", err)
	}
}
