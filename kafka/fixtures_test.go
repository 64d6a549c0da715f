package kafka_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/catalog"
	"github.com/icewriter/iceberg/internal/tabletest"
	"github.com/icewriter/iceberg/kafka"
)

// valuesEnv is one kfake cluster (topics of two partitions each), one SQLite catalog, a schema registry, and a
// producer, for the tests of values, dead letters, change streams and routes.
type valuesEnv struct {
	t       *testing.T
	ctx     context.Context
	cluster *kfake.Cluster
	cat     icecatalog.Catalog
	prod    *kgo.Client
	reg     *srfake.Registry
	sr      *sr.Client

	mu   sync.Mutex
	ends map[string]int64 // "topic/partition" -> next offset: what the table positions must reach
}

const valuesParts = 2

func newValuesEnv(t *testing.T, topics ...string) *valuesEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(valuesParts, topics...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cat, err := catalog.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prod.Close)
	// srfake serves the schema registry's REST API from memory (an httptest server): no registry runs here, and
	// the client under test speaks HTTP to it as to a real one.
	reg := srfake.New()
	t.Cleanup(reg.Close)
	cl, err := sr.NewClient(sr.URLs(reg.URL()))
	if err != nil {
		t.Fatal(err)
	}
	return &valuesEnv{t: t, ctx: ctx, cluster: c, cat: cat, prod: prod, reg: reg, sr: cl, ends: map[string]int64{}}
}

// produce sends the records (their Topic and Partition set) and records each partition's end.
func (e *valuesEnv) produce(recs ...*kgo.Record) {
	e.t.Helper()
	if err := e.prod.ProduceSync(e.ctx, recs...).FirstErr(); err != nil {
		e.t.Fatal(err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, r := range recs {
		k := fmt.Sprintf("%s/%d", r.Topic, r.Partition)
		e.ends[k] = max(e.ends[k], r.Offset+1)
	}
}

// createTable creates a table for the sink to write.
func (e *valuesEnv) createTable(ident table.Identifier, schema *arrow.Schema, opts ...iceberg.CreateOption) {
	e.t.Helper()
	w, err := iceberg.NewWriter(e.ctx, e.cat, ident, iceberg.WithCreate(schema, opts...))
	if err != nil {
		e.t.Fatal(err)
	}
	if err := w.Close(e.ctx); err != nil {
		e.t.Fatal(err)
	}
}

// sinkRun is a started sink.
type sinkRun struct {
	sink   *kafka.Sink
	cancel context.CancelFunc
	done   chan error
}

// start starts a sink on cfg, with the cluster's brokers, short polls and flushes filled in.
func (e *valuesEnv) start(cfg kafka.Config) *sinkRun {
	e.t.Helper()
	cfg.Brokers = e.cluster.ListenAddrs()
	if cfg.Group == "" {
		cfg.Group = "values"
	}
	if cfg.MaxPollRecords == 0 {
		cfg.MaxPollRecords = 50
	}
	cfg.WriterOptions = append([]iceberg.Option{iceberg.WithFlushInterval(20 * time.Millisecond)}, cfg.WriterOptions...)
	cfg.ClientOptions = append(cfg.ClientOptions, kgo.FetchMaxWait(100*time.Millisecond))
	s, err := kafka.New(e.ctx, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	r := &sinkRun{sink: s, cancel: cancel, done: make(chan error, 1)}
	go func() {
		err := s.Run(ctx)
		if err != nil && ctx.Err() == nil { // a member that stops by itself: say why at once, not at stop
			e.t.Logf("member %q: Run: %v", cfg.WriterID, err)
		}
		r.done <- err
	}()
	return r
}

// stop ends the sink gracefully and checks Run's result.
func (e *valuesEnv) stop(r *sinkRun) {
	e.t.Helper()
	r.cancel()
	if err := <-r.done; err != nil {
		e.t.Fatalf("Run: %v", err)
	}
}

// waitPositions waits until the table exists and its positions of the given topics' partitions reach their ends.
func (e *valuesEnv) waitPositions(ident table.Identifier, topics ...string) {
	e.t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		pos, err := iceberg.Positions(e.ctx, e.cat, ident)
		if err != nil && !errors.Is(err, icecatalog.ErrNoSuchTable) { // a routed table is created on first sight
			e.t.Fatal(err)
		}
		e.mu.Lock()
		behind := map[string]string{}
		for _, topic := range topics {
			for p := range valuesParts {
				k := fmt.Sprintf("%s/%d", topic, p)
				if n := offsetOf(pos[k]); n < e.ends[k] {
					behind[k] = fmt.Sprintf("%s < %d", pos[k], e.ends[k])
				}
			}
		}
		e.mu.Unlock()
		if len(behind) == 0 {
			return
		}
		select {
		case <-e.ctx.Done():
			e.t.Fatalf("table %v: positions behind: %v", ident, behind)
		case <-tick.C:
		}
	}
}

// offsetOf is a position's offset (kafka.ParsePosition), 0 for none.
func offsetOf(position string) int64 {
	p, err := kafka.ParsePosition(position)
	if err != nil {
		return 0
	}
	return p.Offset
}

// rows reads the table back with iceberg-go's scanner: each row as column name -> its value as Arrow marshals
// it to JSON, re-read through encoding/json (numbers as json.Number), so a test compares with literals.
func (e *valuesEnv) rows(ident table.Identifier) []map[string]any {
	e.t.Helper()
	tbl := tabletest.Load(e.t, e.cat, ident)
	_, it := tabletest.Records(e.t, tbl)
	var out []map[string]any
	for rec := range it {
		for r := range int(rec.NumRows()) {
			row := map[string]any{}
			for c, f := range rec.Schema().Fields() {
				row[f.Name] = rec.Column(c).GetOneForMarshal(r)
			}
			b, err := json.Marshal(row)
			if err != nil {
				e.t.Fatal(err)
			}
			back := map[string]any{}
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.UseNumber()
			if err := dec.Decode(&back); err != nil {
				e.t.Fatal(err)
			}
			out = append(out, back)
		}
	}
	return out
}

// tableColumns returns the table's column names.
func (e *valuesEnv) tableColumns(ident table.Identifier) []string {
	e.t.Helper()
	tbl := tabletest.Load(e.t, e.cat, ident)
	var names []string
	for _, f := range tbl.Schema().Fields() {
		names = append(names, f.Name)
	}
	return names
}
