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

// writeRecords decodes a partition's records and writes them through the partition's source, batch by batch
// (a decoder may stop where the writer schema changes). With a dead-letter topic, a record that does not decode
// and a batch the table rejects do not stop the sink: the bad records are found (a rejected batch is written
// again record by record), produced to the topic, and the rest written in order.
func (s *Sink) writeRecords(ctx context.Context, key string, recs []*kgo.Record) error {
	var dead []*kgo.Record
	limit := len(recs) // the records to decode next: short of a bad one found in the last attempt
	for len(recs) > 0 {
		batch, n, err := s.plan.build(memory.DefaultAllocator, s.dec, recs[:limit])
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
			return err
		}
		err = s.put(ctx, key, batch)
		batch.Release()
		if rejected(err) && s.cfg.DeadLetterTopic != "" {
			d, err := s.putEach(ctx, key, recs[:n])
			if err != nil {
				return err
			}
			dead = append(dead, d...)
		} else if err != nil {
			return s.writerError(fmt.Sprintf("writing partition %s", key), err)
		}
		recs = recs[n:]
		limit = len(recs)
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

// putEach writes records one by one after their batch was rejected, and returns the dead letters of those
// rejected again.
func (s *Sink) putEach(ctx context.Context, key string, recs []*kgo.Record) ([]*kgo.Record, error) {
	var dead []*kgo.Record
	for _, r := range recs {
		batch, _, err := s.plan.build(memory.DefaultAllocator, s.dec, []*kgo.Record{r})
		if err == nil {
			err = s.put(ctx, key, batch)
			batch.Release()
		}
		switch {
		case err == nil:
		case rejected(err) || errors.Is(err, ErrDecode):
			dead = append(dead, s.deadLetter(r, err))
		default:
			return nil, s.writerError(fmt.Sprintf("writing partition %s", key), err)
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

// put writes a batch of a partition's records into the table: Source.Write, or Source.Apply for a change
// decoder's rows (tombstones dropped).
func (s *Sink) put(ctx context.Context, key string, batch arrow.RecordBatch) error {
	cd, ok := s.dec.(changeDecoder)
	if !ok {
		return s.w.Source(key).Write(ctx, batch)
	}
	changes, err := dropNullOps(batch, cd.opColumn())
	if err != nil || changes == nil {
		return err
	}
	defer changes.Release()
	return s.w.Source(key).Apply(ctx, changes)
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
