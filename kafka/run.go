package kafka

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/icewriter/iceberg"
)

// errCrashed ends Run after crash (tests).
var errCrashed = errors.New("kafka: member crashed")

// shutdownTimeout bounds the graceful end of Run once its ctx is done: the last commit and leaving the group.
const shutdownTimeout = time.Minute

// topicIDsEvery is how often a member checks that the topics it reads were not created again (checkTopicIDs).
const topicIDsEvery = 2 * time.Second

// flushFirst is a member's error after which Run still commits what the member read (checkTopicIDs).
type flushFirst struct{ error }

func (f flushFirst) Unwrap() error { return f.error }

// defaultConnectTimeout is Config.ConnectTimeout's default.
const defaultConnectTimeout = 30 * time.Second

// offsetsEvery is how often the group offsets follow the table when no commit signal comes (Config.Writer).
const offsetsEvery = time.Second

// Run consumes until ctx ends or the member fails, then leaves the group: it commits the rows polled so far
// (the revoked partitions' positions with them), commits the group offsets and closes the writer. It returns nil
// after a graceful end, else the error that stopped the member: one wrapping iceberg.ErrFenced when a newer
// process took the member's writer ID over, one wrapping iceberg.ErrPositionMoved when the member was paused
// past its session timeout and another member committed its partitions meanwhile (nothing of the paused
// member's uncommitted rows lands; start the member again to rejoin), a *RecordError for a record that cannot be decoded,
// one wrapping ErrUnreachable when no broker answered within Config.ConnectTimeout, ErrRetentionGap or
// ErrTopicRecreated for an assigned partition the table's position cannot resume exactly (before any of its
// records is read), the writer's error otherwise.
func (s *Sink) Run(ctx context.Context) error {
	if err := s.connect(ctx); err != nil {
		s.cl.Close()
		end, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
		defer cancel()
		_ = s.writerNow().Abort(end)
		return err
	}
	offsetsDone := make(chan struct{})
	offsetsCtx, stopOffsets := context.WithCancel(context.WithoutCancel(ctx))
	go func() { defer close(offsetsDone); s.followTable(offsetsCtx) }()
	watchCtx, stopWatch := context.WithCancel(ctx)
	go s.brokers.watch(watchCtx, cmp.Or(s.cfg.ConnectTimeout, defaultConnectTimeout), s.cfg.Brokers, func(err error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.fail(err)
	})
	err := s.consume(ctx)
	stopWatch()
	s.mu.Lock()
	crashed := s.crashed
	s.mu.Unlock()
	if crashed {
		stopOffsets()
		<-offsetsDone
		return errCrashed
	}
	end, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if ff := (flushFirst{}); err == nil || errors.As(err, &ff) {
		// One commit for every partition's polled rows, before leaving: the revocations that follow find
		// nothing left to commit. Also when a topic was created again under the member: the old topic's
		// records it read are gone from Kafka, they would never be read again.
		if ferr := s.writerNow().Flush(end); ferr != nil {
			err = errors.Join(err, ferr)
		}
	}
	stopOffsets()
	<-offsetsDone
	if err == nil {
		// While the client is still a member: a closed client commits nothing.
		s.commitGroupOffsets(end, s.ownedSnapshot())
	}
	s.cl.Close() // leaves the group; the revoke callback commits what is left (nothing, after Flush)
	s.mu.Lock()
	if err == nil {
		err = s.failed
	}
	w := s.w
	s.mu.Unlock()
	if err != nil {
		_ = w.Abort(end)
		return err
	}
	return w.Close(end)
}

func (s *Sink) writerNow() target {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w
}

