package kafka

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"github.com/icewriter/iceberg"
)

// Position is a partition's position on the table: the next offset to read and the ID of the topic it is an
// offset of. Its text (String, ParsePosition) is the offset in decimal, then "@" and the topic ID as Kafka's
// tools print it (base64, URL alphabet, no padding): "450@J1jqWWKdQJaSrMmCWj8spg". A cluster that reports no
// topic IDs, and tables written before positions carried them, have the offset alone ("450").
type Position struct {
	Offset  int64
	TopicID string // "" when unknown
}

// String returns the position's text.
func (p Position) String() string {
	s := strconv.FormatInt(p.Offset, 10)
	if p.TopicID != "" {
		s += "@" + p.TopicID
	}
	return s
}

// ParsePosition parses a position's text (see Position).
func ParsePosition(s string) (Position, error) {
	off, id, _ := strings.Cut(s, "@")
	n, err := strconv.ParseInt(off, 10, 64)
	if err != nil || n < 0 {
		return Position{}, fmt.Errorf("kafka: position %q: want an offset, optionally followed by @ and a topic ID", s)
	}
	return Position{Offset: n, TopicID: id}, nil
}

// topicIDString is a topic ID's text, "" for the zero ID (a cluster without topic IDs).
func topicIDString(id [16]byte) string {
	if id == [16]byte{} {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// positionOrder is the sink's iceberg.WithPositionOrder: comparePositions for every pair, so a Checkpoint of a
// position before the partition's last one is refused (iceberg.ErrPositionBackwards) and a Route's router finds
// the lowest of a partition's positions over its tables.
func positionOrder(_, a, b string) (int, bool) { return comparePositions(a, b), true }

// comparePositions orders a partition's positions: by offset.
// A position of another topic ID (a topic deleted and created again) is never below one of the current ID, so
// a table's position of the old topic covers no record of the new one. Texts that are not positions compare as
// iceberg.ComparePositions does.
func comparePositions(a, b string) int {
	pa, errA := ParsePosition(a)
	pb, errB := ParsePosition(b)
	if errA != nil || errB != nil {
		return iceberg.ComparePositions(a, b)
	}
	if pa.TopicID != "" && pb.TopicID != "" && pa.TopicID != pb.TopicID {
		return 1
	}
	switch {
	case pa.Offset < pb.Offset:
		return -1
	case pa.Offset > pb.Offset:
		return 1
	}
	return 0
}
