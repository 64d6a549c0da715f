package maintain

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
)

// TestCompactorOnePassAtATime: the runner refuses a pass while one runs, and passDone follows the running pass;
// stop cancels a running pass, waits for it and for the cleanups, and the runner then starts nothing.
func TestCompactorOnePassAtATime(t *testing.T) {
	c := newCompactor(slog.New(slog.DiscardHandler), table.Identifier{"db", "t"})
	select {
	case <-c.passDone():
	default:
		t.Fatal("passDone of an idle runner must be closed")
	}
	started := make(chan struct{})
	if !c.start("test", func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	}) {
		t.Fatal("an idle runner must start a pass")
	}
	<-started
	if c.start("test", func(context.Context) error { return nil }) {
		t.Fatal("a second pass started while one runs")
	}
	done := c.passDone()
	cleaned := make(chan struct{})
	c.spawn(func(ctx context.Context) {
		if ctx.Err() != nil {
			t.Error("a cleanup's context must not be cancelled by stop")
		}
		time.Sleep(10 * time.Millisecond)
		close(cleaned)
	})
	c.stop()
	select {
	case <-done:
	default:
		t.Fatal("stop returned before the pass ended")
	}
	select {
	case <-cleaned:
	default:
		t.Fatal("stop returned before the cleanup ended")
	}
	if c.start("test", func(context.Context) error { return nil }) {
		t.Fatal("a stopped runner started a pass")
	}
	ran := false
	c.spawn(func(context.Context) { ran = true })
	c.stop()
	if ran {
		t.Fatal("a stopped runner ran a cleanup")
	}
}
