// Package kafka writes Kafka (or Redpanda) topics into an Iceberg table (or, with a Route, many), scaled out
// over a consumer group: the group protocol spreads the partitions over the members, each member writes its
// partitions through its own iceberg.Writer (iceberg.Router), and the table holds every record once through
// rebalances and crashes. Values decode from JSON, Avro or Protobuf through a schema registry, Debezium change
// events, or raw bytes; bad records can go to a dead-letter topic.
//
// The table is the truth. A partition's position (key "topic/partition", value the next offset to read and the
// topic's ID, see Position) commits atomically with the rows it covers; a member that is assigned a partition resumes from the
// table's position, whichever member wrote it, and the group's committed offsets follow the table commits for
// monitoring only (lag dashboards), never for resuming. The table also fences: a member paused past its session
// timeout, whose partitions another member has committed since, finds its commit refused
// (iceberg.ErrPositionMoved) instead of writing those records twice.
package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kadm"
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
	// ErrRetentionGap is wrapped by Run's error when a newly assigned partition's log starts after the table's
	// position: records the sink never read were deleted (retention, DeleteRecords). The message names the
	// topic, partition, table position and log start. Config.AcceptRetentionGaps skips them instead.
	ErrRetentionGap = errors.New("kafka: records deleted before the sink read them")
	// ErrTopicRecreated is wrapped by Run's error when a newly assigned partition's topic has another ID than
	// the one in the table's position: the topic was deleted and created again, and the table's offsets are
	// those of the old topic. Config.RestartRecreatedTopics reads the new topic from its start instead. A topic
	// created again while the member runs stops it too (what it read of the old topic committed first), with
	// or without the option: started again, it applies the check.
	ErrTopicRecreated = errors.New("kafka: topic deleted and created again")
	// ErrUnreachable is wrapped by Run's error when no seed broker answered within Config.ConnectTimeout.
	ErrUnreachable = errors.New("kafka: no broker reachable")
)

// Gap is a skip the sink accepted (Config.OnGap), logged too (Warn).
type Gap struct {
	Topic     string
	Partition int32
	// Reason is GapRetention or GapTopicRecreated.
	Reason GapReason
	// Table is the table's position of the partition; Resume is where the sink resumes it (the log start).
	Table, Resume Position
	// Skipped is the number of offsets skipped (Resume.Offset - Table.Offset), -1 for a recreated topic (the
	// old topic's records after the table's position are gone with it).
	Skipped int64
}

// GapReason says why a Gap was skipped.
type GapReason string

