package iceberg

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/icewriter/iceberg/internal/commit"
)

// Snapshot summary and table property keys the writer owns.
const (
	summaryWriterID   = commit.SummaryWriterID
	summaryEpoch      = commit.SummaryEpoch
	summarySeq        = commit.SummarySeq
	summaryCheckpoint = commit.SummaryCheckpoint
	summaryFence      = commit.SummaryFence
	summaryOperation  = commit.SummaryOperation
	// summaryNonce marks the snapshot of one transaction call (a compaction): the proof, after a lost reply,
	// that the call applied.
	summaryNonce        = "icewriter.nonce"
	summaryRewritten    = "icewriter.cow-rewritten-files"
	summaryCandidates   = "icewriter.cow-candidate-files"
	propEpochPrefix     = commit.EpochPropPrefix
	propCkptPrefix      = commit.CheckpointPropPrefix
	propCommittedPrefix = commit.CommittedPropPrefix
	// summaryPositions names the side file holding every source position on the table as of the snapshot, on
	// the snapshots that changed positions; propPositionsPrefix + branch mirrors the newest of them, so that
	// snapshot expiry cannot erase it (see positions.go).
	summaryPositions    = commit.SummaryPositions
	propPositionsPrefix = commit.PositionsPropPrefix
)

// Properties set on tables the writer creates: bounded metadata (DESIGN.md: without them per-commit latency
// grows with every commit), and zstd at level 1. On the seed events level 1 writes files 0.4% larger than
// iceberg-go's default level and encodes about twice as fast, which is most of the writer's CPU and of a
// copy-on-write rewrite's (bench_test.go and bench_cow_test.go measure both levels).
var createdTableDefaults = map[string]string{
	table.MetadataDeleteAfterCommitEnabledKey: "true",
	table.MetadataPreviousVersionsMaxKey:      "10",
	table.ManifestMergeEnabledKey:             "true",
	table.ParquetCompressionKey:               "zstd",
	table.ParquetCompressionLevelKey:          "1",
}

// loadOrCreate loads the table, creating namespace and table when WithCreate asks for it.
func loadOrCreate(ctx context.Context, cat catalog.Catalog, ident table.Identifier, o *options) (*table.Table, bool, error) {
	tbl, err := cat.LoadTable(ctx, ident)
	if err == nil {
		return tbl, false, nil
	}
	if !errors.Is(err, catalog.ErrNoSuchTable) || o.schema.create == nil {
		return nil, false, fmt.Errorf("iceberg: load table %v: %w", ident, err)
	}
	if o.schema.createSchema == nil {
		return nil, false, optionErr("WithCreate", "nil schema")
	}
	sc, spec, err := buildCreateSchema(o.schema.createSchema, o.schema.create)
	if err != nil {
		return nil, false, err
	}
	if len(ident) > 1 {
		ns := catalog.NamespaceFromIdent(ident)
		if err := cat.CreateNamespace(ctx, ns, nil); err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
			return nil, false, fmt.Errorf("iceberg: create namespace %v: %w", ns, err)
		}
	}
	props := ice.Properties{"format-version": strconv.Itoa(o.schema.create.formatVersion)}
	for k, v := range createdTableDefaults {
		props[k] = v
	}
	for k, v := range o.schema.create.properties {
		props[k] = v
	}
	if _, set := o.schema.create.properties[table.ParquetCompressionLevelKey]; !set && props[table.ParquetCompressionKey] != "zstd" {
		delete(props, table.ParquetCompressionLevelKey) // level 1 is the zstd default's; another codec keeps its own
	}
	copts := []catalog.CreateTableOpt{catalog.WithProperties(props)}
	if spec != nil {
		copts = append(copts, catalog.WithPartitionSpec(spec))
	}
	if o.schema.create.location != "" {
		copts = append(copts, catalog.WithLocation(o.schema.create.location))
	}
	tbl, err = cat.CreateTable(ctx, ident, sc, copts...)
	if errors.Is(err, catalog.ErrTableAlreadyExists) { // another writer won the race
		tbl, err = cat.LoadTable(ctx, ident)
		return tbl, false, err
	}
	if err != nil {
		return nil, false, fmt.Errorf("iceberg: create table %v: %w", ident, err)
	}
	return tbl, true, nil
}

// buildCreateSchema converts the Arrow schema of WithCreate to an Iceberg schema with identifier fields and a
// partition spec.
func buildCreateSchema(as *arrow.Schema, co *createOptions) (*ice.Schema, *ice.PartitionSpec, error) {
	fields := make([]arrow.Field, as.NumFields())
	copy(fields, as.Fields())
	for _, key := range co.identifiers {
		idx := as.FieldIndices(key)
		if len(idx) == 0 {
			return nil, nil, columnErr(key, ErrMissingColumn, "identifier field not in the schema")
		}
		fields[idx[0]].Nullable = false
	}
	fresh, err := table.ArrowSchemaToIcebergWithFreshIDs(arrow.NewSchema(fields, nil), false)
	if err != nil {
		return nil, nil, fmt.Errorf("iceberg: WithCreate schema: %w", err)
	}
	ids := make([]int, 0, len(co.identifiers))
	for _, key := range co.identifiers {
		f, _ := fresh.FindFieldByName(key)
		ids = append(ids, f.ID)
	}
	sc := ice.NewSchemaWithIdentifiers(0, ids, fresh.Fields()...)
	if len(co.partitionBy) == 0 {
		return sc, nil, nil
	}
	var popts []ice.PartitionOption
	for _, expr := range co.partitionBy {
		name, col, tr, err := parsePartitionField(expr)
		if err != nil {
			return nil, nil, err
		}
		if _, ok := sc.FindFieldByName(col); !ok {
			return nil, nil, columnErr(col, ErrMissingColumn, "PartitionBy(%q): no such column", expr)
		}
		popts = append(popts, ice.AddPartitionFieldByName(col, name, tr, sc, nil))
	}
	spec, err := ice.NewPartitionSpecOpts(popts...)
	if err != nil {
		return nil, nil, fmt.Errorf("iceberg: PartitionBy: %w", err)
	}
	return sc, &spec, nil
}

var partitionExpr = regexp.MustCompile(`^\s*([a-z]+)\s*\(\s*(?:(\d+)\s*,\s*)?([^(),\s]+)\s*\)\s*$`)

// parsePartitionField parses "day(ts)", "bucket(16, user_id)", "truncate(4, s)" or a bare column name.
func parsePartitionField(expr string) (name, col string, tr ice.Transform, err error) {
	if !strings.Contains(expr, "(") {
		col = strings.TrimSpace(expr)
		return col, col, ice.IdentityTransform{}, nil
	}
	m := partitionExpr.FindStringSubmatch(expr)
	if m == nil {
		return "", "", nil, optionErr("PartitionBy", "cannot parse %q (want e.g. day(ts) or bucket(16, id))", expr)
	}
	fn, width, col := m[1], m[2], m[3]
	spelled := fn
	if width != "" {
		spelled = fn + "[" + width + "]"
	}
	tr, err = ice.ParseTransform(spelled)
	if err != nil {
		return "", "", nil, optionErr("PartitionBy", "%q: %v", expr, err)
	}
	name = col + "_" + fn
	if fn == "identity" {
		name = col
	}
	return name, col, tr, nil
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
