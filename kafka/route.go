package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/icewriter/iceberg"
)

// ErrNoRoute is wrapped by the *RecordError of a record no route takes: its field is missing or null, its topic
// has no table, and there is no default table.
var ErrNoRoute = errors.New("kafka: no table for the record")

// Route spreads the records over tables of Config.Catalog through an iceberg.Router: a table is opened on
// first sight, or created from the first rows' schema (the values' schema for Avro and Protobuf, the inferred
// one for JSON, plus the metadata columns: topic string, partition int, offset long, timestamp, key binary,
// headers map<string, binary>); every table has its own writer, and each partition its position in every table
// it wrote into, committed with that table's rows. A partition resumes from the lowest of its tables'
// positions, and the records a table already holds are skipped for that table only (RouterSource.Resume and
// ResumePoint.Covered), so resuming stays exact whichever member wrote the tables.
//
// A record goes to the table its Field names, else its topic's, else Default. Debezium and Raw decoders write
// tables that exist (their rows need the table's columns). WriterOptions and the sink's own options are every
// table's writer options; RouterOptions add the rest (iceberg.WithTableConfig for the partition spec and
// identifier fields of the tables it creates).
type Route struct {
	// Topics maps topics to their tables.
	Topics map[string]table.Identifier
	// Field names a top-level value field whose value, as text, names the record's table in Namespace
	// ("eu" in namespace kafka: table kafka.eu). A field route opens every table of Namespace before resuming.
	Field     string
	Namespace table.Identifier
	// Default takes the records no field or topic routes. Default: none (such a record is bad: ErrNoRoute).
	Default table.Identifier
	// RouterOptions are added to the router's.
	RouterOptions []iceberg.RouterOption
}

// fieldDecoder is a decoder that can read one top-level field of a value without a table, for field routes.
type fieldDecoder interface {
	field(value []byte, name string) (any, error)
}

// routeTarget is the target of a sink with a Route.
type routeTarget struct {
	*iceberg.Router
	cat   catalog.Catalog
	route Route
	dec   Decoder
	meta  MetadataColumns

	mu      sync.Mutex
	plans   map[string]*rowPlan            // by table, for tables open in the router
	resumes map[string]iceberg.ResumePoint // by partition key, from the partition's first write since assignment
}

