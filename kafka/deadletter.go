package kafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/icewriter/iceberg"
)

// Headers a dead-letter record carries besides the original record's.
const (
	HeaderError     = "iceberg.error"     // why the record was not written
	HeaderTopic     = "iceberg.topic"     // the record's topic
	HeaderPartition = "iceberg.partition" // its partition, in decimal
	HeaderOffset    = "iceberg.offset"    // its offset, in decimal
)

// recordGroup is records of one partition that go to one table: the plan that builds their rows and put, which
// writes a batch of them through the partition's source.
type recordGroup struct {
	plan *rowPlan
	recs []*kgo.Record
	put  func(context.Context, arrow.RecordBatch) error
}

// writeRecords writes a partition's records: to the table, or split over a route's tables. With a dead-letter
// topic, the bad records (see Config.DeadLetterTopic) go there, produced before writeRecords returns.
func (s *Sink) writeRecords(ctx context.Context, key string, recs []*kgo.Record) error {
	var groups []recordGroup
	var dead []*kgo.Record
	switch t := s.w.(type) {
	case writerTarget:
		src := t.Source(key)
		write := src.Write
		if s.cfg.Upsert {
			write = src.Upsert
		}
		groups = []recordGroup{{plan: s.plan, recs: recs, put: s.putter(write, src.Apply)}}
	case *routeTarget:
		var bad []*RecordError
		var err error
		if groups, bad, err = t.groups(ctx, s, key, recs); err != nil {
			return err
		}
		for _, re := range bad {
			if s.cfg.DeadLetterTopic == "" {
				return re
			}
			dead = append(dead, s.deadLetter(re.record, re.Err))
		}
	}
	for _, g := range groups {
		d, err := s.writeGroup(ctx, key, g)
		if err != nil {
			return err
		}
		dead = append(dead, d...)
	}
	if len(dead) == 0 {
		return nil
	}
	if err := s.cl.ProduceSync(ctx, dead...).FirstErr(); err != nil {
		return fmt.Errorf("kafka: producing %d records of partition %s to dead-letter topic %q: %w", len(dead), key,
			s.cfg.DeadLetterTopic, err)
	}
	s.log.Warn("kafka: records sent to the dead-letter topic", "partition", key, "records", len(dead),
		"topic", s.cfg.DeadLetterTopic)
	return nil
}

// putter is put for a target's write and apply: apply, with tombstones dropped, for a change decoder's rows.
func (s *Sink) putter(write, apply func(context.Context, arrow.RecordBatch) error) func(context.Context, arrow.RecordBatch) error {
	cd, ok := s.dec.(changeDecoder)
	if !ok {
		return write
	}
	return func(ctx context.Context, batch arrow.RecordBatch) error {
		changes, err := dropNullOps(batch, cd.opColumn())
		if err != nil || changes == nil {
			return err
		}
		defer changes.Release()
		return apply(ctx, changes)
	}
}

// writeGroup decodes a group's records and writes them, batch by batch (a decoder may stop where the writer
// schema changes). With a dead-letter topic, a record that does not decode and a batch the table rejects do not
// stop the sink: the bad records are found (a rejected batch is written again record by record) and returned
// as dead letters, and the rest written in order.
func (s *Sink) writeGroup(ctx context.Context, key string, g recordGroup) ([]*kgo.Record, error) {
	var dead []*kgo.Record
	recs := g.recs
	limit := len(recs) // the records to decode next: short of a bad one found in the last attempt
	for len(recs) > 0 {
		batch, n, err := g.plan.build(memory.DefaultAllocator, s.dec, recs[:limit])
		if re := (*RecordError)(nil); errors.As(err, &re) && s.cfg.DeadLetterTopic != "" {
			if re.index == 0 {
				dead = append(dead, s.deadLetter(recs[0], re.Err))
				recs = recs[1:]
				limit = len(recs)
			} else {
				limit = re.index // the good records before it first
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		err = g.put(ctx, batch)
		batch.Release()
		if rejected(err) && s.cfg.DeadLetterTopic != "" {
			d, err := s.putEach(ctx, key, g, recs[:n])
			if err != nil {
				return nil, err
			}
			dead = append(dead, d...)
		} else if err != nil {
			return nil, err // writePoll says what failed
		}
		recs = recs[n:]
		limit = len(recs)
	}
	return dead, nil
}

// putEach writes records one by one after their batch was rejected, and returns the dead letters of those
// rejected again.
func (s *Sink) putEach(ctx context.Context, key string, g recordGroup, recs []*kgo.Record) ([]*kgo.Record, error) {
	var dead []*kgo.Record
	for _, r := range recs {
		batch, _, err := g.plan.build(memory.DefaultAllocator, s.dec, []*kgo.Record{r})
		if err == nil {
			err = g.put(ctx, batch)
			batch.Release()
		}
		switch {
		case err == nil:
		case rejected(err) || errors.Is(err, ErrDecode):
			dead = append(dead, s.deadLetter(r, err))
		default:
			return nil, err // writePoll says what failed
		}
	}
	return dead, nil
}

// rejected reports whether the writer turned rows down (nothing of the call accepted, the writer usable), as
// opposed to failing.
func rejected(err error) bool {
	var ce *iceberg.ColumnError
	return errors.As(err, &ce) && !errors.Is(err, iceberg.ErrWriterFailed) && !errors.Is(err, iceberg.ErrClosed)
}

// deadLetter is the record for the dead-letter topic: the original's key, value and headers, and the error.
func (s *Sink) deadLetter(r *kgo.Record, err error) *kgo.Record {
	h := append(append([]kgo.RecordHeader(nil), r.Headers...),
		kgo.RecordHeader{Key: HeaderError, Value: []byte(err.Error())},
		kgo.RecordHeader{Key: HeaderTopic, Value: []byte(r.Topic)},
		kgo.RecordHeader{Key: HeaderPartition, Value: strconv.AppendInt(nil, int64(r.Partition), 10)},
		kgo.RecordHeader{Key: HeaderOffset, Value: strconv.AppendInt(nil, r.Offset, 10)})
	return &kgo.Record{Topic: s.cfg.DeadLetterTopic, Key: r.Key, Value: r.Value, Headers: h}
}