// connect waits for a seed broker to answer, retrying each second, for at most Config.ConnectTimeout: kgo
// itself retries forever, and a member that cannot reach the cluster would otherwise look like one that has
// nothing to read. It returns nil when ctx ends first (Run then ends gracefully).
func (s *Sink) connect(ctx context.Context) error {
	timeout := cmp.Or(s.cfg.ConnectTimeout, defaultConnectTimeout)
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	retry := time.NewTicker(time.Second)
	defer retry.Stop()
	for {
		err := s.cl.Ping(pctx)
		switch {
		case err == nil || ctx.Err() != nil:
			return nil
		case pctx.Err() != nil:
			return fmt.Errorf("%w: member with writer ID %q: brokers %v did not answer within %v (Config.ConnectTimeout): %w",
				ErrUnreachable, s.cfg.WriterID, s.cfg.Brokers, timeout, err)
		}
		s.log.Warn("kafka: no broker answered; retrying", "writer", s.cfg.WriterID, "brokers", s.cfg.Brokers, "err", err)
		select {
		case <-pctx.Done():
		case <-retry.C:
		}
	}
}

// consume is the poll loop: it returns nil when ctx ends, or the member's error. A failure found outside the
// loop (a rebalance callback: fail) ends its wait at once.
func (s *Sink) consume(ctx context.Context) error {
	pollCtx, stop := context.WithCancel(ctx)
	defer stop()
	s.mu.Lock()
	s.stopPoll = stop
	err := s.failed
	s.mu.Unlock()
	if err != nil {
		return err
	}
	for {
		fetches := s.cl.PollRecords(pollCtx, s.cfg.MaxPollRecords)
		s.mu.Lock()
		err := s.failed
		s.mu.Unlock()
		if err != nil {
			s.cl.AllowRebalance()
			return err
		}
		if fetches.IsClientClosed() || ctx.Err() != nil {
			s.cl.AllowRebalance()
			return nil
		}
		fetches.EachError(func(t string, p int32, err error) {
			s.log.Warn("kafka: fetch", "topic", t, "partition", p, "err", err)
		})
		err = s.writePoll(ctx, fetches)
		s.cl.AllowRebalance()
		if err != nil {
			return err
		}
	}
}

// writePoll writes a poll's records through their partitions' sources and checkpoints every partition's next
// offset, so that no row is ever left after its partition's position when a rebalance comes in.
func (s *Sink) writePoll(ctx context.Context, fetches kgo.Fetches) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.crashed {
		return errCrashed
	}
	positions := map[string]string{}
	var err error
	fetches.EachPartition(func(p kgo.FetchTopicPartition) {
		if err != nil || len(p.Records) == 0 {
			return
		}
		key := partitionKey(p.Topic, p.Partition)
		if e := s.writeRecords(ctx, key, p.Records); e != nil {
			err = s.writerError(fmt.Sprintf("writing partition %s", key), e)
			return
		}
		positions[key] = Position{Offset: p.Records[len(p.Records)-1].Offset + 1, TopicID: s.topicIDs[p.Topic]}.String()
	})
	if err != nil {
		return err
	}
	if len(positions) == 0 {
		return nil
	}
	if err := s.w.CheckpointPositions(ctx, positions); err != nil {
		return s.writerError("checkpointing", err)
	}
	return nil
}

// writerError says what failed, and names fencing plainly: another process runs with this member's writer ID.
func (s *Sink) writerError(what string, err error) error {
	if errors.Is(err, iceberg.ErrPositionMoved) {
		return fmt.Errorf("kafka: member with writer ID %q stops: another member committed one of its partitions "+
			"while it was paused (its session expired and the group moved the partition); its uncommitted rows "+
			"are dropped: %w", s.cfg.WriterID, err)
	}
	if errors.Is(err, iceberg.ErrFenced) {
		return fmt.Errorf("kafka: member with writer ID %q stops: a newer process took the ID over: %w", s.cfg.WriterID, err)
	}
	return fmt.Errorf("kafka: %s: %w", what, err)
}

