package iceberg

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// heldLoadCatalog holds the first LoadTable of its table until release is closed, after closing entered.
type heldLoadCatalog struct {
	icecatalog.Catalog
	ident            table.Identifier
	once             sync.Once
	entered, release chan struct{}
}

func (c *heldLoadCatalog) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	if slices.Equal(ident, c.ident) {
		c.once.Do(func() {
			close(c.entered)
			<-c.release
		})
	}
	return c.Catalog.LoadTable(ctx, ident)
}

// TestRouterWriteWaitingOnOpenCreates: a Write that arrives while an Open of the same missing table is under
// way (a Kafka member resuming its partitions opens every known table while its first records are written)
// waits for that open, which finds no table and may not create one; the Write then creates the table itself
// and its rows are there, where it used to fail with "table does not exist".
func TestRouterWriteWaitingOnOpenCreates(t *testing.T) {
	ctx := context.Background()
	ident := table.Identifier{"db", "late"}
	cat := &heldLoadCatalog{Catalog: tabletest.TempCatalog(t), ident: ident, entered: make(chan struct{}), release: make(chan struct{})}
	r, err := NewRouter(cat)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)

	waiting := make(chan struct{})
	var waitOnce sync.Once
	testHookOpenWait = func() { waitOnce.Do(func() { close(waiting) }) }
	t.Cleanup(func() { testHookOpenWait = nil })

	openErr := make(chan error, 1)
	go func() { openErr <- r.Open(ctx, ident) }()
	<-cat.entered // the Open is loading the table
	writeErr := make(chan error, 1)
	rec := idNameRows(0, 10)
	defer rec.Release()
	go func() { writeErr <- r.Write(ctx, ident, rec) }()
	<-waiting // the Write waits for the Open
	close(cat.release)

	if err := <-openErr; !errors.Is(err, icecatalog.ErrNoSuchTable) {
		t.Fatalf("Open of a missing table: %v, want ErrNoSuchTable", err)
	}
	if err := <-writeErr; err != nil {
		t.Fatalf("Write that waited on the Open: %v", err)
	}
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	w, ok := r.Writer(ident)
	if !ok {
		t.Fatal("the router has no writer for the table the Write created")
	}
	got := readNamed(t, w)
	for i := range 10 {
		if want := "n" + strings.Repeat("x", i%7); !slices.Equal(got[int64(i)], []string{want}) {
			t.Errorf("id %d: %v, want [%s]", i, got[int64(i)], want)
		}
	}
	if len(got) != 10 {
		t.Errorf("table holds %d ids, want 10", len(got))
	}
}
