package commit

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"

	"github.com/apache/iceberg-go/table"
)

// EpochPropPrefix + a writer ID names the table property holding the ID's epoch (see TableEpoch).
const EpochPropPrefix = "icewriter.epoch."

// Ancestors walks the branch head's ancestry (newest first) until stop returns true or the chain ends.
func Ancestors(meta table.Metadata, branch string, fn func(s *table.Snapshot) (stop bool)) {
	snap := meta.SnapshotByName(branch)
	seen := map[int64]bool{}
	for snap != nil && !seen[snap.SnapshotID] {
		seen[snap.SnapshotID] = true
		if fn(snap) {
			return
		}
		if snap.ParentSnapshotID == nil {
			return
		}
		snap = meta.SnapshotByID(*snap.ParentSnapshotID)
	}
}

// HeadID is the branch head's snapshot id, or nil for an empty table.
func HeadID(meta table.Metadata, branch string) *int64 {
	if s := meta.SnapshotByName(branch); s != nil {
		id := s.SnapshotID
		return &id
	}
	return nil
}

// SummaryProp is the snapshot summary's value for key.
func SummaryProp(s *table.Snapshot, key string) (string, bool) {
	if s.Summary == nil || s.Summary.Properties == nil {
		return "", false
	}
	v, ok := s.Summary.Properties[key]
	return v, ok
}

// TableEpoch is the epoch the table holds for writer ID id (0: none): a writer fenced it with that epoch.
func TableEpoch(meta table.Metadata, id string) int64 {
	n, _ := strconv.ParseInt(meta.Properties()[EpochPropPrefix+id], 10, 64)
	return n
}

// FindNonce walks the branch ancestry for the snapshot whose summary holds nonce under key: the proof of a
// transaction that marks its snapshot with a nonce of its own (the fence, a compaction).
func FindNonce(meta table.Metadata, branch, key, nonce string) (*table.Snapshot, bool) {
	var found *table.Snapshot
	Ancestors(meta, branch, func(s *table.Snapshot) bool {
		if v, _ := SummaryProp(s, key); v == nonce {
			found = s
			return true
		}
		return false
	})
	return found, found != nil
}

// NonceProof proves a transaction applied by its nonce. A walk that does not find it means "not applied" even
// when expiry cut it short: the transactions that use it build again from what the table holds, which is
// right whether or not an earlier attempt applied.
func NonceProof(branch, key, nonce string, found func(*table.Snapshot)) func(*table.Table, *int64, bool) Outcome {
	return func(tbl *table.Table, _ *int64, _ bool) Outcome {
		s, ok := FindNonce(tbl.Metadata(), branch, key, nonce)
		if !ok {
			return NotApplied
		}
		if found != nil {
			found(s)
		}
		return Applied
	}
}

// DetachSnapshots returns updates with every add-snapshot update replaced by one whose snapshot is decoded from
// the update's JSON form, as a REST catalog receives it. iceberg-go's snapshot producer stages a snapshot whose
// ParentSnapshotID points into the producer and whose SchemaID points into the transaction's metadata builder
// (table/snapshot_producers.go), and a catalog that applies updates in process (the SQL catalogs) copies that
// snapshot, pointers and all, into the metadata it returns. That metadata then kept the producer (every file it
// added and removed), its transaction and the table the transaction started from, whose metadata kept the
// commit before it the same way: every data file a writer ever committed stayed reachable (1 KiB to 3 KiB
// each; 86,000 a batch in a high-cardinality fan-out). The replacement drops the update's runtime-only fields
// (the manifest list rebuild of Transaction.Commit's own retry), which only Transaction.Commit reads, never a
// catalog. It costs a JSON round trip of one snapshot per attempt, not of the table's metadata.
func DetachSnapshots(updates []table.Update) ([]table.Update, error) {
	var out []table.Update
	for i, u := range updates {
		if u.Action() != table.UpdateAddSnapshot {
			continue
		}
		raw, err := json.Marshal(u)
		if err != nil {
			return nil, fmt.Errorf("iceberg: encode the snapshot to commit: %w", err)
		}
		var decoded struct {
			Snapshot *table.Snapshot `json:"snapshot"`
		}
		if err := json.Unmarshal(raw, &decoded); err != nil {
			return nil, fmt.Errorf("iceberg: decode the snapshot to commit: %w", err)
		}
		if decoded.Snapshot == nil {
			return nil, fmt.Errorf("iceberg: the add-snapshot update to commit encodes no snapshot: %s", raw)
		}
		if out == nil {
			out = slices.Clone(updates)
		}
		out[i] = table.NewAddSnapshotUpdate(decoded.Snapshot)
	}
	if out == nil {
		return updates, nil
	}
	return out, nil
}

