package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	ice "github.com/apache/iceberg-go"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/icewriter/iceberg/catalog"
)

// config holds the command line.
type config struct {
	rows          int
	quick         bool
	dir           string
	keep          bool
	catalogURI    string
	credential    string
	token         string
	warehouse     string
	s3Endpoint    string
	s3Region      string
	s3AccessKey   string
	s3SecretKey   string
	commitLatency time.Duration
	plots         string
	out           string
	namespace     string
	progress      bool
	repeat        int
}

// env is one invocation's backend: the catalog (wrapped with the injected commit latency), a namespace, and a
// cache of baseline points shared between tables.
type env struct {
	cfg       config
	cat       icecatalog.Catalog
	embedded  bool
	dir       string // embedded: the folder holding the catalog and the warehouse
	removeDir bool
	runID     string
	tables    int
	prog      *progress
	baselines map[baseKey]result
	backend   string // described in the report header
}

type baseKey struct{ procs, batch int }

func openEnv(ctx context.Context, cfg config) (*env, error) {
	e := &env{cfg: cfg, runID: fmt.Sprintf("%x", time.Now().UnixNano()&0xffffffff), baselines: map[baseKey]result{},
		prog: newProgress(cfg.progress)}
	var (
		cat icecatalog.Catalog
		err error
	)
	if cfg.catalogURI == "" || strings.HasPrefix(cfg.catalogURI, "sqlite:") {
		e.embedded = true
		dir := cfg.dir
		if dir == "" {
			if dir, err = os.MkdirTemp("", "icebench-"); err != nil {
				return nil, err
			}
			e.removeDir = !cfg.keep
		}
		if dir, err = filepath.Abs(dir); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		e.dir = dir
		uri := cfg.catalogURI
		if uri == "" {
			uri = "sqlite://" + filepath.ToSlash(filepath.Join(dir, "catalog.db")) +
				"?warehouse=" + url.QueryEscape("file://"+filepath.ToSlash(filepath.Join(dir, "warehouse")))
		}
		cat, err = catalog.OpenWithProperties(ctx, uri, e.storageProps())
		e.backend = "embedded: SQLite catalog (pure Go) and a local warehouse folder in " + dir
		if cfg.catalogURI != "" {
			e.backend = "SQLite catalog " + redactURI(uri)
		}
	} else {
		cat, err = openRemote(ctx, cfg, e.storageProps())
		e.backend = "catalog " + redactURI(cfg.catalogURI)
		if cfg.s3Endpoint != "" {
			e.backend += ", S3 endpoint " + cfg.s3Endpoint
		}
	}
	if err != nil {
		e.close()
		return nil, err
	}
	if cfg.commitLatency > 0 {
		cat = &latencyCatalog{Catalog: cat, latency: cfg.commitLatency}
		e.backend += fmt.Sprintf("; %s injected before every catalog commit (ours and the baseline's)", cfg.commitLatency)
	}
	e.cat = cat
	if err := cat.CreateNamespace(ctx, table.Identifier{cfg.namespace}, nil); err != nil &&
		!errors.Is(err, icecatalog.ErrNamespaceAlreadyExists) {
		if ok, _ := cat.CheckNamespaceExists(ctx, table.Identifier{cfg.namespace}); !ok {
			e.close()
			return nil, fmt.Errorf("namespace %s: %w", cfg.namespace, err)
		}
	}
	return e, nil
}

// storageProps are the catalog properties the flags set (credentials, warehouse, S3).
func (e *env) storageProps() ice.Properties {
	props := ice.Properties{}
	set := func(k, v string) {
		if v != "" {
			props[k] = v
		}
	}
	c := e.cfg
	set("credential", c.credential)
	set("token", c.token)
	set("warehouse", c.warehouse)
	set("s3.endpoint", c.s3Endpoint)
	set("s3.region", c.s3Region)
	set("s3.access-key-id", c.s3AccessKey)
	set("s3.secret-access-key", c.s3SecretKey)
	return props
}

func redactURI(uri string) string {
	u, err := url.Parse(uri)
	if err != nil {
		return "(unparsable URI)"
	}
	u.User = nil
	q := u.Query()
	for k := range q {
		lk := strings.ToLower(k)
		if strings.Contains(lk, "credential") || strings.Contains(lk, "secret") || strings.Contains(lk, "token") || strings.Contains(lk, "key") {
			q.Set(k, "***")
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func (e *env) close() {
	if c, ok := e.cat.(icecatalog.Closer); ok {
		_ = c.Close()
	}
	if e.removeDir && e.dir != "" {
		_ = os.RemoveAll(e.dir)
	}
}

// newIdent names a fresh table for one point.
func (e *env) newIdent(name string) table.Identifier {
	e.tables++
	return table.Identifier{e.cfg.namespace, fmt.Sprintf("%s_%s_%d", name, e.runID, e.tables)}
}

// dropTable removes a measured table and, on the embedded backend, its files (a full run writes gigabytes).
func (e *env) dropTable(ctx context.Context, ident table.Identifier) {
	tbl, err := e.cat.LoadTable(ctx, ident)
	if err != nil {
		return
	}
	_ = e.cat.DropTable(ctx, ident)
	if e.embedded && e.cfg.dir == "" {
		if loc := tbl.Location(); strings.HasPrefix(loc, "file://") {
			p := strings.TrimPrefix(loc, "file://")
			if strings.HasPrefix(p, e.dir) {
				_ = os.RemoveAll(p)
			}
		}
	}
}

// loadTable loads a table so that its commits go through e.cat (the latency wrapper included): iceberg-go's
// catalogs hand out tables bound to themselves, not to a wrapper around them.
func (e *env) loadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	tbl, err := e.cat.LoadTable(ctx, ident)
	if err != nil {
		return nil, err
	}
	return table.New(tbl.Identifier(), tbl.Metadata(), tbl.MetadataLocation(), tbl.FS, e.cat), nil
}

// latencyCatalog models a slow catalog (Glue ~320 ms, Unity ~5.2 s per commit): it sleeps before every commit.
type latencyCatalog struct {
	icecatalog.Catalog
	latency time.Duration
}

func (c *latencyCatalog) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
	select {
	case <-time.After(c.latency):
	case <-ctx.Done():
		return nil, "", ctx.Err()
	}
	return c.Catalog.CommitTable(ctx, ident, reqs, updates)
}

// machine describes the host for the report header.
func machine() []string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "MemTotal:") {
				var kb int64
				fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(line, "MemTotal:")), "%d", &kb)
				mem = fmt.Sprintf(", %.1f GiB RAM", float64(kb)/(1<<20))
			}
		}
	}
	kernel := ""
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = " (Linux " + strings.TrimSpace(string(b)) + ")"
	}
	return []string{
		fmt.Sprintf("CPU: %s, %d logical cores%s", cpu, runtime.NumCPU(), mem),
		fmt.Sprintf("OS: %s/%s%s", runtime.GOOS, runtime.GOARCH, kernel),
		fmt.Sprintf("Go: %s, GOGC=%s, GOMAXPROCS default %d", runtime.Version(), envOr("GOGC", "100"), runtime.GOMAXPROCS(0)),
		"Date: " + time.Now().UTC().Format("2006-01-02 15:04 MST"),
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// loadAvg is the 1, 5 and 15 minute load average ("" where /proc is missing): other work on the machine
// makes every figure lower, and the report says so.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
