package commit

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// runEnvelope is a Run's wire form: markers as JSON, data and delete files as Avro manifests (Iceberg's own
// encoding of file metadata, statistics and partition values).
type runEnvelope struct {
	Table          []string          `json:"table"`
	Branch         string            `json:"branch"`
	WriterID       string            `json:"writer-id"`
	StableID       bool              `json:"stable-id"`
	Epoch          int64             `json:"epoch"`
	FirstSeq       int64             `json:"first-seq"`
	LastSeq        int64             `json:"last-seq"`
	Token          string            `json:"token,omitempty"`
	HasToken       bool              `json:"has-token,omitempty"`
	BaseSnapshotID *int64            `json:"base-snapshot-id,omitempty"`
	Rows           int64             `json:"rows"`
	Bytes          int64             `json:"bytes"`
	FormatVersion  int               `json:"format-version"`
	SpecID         int               `json:"spec-id"`
	IndexBase      *int64            `json:"index-base,omitempty"`
	KeyFieldIDs    []int             `json:"key-field-ids,omitempty"`
	Deletes        DeleteFiles       `json:"deletes-allowed,omitempty"`
	Positions      map[string]string `json:"positions,omitempty"`
	PositionBases  map[string]string `json:"position-bases,omitempty"`
	Segments       []segmentEnvelope `json:"segments"`
}

type segmentEnvelope struct {
	LastSeq     int64  `json:"last-seq"`
	Token       string `json:"token,omitempty"`
	HasToken    bool   `json:"has-token,omitempty"`
	Rows        int64  `json:"rows"`
	DataFiles   int    `json:"data-files"`
	DeleteFiles int    `json:"delete-files"`
	Data        []byte `json:"data,omitempty"`
	Deletes     []byte `json:"deletes,omitempty"`
	DeleteKeys  []byte `json:"delete-keys,omitempty"` // Arrow IPC stream of the copy-on-write keys
	// The key index's position deletes (deletion vectors on v3, position delete files on v2) and those they
	// supersede, as delete manifests, and the keys for the fallback as an Arrow IPC stream: without them a coordinator would commit an upsert's new
	// row beside the old one.
	DVFiles      int    `json:"dv-files,omitempty"`
	DVs          []byte `json:"dvs,omitempty"`
	RemovedDVs   int    `json:"removed-dv-files,omitempty"`
	Removed      []byte `json:"removed-dvs,omitempty"`
	FallbackKeys []byte `json:"fallback-keys,omitempty"`
}

// MarshalBinary encodes the run so that it can be sent to another process (a coordinator committing for many
// writers). Runs built by a Writer carry the partition spec and schema their files were written with.
func (r *Run) MarshalBinary() ([]byte, error) {
	env := runEnvelope{
		Table: r.Table, Branch: r.Branch, WriterID: r.WriterID, StableID: r.StableID, Epoch: r.Epoch,
		FirstSeq: r.FirstSeq, LastSeq: r.LastSeq, Token: r.Token, HasToken: r.HasToken,
		BaseSnapshotID: r.BaseSnapshotID, Rows: r.Rows, Bytes: r.Bytes, FormatVersion: r.formatVersion,
		SpecID: r.spec.ID(), IndexBase: r.IndexBase, KeyFieldIDs: r.KeyFieldIDs, Deletes: r.Deletes, Positions: r.Positions,
		PositionBases: r.PositionBases,
	}
	for _, seg := range r.Segments {
		se := segmentEnvelope{LastSeq: seg.LastSeq, Token: seg.Token, HasToken: seg.HasToken, Rows: seg.Rows,
			DataFiles: len(seg.DataFiles), DeleteFiles: len(seg.DeleteFiles), DVFiles: len(seg.DVFiles),
			RemovedDVs: len(seg.RemovedDVs)}
		var err error
		if se.Data, err = r.encodeFiles(seg.DataFiles, ice.ManifestContentData); err != nil {
			return nil, err
		}
		if se.Deletes, err = r.encodeFiles(seg.DeleteFiles, ice.ManifestContentDeletes); err != nil {
			return nil, err
		}
		if se.DeleteKeys, err = encodeRecords(seg.DeleteKeys); err != nil {
			return nil, err
		}
		if se.DVs, err = r.encodeFiles(seg.DVFiles, ice.ManifestContentDeletes); err != nil {
			return nil, err
		}
		if se.Removed, err = r.encodeFiles(seg.RemovedDVs, ice.ManifestContentDeletes); err != nil {
			return nil, err
		}
		if se.FallbackKeys, err = encodeRecords(seg.FallbackKeys); err != nil {
			return nil, err
		}
		env.Segments = append(env.Segments, se)
	}
	return json.Marshal(env)
}