// Reasons of a Gap.
const (
	GapRetention      GapReason = "retention"       // records deleted before the sink read them
	GapTopicRecreated GapReason = "topic recreated" // the topic was deleted and created again
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

	// ClientOptions are added to the kgo client's (TLS, SASL, ...; they win over SessionTimeout). The sink sets
	// the seed brokers, group, topics, the cooperative-sticky balancer, manual commits and the rebalance
	// callbacks; options that change those break its guarantees.
	ClientOptions []kgo.Opt
	// SessionTimeout is the group session timeout: how long the group waits for a member that stopped
	// heartbeating (killed, paused, cut off) before its partitions go to the others, which is how long they
	// stall. The broker bounds it (group.min.session.timeout.ms, 6 s by default). Default: 0, kgo's 45 s. The
	// heartbeat interval becomes at most a third of it.
	SessionTimeout time.Duration
	// ConnectTimeout bounds how long Run waits for a seed broker to answer before it returns an error wrapping
	// ErrUnreachable (a wrong address, a broker down, TLS or SASL that does not match), and, once running, how
	// long the brokers may stay unreachable (no response read since a failed connection or read; the outage
	// and its end are logged) before Run stops with the same error. Default: 30 s.
	ConnectTimeout time.Duration
	// AcceptRetentionGaps makes the sink skip the records deleted before it read them (a partition's log
	// starts after the table's position): it resumes at the log start, logs the skip (Warn) and calls OnGap.
	// Default: false, Run stops with ErrRetentionGap before reading the partition.
	AcceptRetentionGaps bool
	// RestartRecreatedTopics makes the sink read a topic deleted and created again (its ID is not the one in the
	// table's positions) from its start: it logs it (Warn) and calls OnGap for each partition. Positions
	// without a topic ID (written before positions carried one, or by a cluster without topic IDs) take the
	// current ID on their next commit; a recreation before that cannot be seen. Default: false, Run stops with
	// ErrTopicRecreated before reading the partition.
	RestartRecreatedTopics bool
	// OnGap, when set, is called for each skip AcceptRetentionGaps or RestartRecreatedTopics accepted, on the
	// group's goroutine before the partition is read (keep it short). Default: nil.
	OnGap func(Gap)

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
// iceberg.Router (routeTarget, route.go). Positions are by partition key, the next offset to read (Position);
// a route's are the lowest over its tables, where the partition resumes.
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
	// brokers follows the client's broker connections: an outage past ConnectTimeout stops Run.
	brokers *brokerWatch

	mu      sync.Mutex // guards w, owned and failed; rebalance callbacks and the poll loop both take it
	w       target
	owned   map[string]map[int32]bool
	failed  error
	crashed bool // set by crash (tests): the callbacks do nothing, as in a killed process

	topicIDs map[string]string  // topic -> its ID's text, learned when its partitions are assigned; under mu
	stopPoll context.CancelFunc // ends the poll loop's wait (fail); under mu
	groupCl  *kgo.Client        // cl, as the assignment callback got it: kgo may resume before New sets cl; under mu

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
	case cfg.SessionTimeout < 0 || cfg.ConnectTimeout < 0:
		return nil, fmt.Errorf("%w: SessionTimeout and ConnectTimeout must not be negative", ErrConfig)
	}
	s := &Sink{cfg: cfg, log: cfg.Logger, dec: cfg.Decoder, owned: map[string]map[int32]bool{},
		topicIDs: map[string]string{}, committed: make(chan struct{}, 1)}
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
	s.brokers = &brokerWatch{log: s.log, writerID: s.cfg.WriterID}
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.WithHooks(s.brokers),
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
	}
	if cfg.SessionTimeout > 0 {
		opts = append(opts, kgo.SessionTimeout(cfg.SessionTimeout),
			kgo.HeartbeatInterval(min(3*time.Second, cfg.SessionTimeout/3)))
	}
	opts = append(opts, cfg.ClientOptions...)
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
		iceberg.WithCheckpoints(), iceberg.WithOnCommit(s.onCommit), iceberg.WithPositionOrder(positionOrder))
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
//
// Before any record is read it checks each position against the cluster (checkResume): a topic deleted and
// created again (another topic ID) and a log that starts after the position (records deleted unread) stop the
// member with ErrTopicRecreated or ErrRetentionGap, unless the Config accepts them.
func (s *Sink) resume(ctx context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	w := s.writerNow()
	var keys, topics []string
	for t, ps := range offsets {
		topics = append(topics, t)
		for p := range ps {
			keys = append(keys, partitionKey(t, p))
		}
	}
	pos, err := w.ResumePositions(ctx, keys...)
	if err != nil {
		// Returning an error makes kgo leave this group session and rejoin: the partitions are not consumed
		// from a guess.
		s.log.Error("kafka: reading the table's positions", "writer", s.cfg.WriterID, "err", err)
		return nil, err
	}
	ids, starts, err := s.inspect(ctx, topics)
	if err != nil {
		s.log.Error("kafka: reading the topics' IDs and log starts", "writer", s.cfg.WriterID, "err", err)
		return nil, err
	}
	s.mu.Lock()
	for t, id := range ids {
		s.topicIDs[t] = id
	}
	s.mu.Unlock()
	out := make(map[string]map[int32]kgo.Offset, len(offsets))
	for t, ps := range offsets {
		out[t] = make(map[int32]kgo.Offset, len(ps))
		from := make(map[int32]string, len(ps))
		for p := range ps {
			key := partitionKey(t, p)
			v, ok := pos[key]
			if !ok {
				out[t][p], from[p] = kgo.NewOffset().AtStart(), "start"
				continue
			}
			tp, err := ParsePosition(v)
			if err != nil {
				return nil, s.stop(fmt.Errorf("kafka: partition %s: %w", key, err))
			}
			at, err := s.checkResume(t, p, tp, Position{Offset: starts[t][p], TopicID: ids[t]})
			if err != nil {
				return nil, s.stop(err)
			}
			if at < 0 { // a recreated topic, started over
				if rt, ok := w.(*routeTarget); ok {
					rt.startOver(key)
				}
				out[t][p], from[p] = kgo.NewOffset().AtStart(), "start"
				continue
			}
			out[t][p], from[p] = kgo.NewOffset().At(at).WithEpoch(-1), strconv.FormatInt(at, 10)
		}
		s.log.Info("kafka: resuming assigned partitions from the table", "writer", s.cfg.WriterID, "topic", t,
			"from", from)
	}
	return out, nil
}

