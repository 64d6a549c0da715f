package redact

import (
	"context"
	"fmt"
	"iter"

	"github.com/apache/iceberg-go"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
)

// Catalog is a catalog whose every error is masked by a Redactor: the one layer between a catalog backend
// (whose errors may quote a DSN, a property map or a server's reply to a request carrying a bearer token or a
// client secret) and the code that prints, logs or returns those errors.
//
// Tables it returns are the backend's, unchanged: their own commit path (Transaction.Commit, Refresh) talks to
// the backend directly, and the Writer never uses it (it commits through the catalog). Rebuilding each table
// around the wrapper would drop what the backend attached to it (a REST catalog's scan-planning IO properties
// and metrics reporter).
//
// Besides the catalog interface it implements iceberg-go's optional Closer and ScanPlanner (answering
// "unsupported" when the backend lacks them, which is what their absence means), and TransactionalCatalog and
// PurgeableTable exactly when the backend does (WrapCatalog picks a type per combination), so that type
// assertions on them answer as they did. Other methods of the backend's type are reached through Backend.
type Catalog struct {
	cat icecatalog.Catalog
	r   *Redactor
}

// The wrappers for backends with optional capabilities whose mere presence is an answer.
type (
	txCatalog      struct{ *Catalog }
	purgeCatalog   struct{ *Catalog }
	txPurgeCatalog struct{ *Catalog }
)

// CommitTransaction calls the backend's; its error is masked.
func (c txCatalog) CommitTransaction(ctx context.Context, commits []table.TableCommit) error {
	return c.commitTransaction(ctx, commits)
}

// PurgeTable calls the backend's; its error is masked.
func (c purgeCatalog) PurgeTable(ctx context.Context, ident table.Identifier) error {
	return c.purgeTable(ctx, ident)
}

// CommitTransaction calls the backend's; its error is masked.
func (c txPurgeCatalog) CommitTransaction(ctx context.Context, commits []table.TableCommit) error {
	return c.commitTransaction(ctx, commits)
}

// PurgeTable calls the backend's; its error is masked.
func (c txPurgeCatalog) PurgeTable(ctx context.Context, ident table.Identifier) error {
	return c.purgeTable(ctx, ident)
}

// base is implemented by every wrapper type.
func (c *Catalog) base() *Catalog { return c }

type wrapper interface{ base() *Catalog }

// WrapCatalog returns cat with its errors masked by r (nil: secret shapes only). A catalog that is already
// wrapped keeps its backend and masks the secrets of both redactors.
func WrapCatalog(cat icecatalog.Catalog, r *Redactor) icecatalog.Catalog {
	if w, ok := cat.(wrapper); ok {
		c := w.base()
		if r == nil || r == c.r {
			return cat
		}
		cat, r = c.cat, c.r.With(r.known...)
	}
	if r == nil {
		r = New()
	}
	c := &Catalog{cat: cat, r: r}
	_, tx := cat.(icecatalog.TransactionalCatalog)
	_, purge := cat.(icecatalog.PurgeableTable)
	switch {
	case tx && purge:
		return txPurgeCatalog{c}
	case tx:
		return txCatalog{c}
	case purge:
		return purgeCatalog{c}
	}
	return c
}

// Backend returns the catalog behind a wrapped one (cat itself when it is not wrapped). Its errors are not
// masked.
func Backend(cat icecatalog.Catalog) icecatalog.Catalog {
	if w, ok := cat.(wrapper); ok {
		return w.base().cat
	}
	return cat
}

// RedactorOf returns the redactor of a wrapped catalog, nil for any other.
func RedactorOf(cat icecatalog.Catalog) *Redactor {
	if w, ok := cat.(wrapper); ok {
		return w.base().r
	}
	return nil
}

// CatalogType is the backend's type.
func (c *Catalog) CatalogType() icecatalog.Type { return c.cat.CatalogType() }

// CreateTable calls the backend's; its error is masked.
func (c *Catalog) CreateTable(ctx context.Context, ident table.Identifier, sc *iceberg.Schema, opts ...icecatalog.CreateTableOpt) (*table.Table, error) {
	t, err := c.cat.CreateTable(ctx, ident, sc, opts...)
	return t, c.r.Error(err)
}

// CommitTable calls the backend's; its error is masked.
func (c *Catalog) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
	m, loc, err := c.cat.CommitTable(ctx, ident, reqs, updates)
	return m, loc, c.r.Error(err)
}

// ListTables calls the backend's; its error is masked.
func (c *Catalog) ListTables(ctx context.Context, ns table.Identifier) iter.Seq2[table.Identifier, error] {
	return func(yield func(table.Identifier, error) bool) {
		for id, err := range c.cat.ListTables(ctx, ns) {
			if !yield(id, c.r.Error(err)) {
				return
			}
		}
	}
}

