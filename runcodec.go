package iceberg

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
)

// runEnvelope is a Run's wire form: markers as JSON, data files as an Avro manifest (Iceberg's own encoding
// of file metadata, statistics and partition values included).
type runEnvelope struct {
	Table          []string `json:"table"`
	Branch         string   `json:"branch"`
	WriterID       string   `json:"writer-id"`
	StableID       bool     `json:"stable-id"`
	Epoch          int64    `json:"epoch"`
	FirstSeq       int64    `json:"first-seq"`
	LastSeq        int64    `json:"last-seq"`
	Token          string   `json:"token,omitempty"`
	HasToken       bool     `json:"has-token,omitempty"`
	BaseSnapshotID *int64   `json:"base-snapshot-id,omitempty"`
	Rows           int64    `json:"rows"`
	Bytes          int64    `json:"bytes"`
	FormatVersion  int      `json:"format-version"`
	SpecID         int      `json:"spec-id"`
	Files          int      `json:"files"`
	Manifest       []byte   `json:"manifest,omitempty"`
}

// MarshalBinary encodes the run so that it can be sent to another process (a coordinator committing for many
// writers). It needs the partition spec and schema the files were written with, which runs built by a Writer
// carry.
func (r *Run) MarshalBinary() ([]byte, error) {
	env := runEnvelope{
		Table: r.Table, Branch: r.Branch, WriterID: r.WriterID, StableID: r.StableID, Epoch: r.Epoch,
		FirstSeq: r.FirstSeq, LastSeq: r.LastSeq, Token: r.Token, HasToken: r.HasToken,
		BaseSnapshotID: r.BaseSnapshotID, Rows: r.Rows, Bytes: r.Bytes, FormatVersion: r.formatVersion,
		Files: len(r.DataFiles),
	}
	if len(r.DataFiles) > 0 {
		if r.schema == nil {
			return nil, fmt.Errorf("iceberg: marshal run: no schema (runs built by a Writer carry one)")
		}
		env.SpecID = r.spec.ID()
		entries := make([]ice.ManifestEntry, len(r.DataFiles))
		snap := int64(-1)
		for i, df := range r.DataFiles {
			entries[i] = ice.NewManifestEntryBuilder(ice.EntryStatusADDED, &snap, df).Build()
		}
		version := max(r.formatVersion, 2)
		var buf bytes.Buffer
		if _, err := ice.WriteManifest("run.avro", &buf, version, r.spec, r.schema, snap, entries); err != nil {
			return nil, fmt.Errorf("iceberg: marshal run files: %w", err)
		}
		env.Manifest = buf.Bytes()
	}
	return json.Marshal(env)
}

// UnmarshalBinary decodes a run encoded by MarshalBinary.
func (r *Run) UnmarshalBinary(data []byte) error {
	var env runEnvelope
	if err := json.Unmarshal(data, &env); err != nil {
		return fmt.Errorf("iceberg: unmarshal run: %w", err)
	}
	*r = Run{
		Table: table.Identifier(env.Table), Branch: env.Branch, WriterID: env.WriterID, StableID: env.StableID,
		Epoch: env.Epoch, FirstSeq: env.FirstSeq, LastSeq: env.LastSeq, Token: env.Token, HasToken: env.HasToken,
		BaseSnapshotID: env.BaseSnapshotID, Rows: env.Rows, Bytes: env.Bytes, formatVersion: env.FormatVersion,
	}
	if env.Files == 0 {
		return nil
	}
	version := max(env.FormatVersion, 2)
	mf := ice.NewManifestFile(version, "run.avro", int64(len(env.Manifest)), int32(env.SpecID), -1).Build()
	entries, err := ice.ReadManifest(mf, bytes.NewReader(env.Manifest), true)
	if err != nil {
		return fmt.Errorf("iceberg: unmarshal run files: %w", err)
	}
	if len(entries) != env.Files {
		return fmt.Errorf("iceberg: unmarshal run: %d files decoded, %d encoded", len(entries), env.Files)
	}
	for _, e := range entries {
		r.DataFiles = append(r.DataFiles, e.DataFile())
	}
	return nil
}

// NewCatalogCommitter returns the default Committer on its own: it commits runs through cat with idempotency
// markers, retries (within timeout, per run) and fencing. A coordinator that receives runs from many writer
// processes (Run.MarshalBinary) commits them with it; runs of one writer must be committed in sequence order.
func NewCatalogCommitter(cat catalog.Catalog, timeout time.Duration) Committer {
	return newCatalogCommitter(cat, nil, slog.Default(), timeout)
}