// inspect returns the topics' IDs (their text, "" when the cluster has none) and their partitions' log start
// offsets.
func (s *Sink) inspect(ctx context.Context, topics []string) (map[string]string, map[string]map[int32]int64, error) {
	s.mu.Lock()
	cl := s.groupCl
	s.mu.Unlock()
	if cl == nil {
		return nil, nil, errors.New("kafka: partitions to resume before any assignment")
	}
	adm := kadm.NewClient(cl) // not closed: that would close the sink's client
	md, err := adm.Metadata(ctx, topics...)
	if err != nil {
		return nil, nil, fmt.Errorf("kafka: metadata of %v: %w", topics, err)
	}
	listed, err := adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return nil, nil, fmt.Errorf("kafka: log start offsets of %v: %w", topics, err)
	}
	ids := make(map[string]string, len(topics))
	starts := make(map[string]map[int32]int64, len(topics))
	for _, t := range topics {
		d, ok := md.Topics[t]
		if !ok || d.Err != nil {
			return nil, nil, fmt.Errorf("kafka: metadata of topic %q: %w", t, cmp.Or(d.Err, errors.New("not in the response")))
		}
		ids[t] = topicIDString(d.ID)
		starts[t] = map[int32]int64{}
		for p, lo := range listed[t] {
			if lo.Err != nil {
				return nil, nil, fmt.Errorf("kafka: log start of partition %s: %w", partitionKey(t, p), lo.Err)
			}
			starts[t][p] = lo.Offset
		}
	}
	return ids, starts, nil
}

// checkResume returns the offset a partition resumes at, from its position on the table and where its log
// starts now (with the topic's current ID): the table's offset, or the log start when records after the table's
// position were deleted and AcceptRetentionGaps takes the gap, or -1 (the start) when the topic was created
// again and RestartRecreatedTopics reads it over. Otherwise the error says what happened and what to do.
func (s *Sink) checkResume(topic string, partition int32, tbl, start Position) (int64, error) {
	key := partitionKey(topic, partition)
	gap := Gap{Topic: topic, Partition: partition, Table: tbl, Resume: start}
	switch {
	case tbl.TopicID != "" && start.TopicID != "" && tbl.TopicID != start.TopicID:
		if !s.cfg.RestartRecreatedTopics {
			return 0, fmt.Errorf("%w: topic %q, partition %d: the table's position %s is of topic ID %s, but the "+
				"topic's ID is now %s (deleted and created again, log start %d); the new topic's records are not "+
				"read from the old offsets. Set Config.RestartRecreatedTopics to read the new topic from its start",
				ErrTopicRecreated, topic, partition, tbl, tbl.TopicID, start.TopicID, start.Offset)
		}
		gap.Reason, gap.Skipped = GapTopicRecreated, -1
		s.log.Warn("kafka: topic deleted and created again; reading the new topic from its start (RestartRecreatedTopics)",
			"writer", s.cfg.WriterID, "topic", topic, "partition", partition, "table_position", tbl.String(),
			"topic_id", start.TopicID, "log_start", start.Offset)
	case tbl.Offset < start.Offset:
		if !s.cfg.AcceptRetentionGaps {
			return 0, fmt.Errorf("%w: topic %q, partition %d: the table's position is offset %d, but the log starts "+
				"at %d: offsets %d to %d were deleted (retention, DeleteRecords) before the sink read them. Set "+
				"Config.AcceptRetentionGaps to skip them", ErrRetentionGap, topic, partition, tbl.Offset,
				start.Offset, tbl.Offset, start.Offset-1)
		}
		gap.Reason, gap.Skipped = GapRetention, start.Offset-tbl.Offset
		s.log.Warn("kafka: records deleted before the sink read them; skipping them (AcceptRetentionGaps)",
			"writer", s.cfg.WriterID, "partition", key, "table_offset", tbl.Offset, "log_start", start.Offset,
			"skipped", gap.Skipped)
	default:
		return tbl.Offset, nil
	}
	if s.cfg.OnGap != nil {
		s.cfg.OnGap(gap)
	}
	if gap.Reason == GapTopicRecreated {
		return -1, nil
	}
	return start.Offset, nil
}

// stop makes err the member's error and wakes the poll loop, which then ends Run with it; it returns err.
func (s *Sink) stop(err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail(err)
	return err
}

// assigned records the partitions the member owns (for the group offsets) and logs them.
func (s *Sink) assigned(_ context.Context, cl *kgo.Client, added map[string][]int32) {
	s.logPartitions(slog.LevelInfo, "kafka: partitions assigned", added)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.groupCl = cl
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
	s.logPartitions(slog.LevelInfo, "kafka: partitions revoked; their rows committed", revoked)
}

// logPartitions logs an event of the member's partitions, one line per topic.
func (s *Sink) logPartitions(level slog.Level, msg string, parts map[string][]int32) {
	topics := make([]string, 0, len(parts))
	for t := range parts {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	for _, t := range topics {
		s.log.Log(context.Background(), level, msg, "writer", s.cfg.WriterID, "topic", t,
			"partitions", slices.Sorted(slices.Values(parts[t])))
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
	s.logPartitions(slog.LevelWarn, "kafka: partitions lost (session expired); their uncommitted rows are dropped "+
		"and their new owners resume from the table", lost)
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
	s.log.Warn("kafka: writer reopened after the loss; rejoining the group", "writer", s.cfg.WriterID)
}

// fail records the member's first fatal error; Run returns it. Called with mu held.
func (s *Sink) fail(err error) {
	if s.failed == nil {
		s.failed = err
	}
	if s.stopPoll != nil {
		s.stopPoll()
	}
}