// LoadTable calls the backend's; its error is masked.
func (c *Catalog) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	t, err := c.cat.LoadTable(ctx, ident)
	return t, c.r.Error(err)
}

// DropTable calls the backend's; its error is masked.
func (c *Catalog) DropTable(ctx context.Context, ident table.Identifier) error {
	return c.r.Error(c.cat.DropTable(ctx, ident))
}

// RenameTable calls the backend's; its error is masked.
func (c *Catalog) RenameTable(ctx context.Context, from, to table.Identifier) (*table.Table, error) {
	t, err := c.cat.RenameTable(ctx, from, to)
	return t, c.r.Error(err)
}

// CheckTableExists calls the backend's; its error is masked.
func (c *Catalog) CheckTableExists(ctx context.Context, ident table.Identifier) (bool, error) {
	ok, err := c.cat.CheckTableExists(ctx, ident)
	return ok, c.r.Error(err)
}

// ListNamespaces calls the backend's; its error is masked.
func (c *Catalog) ListNamespaces(ctx context.Context, parent table.Identifier) ([]table.Identifier, error) {
	ns, err := c.cat.ListNamespaces(ctx, parent)
	return ns, c.r.Error(err)
}

// CreateNamespace calls the backend's; its error is masked.
func (c *Catalog) CreateNamespace(ctx context.Context, ns table.Identifier, props iceberg.Properties) error {
	return c.r.Error(c.cat.CreateNamespace(ctx, ns, props))
}

// DropNamespace calls the backend's; its error is masked.
func (c *Catalog) DropNamespace(ctx context.Context, ns table.Identifier) error {
	return c.r.Error(c.cat.DropNamespace(ctx, ns))
}

// CheckNamespaceExists calls the backend's; its error is masked.
func (c *Catalog) CheckNamespaceExists(ctx context.Context, ns table.Identifier) (bool, error) {
	ok, err := c.cat.CheckNamespaceExists(ctx, ns)
	return ok, c.r.Error(err)
}

// LoadNamespaceProperties calls the backend's; its error is masked.
func (c *Catalog) LoadNamespaceProperties(ctx context.Context, ns table.Identifier) (iceberg.Properties, error) {
	p, err := c.cat.LoadNamespaceProperties(ctx, ns)
	return p, c.r.Error(err)
}

// UpdateNamespaceProperties calls the backend's; its error is masked.
func (c *Catalog) UpdateNamespaceProperties(ctx context.Context, ns table.Identifier, removals []string, updates iceberg.Properties) (icecatalog.PropertiesUpdateSummary, error) {
	s, err := c.cat.UpdateNamespaceProperties(ctx, ns, removals, updates)
	return s, c.r.Error(err)
}

// Close closes the backend when it holds resources (iceberg-go's Closer).
func (c *Catalog) Close() error {
	if cl, ok := c.cat.(icecatalog.Closer); ok {
		return c.r.Error(cl.Close())
	}
	return nil
}

func (c *Catalog) commitTransaction(ctx context.Context, commits []table.TableCommit) error {
	return c.r.Error(c.cat.(icecatalog.TransactionalCatalog).CommitTransaction(ctx, commits))
}

func (c *Catalog) purgeTable(ctx context.Context, ident table.Identifier) error {
	return c.r.Error(c.cat.(icecatalog.PurgeableTable).PurgeTable(ctx, ident))
}

// SupportsRemoteScanPlanning reports whether the backend plans scans on the server (iceberg-go's ScanPlanner).
func (c *Catalog) SupportsRemoteScanPlanning() bool {
	p, ok := c.cat.(table.ScanPlanner)
	return ok && p.SupportsRemoteScanPlanning()
}

// SupportsFullRemoteScanPlanning reports whether the backend supports the complete remote planning flow.
func (c *Catalog) SupportsFullRemoteScanPlanning() bool {
	p, ok := c.cat.(table.FullRemoteScanPlanner)
	return ok && p.SupportsFullRemoteScanPlanning()
}

// PlanFiles plans a scan on the server (only called when SupportsRemoteScanPlanning).
func (c *Catalog) PlanFiles(ctx context.Context, req table.ScanPlanningRequest) (table.ScanPlanningResult, error) {
	p, ok := c.cat.(table.ScanPlanner)
	if !ok {
		return table.ScanPlanningResult{}, fmt.Errorf("%w: the catalog does not plan scans", iceberg.ErrNotImplemented)
	}
	res, err := p.PlanFiles(ctx, req)
	return res, c.r.Error(err)
}

var (
	_ icecatalog.Catalog              = (*Catalog)(nil)
	_ icecatalog.Closer               = (*Catalog)(nil)
	_ icecatalog.TransactionalCatalog = txPurgeCatalog{}
	_ icecatalog.PurgeableTable       = txPurgeCatalog{}
	_ table.ScanPlanner               = (*Catalog)(nil)
	_ table.FullRemoteScanPlanner     = (*Catalog)(nil)
)