func (r *Run) encodeFiles(files []ice.DataFile, content ice.ManifestContent) ([]byte, error) {
	if len(files) == 0 {
		return nil, nil
	}
	if r.schema == nil {
		return nil, fmt.Errorf("iceberg: marshal run: no schema (runs built by a Writer carry one)")
	}
	snap := int64(-1)
	var buf bytes.Buffer
	mw, err := ice.NewManifestWriter(max(r.formatVersion, 2), &buf, r.spec, r.schema, snap,
		ice.WithManifestWriterContent(content))
	if err != nil {
		return nil, fmt.Errorf("iceberg: marshal run files: %w", err)
	}
	for _, df := range files {
		if err := mw.Add(ice.NewManifestEntryBuilder(ice.EntryStatusADDED, &snap, df).Build()); err != nil {
			return nil, fmt.Errorf("iceberg: marshal run files: %w", err)
		}
	}
	if err := mw.Close(); err != nil {
		return nil, fmt.Errorf("iceberg: marshal run files: %w", err)
	}
	return buf.Bytes(), nil
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
		IndexBase: env.IndexBase, KeyFieldIDs: env.KeyFieldIDs, Deletes: env.Deletes, Positions: env.Positions,
		PositionBases: env.PositionBases,
	}
	for _, se := range env.Segments {
		seg := Segment{LastSeq: se.LastSeq, Token: se.Token, HasToken: se.HasToken, Rows: se.Rows}
		var err error
		if seg.DataFiles, err = decodeFiles(env, se.Data, se.DataFiles, ice.ManifestContentData); err != nil {
			return err
		}
		if seg.DeleteFiles, err = decodeFiles(env, se.Deletes, se.DeleteFiles, ice.ManifestContentDeletes); err != nil {
			return err
		}
		if seg.DeleteKeys, err = decodeRecords(se.DeleteKeys); err != nil {
			return err
		}
		if seg.DVFiles, err = decodeFiles(env, se.DVs, se.DVFiles, ice.ManifestContentDeletes); err != nil {
			return err
		}
		if seg.RemovedDVs, err = decodeFiles(env, se.Removed, se.RemovedDVs, ice.ManifestContentDeletes); err != nil {
			return err
		}
		if seg.FallbackKeys, err = decodeRecords(se.FallbackKeys); err != nil {
			return err
		}
		r.Segments = append(r.Segments, seg)
	}
	return nil
}

func decodeFiles(env runEnvelope, data []byte, n int, content ice.ManifestContent) ([]ice.DataFile, error) {
	if n == 0 {
		return nil, nil
	}
	mf := ice.NewManifestFile(max(env.FormatVersion, 2), "run.avro", int64(len(data)), int32(env.SpecID), -1).
		Content(content).Build()
	entries, err := ice.ReadManifest(mf, bytes.NewReader(data), true)
	if err != nil {
		return nil, fmt.Errorf("iceberg: unmarshal run files: %w", err)
	}
	if len(entries) != n {
		return nil, fmt.Errorf("iceberg: unmarshal run: %d files decoded, %d encoded", len(entries), n)
	}
	out := make([]ice.DataFile, len(entries))
	for i, e := range entries {
		out[i] = e.DataFile()
	}
	return out, nil
}

// encodeRecords writes key records of one schema as an Arrow IPC stream.
func encodeRecords(recs []arrow.RecordBatch) ([]byte, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(recs[0].Schema()))
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			return nil, fmt.Errorf("iceberg: marshal run keys: %w", err)
		}
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("iceberg: marshal run keys: %w", err)
	}
	return buf.Bytes(), nil
}

func decodeRecords(data []byte) ([]arrow.RecordBatch, error) {
	if len(data) == 0 {
		return nil, nil
	}
	rd, err := ipc.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("iceberg: unmarshal run keys: %w", err)
	}
	defer rd.Release()
	var out []arrow.RecordBatch
	for rd.Next() {
		r := rd.RecordBatch()
		r.Retain()
		out = append(out, r)
	}
	if err := rd.Err(); err != nil {
		return nil, fmt.Errorf("iceberg: unmarshal run keys: %w", err)
	}
	return out, nil
}
