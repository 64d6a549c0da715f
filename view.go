package iceberg

import (
	"context"
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/icewriter/iceberg/internal/conform"
	"github.com/icewriter/iceberg/internal/conform/evolve"
)

// tableView is the table as the writer last saw it (after its latest commit, schema change or reload) and the
// conformer for that table's schema. Calls conform against it, encoders write against it, the commit loop forms
// runs from it; commits and schema changes install the next one. It also keeps schema evolution's cache of
// input schemas known to fit.
type tableView struct {
	mem   memory.Allocator
	hooks *conformHooks // given to every conformer it builds (nil: every problem fails the call)
	evo   evolve.Seen[*conformer]
	// defaults are WithColumnDefaults': the defaults of columns schema evolution adds. Set once.
	defaults map[string]ice.Literal

	// conformHooks are hooks as the conform package takes them (nil when hooks is).
	conformHooks *conform.Hooks

	mu   sync.Mutex
	tbl  *table.Table
	conf *conformer
}

// conformHooks is what a conformer may ask beyond its own schema: both are optional.
type conformHooks struct {
	// deadLetter receives the rows that cannot be converted (WithDeadLetter).
	deadLetter func(row any, err error)
	// relax makes the required column at path optional, as schema evolution does when nulls arrive in it. It
	// returns the conformer for the table schema then current and whether that differs from c's.
	relax func(ctx context.Context, c *conformer, path []string) (*conformer, bool, error)
}

func newTableView(mem memory.Allocator, hooks *conformHooks) *tableView {
	v := &tableView{mem: mem, hooks: hooks}
	if hooks != nil {
		// hooks.relax may be set after the view is built (the Writer's own method), so it is read per call;
		// deadLetter is fixed when hooks are made, and conform bisects a batch only when it is set.
		v.conformHooks = &conform.Hooks{
			DeadLetter: hooks.deadLetter,
			Relax: func(ctx context.Context, c *conform.Conformer, path []string) (*conform.Conformer, bool, error) {
				if hooks.relax == nil {
					return nil, false, nil
				}
				next, changed, err := hooks.relax(ctx, &conformer{Conformer: c, target: c.Target()}, path)
				if next == nil {
					return nil, changed, err
				}
				return next.Conformer, changed, err
			},
		}
	}
	return v
}

// set installs tbl; the conformer is rebuilt only when the table's Arrow schema changed, so that the schema
// pointer batches carry stays the same across commits (a buffer ends where its schema changes).
func (v *tableView) set(tbl *table.Table) error {
	as, err := table.SchemaToArrowSchema(tbl.Schema(), nil, true, false)
	if err != nil {
		return fmt.Errorf("iceberg: table schema to arrow: %w", err)
	}
	defaults, err := conform.WriteDefaults(tbl.Schema())
	if err != nil {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.tbl = tbl
	if v.conf == nil || !v.conf.target.Equal(as) || !conform.SameDefaults(v.conf.Defaults(), defaults) {
		v.conf = v.newConformer(as, defaults)
	}
	return nil
}

// get returns the table and the conformer for its schema, read together.
func (v *tableView) get() (*table.Table, *conformer) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.tbl, v.conf
}

func (v *tableView) table() *table.Table {
	t, _ := v.get()
	return t
}