func newRouteTarget(ctx context.Context, cfg Config, dec Decoder, opts []iceberg.Option) (*routeTarget, error) {
	rt := cfg.Route
	switch {
	case rt.Field == "" && len(rt.Topics) == 0 && len(rt.Default) == 0:
		return nil, fmt.Errorf("%w: Route: set Field, Topics or Default", ErrConfig)
	case rt.Field != "" && len(rt.Namespace) == 0:
		return nil, fmt.Errorf("%w: Route: Field %q needs a Namespace", ErrConfig, rt.Field)
	}
	if _, ok := dec.(fieldDecoder); rt.Field != "" && !ok {
		return nil, fmt.Errorf("%w: Route: Field %q: the decoder cannot read fields (Raw)", ErrConfig, rt.Field)
	}
	r, err := iceberg.NewRouter(cfg.Catalog, append([]iceberg.RouterOption{iceberg.WithWriterOptions(opts...)},
		rt.RouterOptions...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka: Route: %w", err)
	}
	t := &routeTarget{Router: r, cat: cfg.Catalog, route: *rt, dec: dec, meta: cfg.Metadata,
		plans: map[string]*rowPlan{}, resumes: map[string]iceberg.ResumePoint{}}
	if err := t.openKnown(ctx); err != nil {
		_ = r.Abort(ctx)
		return nil, err
	}
	return t, nil
}

// openKnown opens every existing table the route may write (Topics, Default, and Namespace's tables for a
// field route), also those another member created since: a partition resumes from all of them.
func (t *routeTarget) openKnown(ctx context.Context) error {
	idents := slices.Collect(func(yield func(table.Identifier) bool) {
		for _, id := range t.route.Topics {
			yield(id)
		}
	})
	if len(t.route.Default) > 0 {
		idents = append(idents, t.route.Default)
	}
	if t.route.Field != "" {
		for id, err := range t.cat.ListTables(ctx, t.route.Namespace) {
			if errors.Is(err, catalog.ErrNoSuchNamespace) {
				break
			}
			if err != nil {
				return fmt.Errorf("kafka: Route: listing the tables of %v: %w", t.route.Namespace, err)
			}
			idents = append(idents, id)
		}
	}
	for _, id := range idents {
		if _, ok := t.Writer(id); ok {
			continue
		}
		if err := t.Open(ctx, id); err != nil && !errors.Is(err, catalog.ErrNoSuchTable) {
			return fmt.Errorf("kafka: Route: opening %v: %w", id, err)
		}
	}
	return nil
}

// Positions returns each partition's lowest position over the route's tables (those it has not started from
// the beginning): where it resumes.
func (t *routeTarget) Positions(ctx context.Context) (map[string]string, error) {
	if err := t.openKnown(ctx); err != nil {
		return nil, err
	}
	low := map[string]string{}
	fromStart := map[string]bool{}
	for _, id := range t.Tables() {
		w, ok := t.Writer(id)
		if !ok {
			continue
		}
		pos, err := w.Positions(ctx)
		if err != nil {
			return nil, fmt.Errorf("table %v: %w", id, err)
		}
		for k, v := range pos {
			if _, err := ParsePosition(v); err != nil {
				fromStart[k] = true // the empty position: the partition's start
				continue
			}
			if cur, ok := low[k]; !ok || comparePositions(v, cur) < 0 {
				low[k] = v
			}
		}
	}
	out := make(map[string]string, len(low))
	for k, v := range low {
		if !fromStart[k] {
			out[k] = v
		}
	}
	return out, nil
}

func (t *routeTarget) release(ctx context.Context, key string) error {
	t.mu.Lock()
	delete(t.resumes, key)
	t.mu.Unlock()
	return t.Source(key).Abort(ctx)
}

// groups splits a partition's records by table, without those a table already holds; records no route takes
// are returned as bad.
func (t *routeTarget) groups(ctx context.Context, s *Sink, key string, recs []*kgo.Record) ([]recordGroup, []*RecordError, error) {
	rp, err := t.resumePoint(ctx, key)
	if err != nil {
		return nil, nil, err
	}
	var order []string
	byTable := map[string][]*kgo.Record{}
	idents := map[string]table.Identifier{}
	var bad []*RecordError
	for _, r := range recs {
		id, err := t.pick(r)
		if errors.Is(err, ErrRegistry) {
			return nil, nil, err // the registry is down: the record is not bad
		}
		if err != nil {
			bad = append(bad, &RecordError{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Err: err, record: r})
			continue
		}
		if rp.Covered(id, Position{Offset: r.Offset + 1, TopicID: s.topicIDs[r.Topic]}.String()) { // positions are next offsets: r is below
			continue
		}
		name := strings.Join(id, ".")
		if _, ok := byTable[name]; !ok {
			order = append(order, name)
			idents[name] = id
		}
		byTable[name] = append(byTable[name], r)
	}
	src := t.Source(key)
	groups := make([]recordGroup, 0, len(order))
	for _, name := range order {
		id := idents[name]
		plan, err := t.plan(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		groups = append(groups, recordGroup{plan: plan, recs: byTable[name], put: s.putter(
			func(ctx context.Context, b arrow.RecordBatch) error { return src.Write(ctx, id, b) },
			func(ctx context.Context, b arrow.RecordBatch) error { return src.Apply(ctx, id, b) })})
	}
	return groups, bad, nil
}

// ResumePositions resumes the partitions on every table the route has open (RouterSource.Resume: each table
// then refuses a commit of the partition whose position another member moved, iceberg.ErrPositionMoved) and
// returns where each resumes: the lowest of its tables' positions, absent when it starts from the beginning.
func (t *routeTarget) ResumePositions(ctx context.Context, keys ...string) (map[string]string, error) {
	if err := t.openKnown(ctx); err != nil {
		return nil, err
	}
	out := make(map[string]string, len(keys))
	for _, key := range keys {
		t.mu.Lock()
		delete(t.resumes, key) // newly assigned: read it again
		t.mu.Unlock()
		rp, err := t.resumePoint(ctx, key)
		if err != nil {
			return nil, err
		}
		if !rp.FromStart {
			out[key] = rp.Position
		}
	}
	return out, nil
}

// startOver makes a partition that resumes from its start (its topic was created again) write every table
// again: the tables' positions are of the old topic and cover none of its records.
func (t *routeTarget) startOver(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.resumes[key] = iceberg.ResumePoint{FromStart: true}
}

// resumePoint returns the partition's resume point, read on its first write since it was assigned.
func (t *routeTarget) resumePoint(ctx context.Context, key string) (iceberg.ResumePoint, error) {
	t.mu.Lock()
	rp, ok := t.resumes[key]
	t.mu.Unlock()
	if ok {
		return rp, nil
	}
	rp, err := t.Source(key).Resume(ctx)
	if err != nil {
		return iceberg.ResumePoint{}, fmt.Errorf("kafka: resuming partition %s: %w", key, err)
	}
	t.mu.Lock()
	t.resumes[key] = rp
	t.mu.Unlock()
	return rp, nil
}

// pick returns the record's table.
func (t *routeTarget) pick(r *kgo.Record) (table.Identifier, error) {
	if t.route.Field != "" {
		v, err := t.dec.(fieldDecoder).field(r.Value, t.route.Field)
		if err != nil {
			return nil, fmt.Errorf("%w: route field %q: %w", ErrDecode, t.route.Field, err)
		}
		if v != nil && fmt.Sprint(v) != "" {
			return append(slices.Clone(t.route.Namespace), fmt.Sprint(v)), nil
		}
	}
	if id, ok := t.route.Topics[r.Topic]; ok {
		return id, nil
	}
	if len(t.route.Default) > 0 {
		return t.route.Default, nil
	}
	return nil, fmt.Errorf("%w (topic %q, field %q)", ErrNoRoute, r.Topic, t.route.Field)
}

// plan returns the plan of a table's rows: from its writer's schema when the table exists, else (a table the
// first rows will create) the values in their own or an inferred schema plus the metadata columns.
func (t *routeTarget) plan(ctx context.Context, id table.Identifier) (*rowPlan, error) {
	name := strings.Join(id, ".")
	t.mu.Lock()
	p, ok := t.plans[name]
	t.mu.Unlock()
	if ok {
		return p, nil
	}
	w, ok := t.Writer(id)
	if !ok {
		if err := t.Open(ctx, id); err != nil && !errors.Is(err, catalog.ErrNoSuchTable) {
			return nil, fmt.Errorf("kafka: Route: opening %v: %w", id, err)
		}
		w, ok = t.Writer(id)
	}
	if !ok {
		switch t.dec.(type) {
		case rawDecoder, changeDecoder:
			return nil, fmt.Errorf("%w: Route: table %v does not exist, and the decoder's rows need the table's columns", ErrConfig, id)
		}
		return newCreationPlan(t.meta), nil // not kept: once the table exists, its schema rules
	}
	p, err := newRowPlan(w.Schema(), tableKeys(w), t.dec, t.meta)
	if err != nil {
		return nil, fmt.Errorf("kafka: Route: table %v: %w", id, err)
	}
	t.mu.Lock()
	t.plans[name] = p
	t.mu.Unlock()
	return p, nil
}

// newCreationPlan is the plan of a table the first rows create: no value schema (the decoder's own or
// inferred), the metadata columns in their default types.
func newCreationPlan(m MetadataColumns) *rowPlan {
	p := &rowPlan{}
	var fields []arrow.Field
	for _, c := range []struct {
		name string
		kind metaKind
		typ  arrow.DataType
	}{
		{m.Topic, metaTopic, arrow.BinaryTypes.String},
		{m.Partition, metaPartition, arrow.PrimitiveTypes.Int32},
		{m.Offset, metaOffset, arrow.PrimitiveTypes.Int64},
		{m.Timestamp, metaTimestamp, &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		{m.Key, metaKey, arrow.BinaryTypes.Binary},
		{m.Headers, metaHeaders, arrow.MapOf(arrow.BinaryTypes.String, arrow.BinaryTypes.Binary)},
	} {
		if c.name != "" {
			fields = append(fields, arrow.Field{Name: c.name, Type: c.typ, Nullable: c.kind == metaKey})
			p.kinds = append(p.kinds, c.kind)
		}
	}
	p.table = arrow.NewSchema(fields, nil)
	return p
}
