package iceberg

import (
	"context"
	"errors"
	"strconv"
	"strings"

	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/icewriter/iceberg/internal/commit"
	"github.com/icewriter/iceberg/internal/maintain"
	"github.com/icewriter/iceberg/internal/tablecreate"
)

// Snapshot summary and table property keys the writer owns.
const (
	summaryWriterID     = commit.SummaryWriterID
	summaryEpoch        = commit.SummaryEpoch
	summarySeq          = commit.SummarySeq
	summaryCheckpoint   = commit.SummaryCheckpoint
	summaryFence        = commit.SummaryFence
	summaryOperation    = commit.SummaryOperation
	summaryNonce        = maintain.SummaryNonce
	propEpochPrefix     = commit.EpochPropPrefix
	propCkptPrefix      = commit.CheckpointPropPrefix
	propCommittedPrefix = commit.CommittedPropPrefix
	// summaryPositions names the side file holding every source position on the table as of the snapshot, on
	// the snapshots that changed positions; propPositionsPrefix + branch mirrors the newest of them, so that
	// snapshot expiry cannot erase it (see positions.go).
	summaryPositions    = commit.SummaryPositions
	propPositionsPrefix = commit.PositionsPropPrefix
)

// loadOrCreate loads the table, creating namespace and table when WithCreate asks for it.
func loadOrCreate(ctx context.Context, cat catalog.Catalog, ident table.Identifier, o *options) (*table.Table, bool, error) {
	var spec *tablecreate.Spec
	if co := o.schema.create; co != nil {
		spec = &tablecreate.Spec{Schema: o.schema.createSchema, PartitionBy: co.partitionBy, Identifiers: co.identifiers,
			FormatVersion: co.formatVersion, Properties: co.properties, Location: co.location, Defaults: co.defaults}
	}
	tbl, created, err := tablecreate.LoadOrCreate(ctx, cat, ident, spec)
	if oe := (*tablecreate.OptionError)(nil); errors.As(err, &oe) {
		return nil, false, optionErr(oe.Option, "%s", oe.Msg)
	}
	return tbl, created, err
}

// checkpointMirror is the table property copy of a writer's newest committed token (commit.CheckpointMirror).
type checkpointMirror = commit.CheckpointMirror

func readMirror(meta table.Metadata, id string) (checkpointMirror, bool) {
	return commit.ReadJSONProp[checkpointMirror](meta, propCkptPrefix+id)
}

// lastCheckpoint finds the newest token committed by id on the branch: by ancestry first (a rollback is
// respected), then through the property mirror when the snapshot that carried it was expired.
func lastCheckpoint(meta table.Metadata, branch, id string) (token string, seq int64, ok bool) {
	m, ok := findCheckpoint(meta, branch, id)
	return m.Token, m.Seq, ok
}

func findCheckpoint(meta table.Metadata, branch, id string) (checkpointMirror, bool) {
	s, oldest := commit.NewestOnAncestry(meta, branch, func(s *table.Snapshot) bool {
		w, _ := commit.SummaryProp(s, summaryWriterID)
		_, has := commit.SummaryProp(s, summaryCheckpoint)
		return w == id && has
	})
	if s != nil {
		t, _ := commit.SummaryProp(s, summaryCheckpoint)
		found := checkpointMirror{Token: t, SnapshotID: s.SnapshotID, SeqNumber: s.SequenceNumber}
		v, _ := commit.SummaryProp(s, summarySeq)
		found.Seq, _ = strconv.ParseInt(v, 10, 64)
		e, _ := commit.SummaryProp(s, summaryEpoch)
		found.Epoch, _ = strconv.ParseInt(e, 10, 64)
		return found, true
	}
	m, has := readMirror(meta, id)
	if !has || !commit.MirrorTrusted(meta, m.SnapshotID, m.SeqNumber, oldest) {
		return checkpointMirror{}, false
	}
	return m, true
}

// refreshMirrors re-derives every writer's checkpoint mirror from the branch ancestry, in a transaction that is
// about to expire snapshots: the mirror must name a token that is still on the branch when its snapshot goes.
func refreshMirrors(tx *table.Transaction, meta table.Metadata, branch string) error {
	set := ice.Properties{}
	var drop []string
	for k, v := range meta.Properties() {
		id, isMirror := strings.CutPrefix(k, propCkptPrefix)
		if !isMirror {
			continue
		}
		m, ok := findCheckpoint(meta, branch, id)
		switch {
		case !ok:
			drop = append(drop, k)
		case commit.MustJSON(m) != v:
			set[k] = commit.MustJSON(m)
		}
	}
	if len(set) > 0 {
		if err := tx.SetProperties(set); err != nil {
			return err
		}
	}
	if len(drop) > 0 {
		return tx.RemoveProperties(drop)
	}
	return nil
}

// lastSeq is the newest sequence number committed by id (from snapshots, the checkpoint mirror and the commit
// record).
func lastSeq(meta table.Metadata, branch, id string) int64 {
	var seq int64
	commit.Ancestors(meta, branch, func(s *table.Snapshot) bool {
		if w, _ := commit.SummaryProp(s, summaryWriterID); w != id {
			return false
		}
		if v, ok := commit.SummaryProp(s, summarySeq); ok {
			seq, _ = strconv.ParseInt(v, 10, 64)
			return true
		}
		return false
	})
	if m, ok := readMirror(meta, id); ok && m.Seq > seq {
		seq = m.Seq
	}
	if r, ok := commit.ReadCommitRecord(meta, id); ok && r.Seq > seq {
		seq = r.Seq
	}
	return seq
}

// tableIsEmpty reports whether the table holds no rows (no snapshot, or a head with zero records).
func tableIsEmpty(tbl *table.Table) bool {
	s := tbl.CurrentSnapshot()
	if s == nil {
		return true
	}
	v, ok := commit.SummaryProp(s, "total-records")
	return ok && v == "0"
}
