// Package kafka writes Kafka (or Redpanda) topics into an Iceberg table (or, with a Route, many), scaled out
// over a consumer group: the group protocol spreads the partitions over the members, each member writes its
// partitions through its own iceberg.Writer (iceberg.Router), and the table holds every record once through
// rebalances and crashes. Values decode from JSON, Avro or Protobuf through a schema registry, Debezium change
// events, or raw bytes; bad records can go to a dead-letter topic.
//
// The table is the truth. A partition's position (key "topic/partition", value the next offset to read, in
// decimal) commits atomically with the rows it covers; a member that is assigned a partition resumes from the
// table's position, whichever member wrote it, and the group's committed offsets follow the table commits for
// monitoring only (lag dashboards), never for resuming. The table also fences: a member paused past its session
// timeout, whose partitions another member has committed since, finds its commit refused
// (iceberg.ErrPositionMoved) instead of writing those records twice.
package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/icewriter/iceberg"
)

// Errors of the sink.
var (
	// ErrConfig is wrapped by New's errors for a missing or invalid Config field; the message names the field.
	ErrConfig = errors.New("kafka: invalid config")
	// ErrPartitionsLost is wrapped by Run's error when the group took the member's partitions away without a
	// revocation (its session expired) and the sink cannot reopen its writer (Config.Writer was given): the
	// rows not committed were dropped, and the partitions' new owners resume from the table.
	ErrPartitionsLost = errors.New("kafka: partitions lost to the group")
)

// Config configures a Sink. Brokers, Group, Topics and the target (Catalog and Table, or Writer) are required.
type Config struct {
	Brokers []string // seed brokers
	Group   string   // consumer group
	Topics  []string // topics to consume

	// Catalog and Table name the target table; the sink opens the writer with WriterOptions plus
	// WithWriterID(WriterID) and WithCheckpoints (which it needs). WriterID is the member's stable identity
	// (default: Group + "-" + a random suffix): a restarted member that reuses it fences its predecessor.
	Catalog       catalog.Catalog
	Table         table.Identifier
	WriterID      string
	WriterOptions []iceberg.Option

	// Writer, instead of Catalog and Table, is a writer the caller opened, with WithCheckpoints and a
	// WithWriterID of the member. Run closes it. Since the sink cannot reopen it, a member whose partitions are
	// lost (session expired) stops with ErrPartitionsLost instead of rejoining.
	Writer *iceberg.Writer

	// Decoder turns record values into rows of the table's value columns. Default: JSON().
	Decoder Decoder
	// Metadata names the table columns that receive each record's topic, partition, offset, timestamp and key.
	// Default: none.
	Metadata MetadataColumns

	// ClientOptions are added to the kgo client's (TLS, SASL, session timeout, ...). The sink sets the seed
	// brokers, group, topics, the cooperative-sticky balancer, manual commits and the rebalance callbacks;
	// options that change those break its guarantees.
	ClientOptions []kgo.Opt
	// MaxPollRecords bounds the records of one poll (and so the rows between two checkpoints). Default: 10,000.
	MaxPollRecords int
	// Logger receives the sink's events. Default: slog.Default().
	Logger *slog.Logger

	// Upsert makes each record replace the table's row with the same key (the table's identifier fields, or
	// iceberg.WithKeys in WriterOptions) instead of appending: a later record of a key wins. Keys must not span
	// partitions (produce with the key as the Kafka key): the order of two partitions' records is not defined.
	// Without a key, the first poll fails and Run returns the error. Default: false (append).
	Upsert bool
	// DeadLetterTopic, when set, receives every record that cannot be decoded (ErrDecode) or whose row the
	// table rejects (a *iceberg.ColumnError: a value of the wrong type, a null in a required column, an unknown
	// column without schema evolution), instead of the sink stopping on it: its key, value and headers, plus the
	// headers HeaderError, HeaderTopic, HeaderPartition and HeaderOffset. It is produced (and acknowledged)
	// before the table's position of its partition covers it, so it is never lost and never retried forever;
	// a member that dies between the two produces it again on replay (the dead-letter topic is at least once).
	// Default: "" (a bad record stops the sink with a *RecordError or the writer's error).
	DeadLetterTopic string
	// Route, instead of Table or Writer, spreads the records over many tables of Catalog (see Route).
	// Default: nil.
	Route *Route
}

