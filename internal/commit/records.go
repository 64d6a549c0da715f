package commit

import (
	"encoding/json"

	"github.com/apache/iceberg-go/table"
)

// Snapshot summary and table property keys of runs.
const (
	SummarySeq        = "icewriter.seq"
	SummaryCheckpoint = "icewriter.checkpoint"
	// SummaryOperation names what a snapshot of the writer's own that is not a run does ("compact").
	SummaryOperation     = "icewriter.operation"
	OpCompact            = "compact" // the SummaryOperation of a compaction's snapshot
	CheckpointPropPrefix = "icewriter.checkpoint."
	// CommittedPropPrefix names a stable writer's commit record: the (epoch, seq, snapshot id) of its newest
	// committed run, set in the same catalog commit as the run. Unlike the run's snapshot it survives snapshot
	// expiry, so a retry after a lost reply can tell "applied" from "not applied" whatever another writer
	// expired meanwhile.
	CommittedPropPrefix = "icewriter.committed."
)

// CheckpointMirror is the table property copy of a writer's newest committed token, so that snapshot expiry
// cannot erase it.
type CheckpointMirror struct {
	Token      string `json:"token"`
	SnapshotID int64  `json:"snapshot-id"`
	SeqNumber  int64  `json:"sequence-number"`
	Seq        int64  `json:"seq"`
	Epoch      int64  `json:"epoch"`
}

// CommitRecord is a stable writer's newest committed run (see CommittedPropPrefix).
type CommitRecord struct {
	Epoch      int64 `json:"epoch"`
	Seq        int64 `json:"seq"`
	SnapshotID int64 `json:"snapshot-id"`
}

// ReadCommitRecord reads a writer ID's commit record from the table's properties.
func ReadCommitRecord(meta table.Metadata, id string) (CommitRecord, bool) {
	return ReadJSONProp[CommitRecord](meta, CommittedPropPrefix+id)
}

// ReadJSONProp decodes the JSON table property key; false when it is missing or does not decode.
func ReadJSONProp[T any](meta table.Metadata, key string) (T, bool) {
	var v T
	s, ok := meta.Properties()[key]
	if !ok || json.Unmarshal([]byte(s), &v) != nil {
		var zero T
		return zero, false
	}
	return v, true
}