// followTable commits the group offsets after table commits, for monitoring (lag) only: on each commit signal,
// and every offsetsEvery when the sink did not open the writer and so gets none.
func (s *Sink) followTable(ctx context.Context) {
	t := time.NewTicker(offsetsEvery)
	defer t.Stop()
	ids := time.NewTicker(topicIDsEvery)
	defer ids.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ids.C:
			s.checkTopicIDs(ctx)
			continue
		case <-s.committed:
		case <-t.C:
			if s.cfg.Writer == nil {
				continue
			}
		}
		s.commitGroupOffsets(ctx, s.ownedSnapshot())
	}
}

// checkTopicIDs stops the member when a topic it reads was deleted and created again while it ran: kgo keeps
// the old topic ID and fetches nothing more (it never reads the new topic from the old offsets), and nothing
// else would say so. Run commits what it read of the old topic and returns ErrTopicRecreated; started again,
// the member checks the new topic as any assigned partition.
func (s *Sink) checkTopicIDs(ctx context.Context) {
	s.mu.Lock()
	known := make(map[string]string, len(s.topicIDs))
	for t, id := range s.topicIDs {
		if id != "" {
			known[t] = id
		}
	}
	s.mu.Unlock()
	if len(known) == 0 {
		return
	}
	topics := make([]string, 0, len(known))
	for t := range known {
		topics = append(topics, t)
	}
	md, err := kadm.NewClient(s.cl).Metadata(ctx, topics...)
	if err != nil {
		return // an outage: the poll loop and the next check see it
	}
	for t, id := range known {
		d, ok := md.Topics[t]
		if now := topicIDString(d.ID); ok && d.Err == nil && now != "" && now != id {
			s.stop(flushFirst{fmt.Errorf("%w: topic %q was deleted and created again while the member ran (topic ID %s, "+
				"now %s); what it read of the old topic is committed. Start the member again: the new topic is then "+
				"checked as any assigned partition (Config.RestartRecreatedTopics reads it from its start)",
				ErrTopicRecreated, t, id, now)})
			return
		}
	}
}

func (s *Sink) ownedSnapshot() map[string]map[int32]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]map[int32]bool, len(s.owned))
	for t, ps := range s.owned {
		out[t] = make(map[int32]bool, len(ps))
		for p := range ps {
			out[t][p] = true
		}
	}
	return out
}

// commitGroupOffsets commits the table's positions of the owned partitions as the group's offsets, but none of
// another topic ID (a recreated topic not written yet). Best effort: the group's offsets are never read back.
func (s *Sink) commitGroupOffsets(ctx context.Context, owned map[string]map[int32]bool) {
	pos, err := s.writerNow().Positions(ctx)
	if err != nil {
		return
	}
	s.mu.Lock()
	ids := make(map[string]string, len(s.topicIDs))
	for t, id := range s.topicIDs {
		ids[t] = id
	}
	s.mu.Unlock()
	offsets := map[string]map[int32]kgo.EpochOffset{}
	for _, t := range s.cfg.Topics {
		for key, v := range pos {
			if len(key) <= len(t) || key[:len(t)] != t || key[len(t)] != '/' {
				continue
			}
			p, err1 := strconv.ParseInt(key[len(t)+1:], 10, 32)
			o, err2 := ParsePosition(v)
			if err1 != nil || err2 != nil || !owned[t][int32(p)] || o.TopicID != "" && ids[t] != "" && o.TopicID != ids[t] {
				continue
			}
			if offsets[t] == nil {
				offsets[t] = map[int32]kgo.EpochOffset{}
			}
			offsets[t][int32(p)] = kgo.EpochOffset{Epoch: -1, Offset: o.Offset}
		}
	}
	if len(offsets) > 0 {
		s.cl.CommitOffsetsSync(ctx, offsets, nil)
	}
}

// crash ends the member as a killed process would: its uncommitted rows are dropped (an in-flight commit
// resolves), the rebalance callbacks do nothing and the client closes. For tests.
func (s *Sink) crash(ctx context.Context) {
	s.mu.Lock()
	s.crashed = true
	w := s.w
	s.mu.Unlock()
	_ = w.Abort(ctx)
	s.cl.Close()
}

func randomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