// target is where records go: one table's writer (writerTarget), or the tables of a Route through an
// iceberg.Router (routeTarget, route.go). Positions are by partition key, the next offset to read; a route's
// are the lowest over its tables, where the partition resumes.
type target interface {
	Positions(ctx context.Context) (map[string]string, error)
	// ResumePositions resumes newly assigned partitions (see iceberg.Writer.ResumePositions) and returns where
	// each resumes (absent: from its start).
	ResumePositions(ctx context.Context, partitions ...string) (map[string]string, error)
	CheckpointPositions(ctx context.Context, positions map[string]string) error
	Flush(ctx context.Context) error
	Close(ctx context.Context) error
	Abort(ctx context.Context) error
	// release commits a revoked partition's rows up to its position and drops the rest (Source.Abort).
	release(ctx context.Context, key string) error
}

// writerTarget is the target of a sink without a route: one table's writer.
type writerTarget struct{ *iceberg.Writer }

func (t writerTarget) release(ctx context.Context, key string) error { return t.Source(key).Abort(ctx) }

// Sink consumes the configured topics as a member of the group and writes them into the table.
type Sink struct {
	cfg  Config
	log  *slog.Logger
	dec  Decoder
	plan *rowPlan

	mu      sync.Mutex // guards w, owned and failed; rebalance callbacks and the poll loop both take it
	w       target
	owned   map[string]map[int32]bool
	failed  error
	crashed bool // set by crash (tests): the callbacks do nothing, as in a killed process

	cl        *kgo.Client
	committed chan struct{} // a table commit happened: the group offsets may follow
}

// New validates cfg, opens the writer when cfg names a catalog and table, and creates the member's Kafka client.
// Consuming starts with Run.
func New(ctx context.Context, cfg Config) (*Sink, error) {
	switch {
	case len(cfg.Brokers) == 0:
		return nil, fmt.Errorf("%w: Brokers is empty", ErrConfig)
	case cfg.Group == "":
		return nil, fmt.Errorf("%w: Group is empty", ErrConfig)
	case len(cfg.Topics) == 0:
		return nil, fmt.Errorf("%w: Topics is empty", ErrConfig)
	case cfg.Route != nil && (cfg.Catalog == nil || cfg.Writer != nil || len(cfg.Table) != 0):
		return nil, fmt.Errorf("%w: Route needs Catalog, and neither Table nor Writer", ErrConfig)
	case cfg.Route == nil && cfg.Writer == nil && (cfg.Catalog == nil || len(cfg.Table) == 0):
		return nil, fmt.Errorf("%w: set Writer, or Catalog and Table", ErrConfig)
	case cfg.Writer != nil && cfg.Catalog != nil:
		return nil, fmt.Errorf("%w: set Writer or Catalog, not both", ErrConfig)
	}
	s := &Sink{cfg: cfg, log: cfg.Logger, dec: cfg.Decoder, owned: map[string]map[int32]bool{},
		committed: make(chan struct{}, 1)}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.dec == nil {
		s.dec = JSON()
	}
	if s.cfg.MaxPollRecords <= 0 {
		s.cfg.MaxPollRecords = 10_000
	}
	if s.cfg.WriterID == "" {
		s.cfg.WriterID = cfg.Group + "-" + randomSuffix()
	}
	if cfg.Writer != nil {
		s.w = writerTarget{cfg.Writer}
	} else {
		w, err := s.openWriter(ctx)
		if err != nil {
			return nil, err
		}
		s.w = w
	}
	if wt, ok := s.w.(writerTarget); ok {
		plan, err := newRowPlan(wt.Schema(), tableKeys(wt.Writer), s.dec, cfg.Metadata)
		if err != nil {
			_ = s.closeOwnWriter(ctx)
			return nil, err
		}
		s.plan = plan
	}
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topics...),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.DisableAutoCommit(),
		// Callbacks run between polls, never while a poll's rows are being written: a revoked partition's
		// rows are all checkpointed when its callback runs.
		kgo.BlockRebalanceOnPoll(),
		kgo.AdjustFetchOffsetsFn(s.resume),
		kgo.OnPartitionsAssigned(s.assigned),
		kgo.OnPartitionsRevoked(s.revoked),
		kgo.OnPartitionsLost(s.lost),
	}, cfg.ClientOptions...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		_ = s.closeOwnWriter(ctx)
		return nil, fmt.Errorf("kafka: client: %w", err)
	}
	s.cl = cl
	return s, nil
}

func (s *Sink) openWriter(ctx context.Context) (target, error) {
	opts := append(append(decoderOptions(s.dec), s.cfg.WriterOptions...), iceberg.WithWriterID(s.cfg.WriterID),
		iceberg.WithCheckpoints(), iceberg.WithOnCommit(s.onCommit))
	if s.cfg.Route != nil {
		return newRouteTarget(ctx, s.cfg, s.dec, opts)
	}
	w, err := iceberg.NewWriter(ctx, s.cfg.Catalog, s.cfg.Table, opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka: open table %v: %w", s.cfg.Table, err)
	}
	return writerTarget{w}, nil
}