// PostCommit runs what Transaction.Commit runs after a successful catalog commit: update hooks (snapshot
// expiry deletes files there) and, when ownsMetadata, the removal of metadata files that fell out of the log.
// A REST catalog server writes a table's metadata files itself and applies the table's
// write.metadata.delete-after-commit.enabled where it writes them (as Java's REST catalog leaves it to the
// server); a client that deleted them too would spend a HEAD and a DELETE per commit on files it never wrote,
// and may not be allowed to. Every other catalog writes them through this client, which removes them.
func PostCommit(ctx context.Context, log *slog.Logger, pre, post *table.Table, updates []table.Update, ownsMetadata bool) {
	for _, u := range updates {
		if err := u.PostCommit(ctx, pre, post); err != nil {
			log.Warn("iceberg: post-commit cleanup failed", "table", post.Identifier(), "err", err)
		}
	}
	if !ownsMetadata || !post.Properties().GetBool(table.MetadataDeleteAfterCommitEnabledKey, table.MetadataDeleteAfterCommitEnabledDefault) {
		return
	}
	keep := map[string]bool{post.MetadataLocation(): true}
	for e := range post.Metadata().PreviousFiles() {
		keep[e.MetadataFile] = true
	}
	var drop []string
	for e := range pre.Metadata().PreviousFiles() {
		if !keep[e.MetadataFile] {
			drop = append(drop, e.MetadataFile)
		}
	}
	if len(drop) == 0 {
		return
	}
	fs, err := post.FS(ctx)
	if err != nil {
		return
	}
	for _, f := range drop {
		if err := fs.Remove(f); err != nil {
			log.Debug("iceberg: remove old metadata file", "file", f, "err", err)
		}
	}
}

// NewestOnAncestry walks the branch ancestry for the newest snapshot that match accepts (nil: none) and returns
// it with the sequence number of the oldest ancestor the walk reached (-1: the branch has no snapshot).
func NewestOnAncestry(meta table.Metadata, branch string, match func(*table.Snapshot) bool) (*table.Snapshot, int64) {
	var found *table.Snapshot
	var oldest int64 = -1
	Ancestors(meta, branch, func(s *table.Snapshot) bool {
		oldest = s.SequenceNumber
		if match(s) {
			found = s
			return true
		}
		return false
	})
	return found, oldest
}

// MirrorTrusted reports whether a table property mirroring a snapshot's summary (the snapshot id and sequence
// number it names) stands for the branch ancestry, whose walk ended at an ancestor of sequence number oldest
// without finding that summary: only when the snapshot is gone (expired) and older than every retained ancestor.
// A snapshot still present but off the ancestry was rolled back. Expiry done by a writer refreshes every mirror
// from the ancestry first (the root's refreshMirrors, RefreshPositionsMirror), so a rolled-back value does not survive it.
func MirrorTrusted(meta table.Metadata, snapshotID, seqNumber, oldest int64) bool {
	return meta.SnapshotByID(snapshotID) == nil && (oldest < 0 || seqNumber <= oldest)
}

// MustJSON encodes v, a plain struct of strings and integers, as JSON.
func MustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // plain structs of strings and integers always marshal
	}
	return string(b)
}