func (s *Sink) closeOwnWriter(ctx context.Context) error {
	if s.cfg.Writer == nil && s.w != nil {
		return s.w.Close(ctx)
	}
	return nil
}

// onCommit signals the poll loop that the group offsets may follow a table commit (coalesced).
func (s *Sink) onCommit(iceberg.CommitInfo) {
	select {
	case s.committed <- struct{}{}:
	default:
	}
}

// partitionKey is a partition's position key on the table.
func partitionKey(topic string, partition int32) string {
	return topic + "/" + strconv.FormatInt(int64(partition), 10)
}

// resume replaces the group's committed offsets of newly assigned partitions with the table's positions: the
// table is the truth, whichever member wrote them. A partition without a position starts at the start. It
// resumes the partitions on the writer (Writer.ResumePositions): should another member commit one of them
// before this one does (this member was paused past its session timeout and the group moved the partition),
// this member's commit fails with iceberg.ErrPositionMoved instead of writing the records a second time.
func (s *Sink) resume(ctx context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	s.mu.Lock()
	w := s.w
	s.mu.Unlock()
	var keys []string
	for t, ps := range offsets {
		for p := range ps {
			keys = append(keys, partitionKey(t, p))
		}
	}
	pos, err := w.ResumePositions(ctx, keys...)
	if err != nil {
		// Returning an error makes kgo leave this group session and rejoin: the partitions are not consumed
		// from a guess.
		s.log.Error("kafka: reading the table's positions", "err", err)
		return nil, err
	}
	out := make(map[string]map[int32]kgo.Offset, len(offsets))
	for t, ps := range offsets {
		out[t] = make(map[int32]kgo.Offset, len(ps))
		for p, o := range ps {
			v, ok := pos[partitionKey(t, p)]
			if !ok {
				out[t][p] = kgo.NewOffset().AtStart()
				continue
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("kafka: partition %s: position %q is not an offset: %w", partitionKey(t, p), v, err)
			}
			_ = o
			out[t][p] = kgo.NewOffset().At(n).WithEpoch(-1)
		}
	}
	return out, nil
}

func (s *Sink) assigned(_ context.Context, _ *kgo.Client, added map[string][]int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for t, ps := range added {
		if s.owned[t] == nil {
			s.owned[t] = map[int32]bool{}
		}
		for _, p := range ps {
			s.owned[t][p] = true
		}
	}
}

// revoked commits the revoked partitions' rows before kgo releases them. Every poll's rows are checkpointed
// before the poll lets a rebalance in (BlockRebalanceOnPoll), so Source.Abort drops nothing here: it commits
// the partition's rows up to its position and returns once they are on the table, and the new owner resumes
// right after them. Committing rather than dropping keeps the work done and costs the rebalance one commit;
// dropping would be as correct but make the new owner read and encode the rows again.
func (s *Sink) revoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.crashed || s.failed != nil {
		return
	}
	for t, ps := range revoked {
		for _, p := range ps {
			if err := s.w.release(ctx, partitionKey(t, p)); err != nil {
				s.fail(fmt.Errorf("kafka: releasing partition %s: %w", partitionKey(t, p), err))
				return
			}
			delete(s.owned[t], p)
		}
	}
}

// lost handles partitions taken away without a revocation (the session expired, a fatal group error): their
// new owners may already be resuming from the table, so none of their uncommitted rows may land. The writer is
// aborted (it drops every uncommitted row, of all partitions: a lost member has lost them all) and reopened with
// the same writer ID, whose new epoch fences anything the old one still had in flight.
func (s *Sink) lost(ctx context.Context, _ *kgo.Client, lost map[string][]int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.crashed || s.failed != nil {
		return
	}
	s.owned = map[string]map[int32]bool{}
	if err := s.w.Abort(ctx); err != nil {
		s.fail(fmt.Errorf("kafka: dropping the rows of lost partitions: %w", err))
		return
	}
	if s.cfg.Writer != nil {
		s.fail(fmt.Errorf("%w: %v (the writer was given in Config.Writer and cannot be reopened)", ErrPartitionsLost, lost))
		return
	}
	w, err := s.openWriter(ctx)
	if err != nil {
		s.fail(err)
		return
	}
	s.w = w
	s.log.Warn("kafka: partitions lost; uncommitted rows dropped, writer reopened", "lost", lost, "writer", s.cfg.WriterID)
}

// fail records the member's first fatal error; Run returns it. Called with mu held.
func (s *Sink) fail(err error) {
	if s.failed == nil {
		s.failed = err
	}
}
