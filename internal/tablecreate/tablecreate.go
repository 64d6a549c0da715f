// Package tablecreate creates the table WithCreate describes when it is missing: the Iceberg schema with its
// identifier fields from an Arrow schema, the partition spec from PartitionBy expressions ("day(ts)",
// "bucket(16, id)"), and the properties of a created table (bounded metadata, zstd).
package tablecreate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/icewriter/iceberg/internal/conform"
	"github.com/icewriter/iceberg/internal/conform/evolve"
)

// Spec is a table to create (WithCreate and its CreateOptions).
type Spec struct {
	Schema        *arrow.Schema
	PartitionBy   []string
	Identifiers   []string
	FormatVersion int
	Properties    map[string]string
	Location      string
	// Defaults are top-level columns' initial-default and write-default (ColumnDefault; format version 3).
	Defaults map[string]ice.Literal
}

// OptionError is an invalid value of the option named Option; the root package reports it wrapping its
// ErrInvalidOption.
type OptionError struct{ Option, Msg string }

// Error names the option and the problem.
func (e *OptionError) Error() string { return e.Option + ": " + e.Msg }

// optionErr returns an *OptionError for option.
func optionErr(option, format string, args ...any) error {
	return &OptionError{Option: option, Msg: fmt.Sprintf(format, args...)}
}

// Properties set on tables the writer creates: bounded metadata (DESIGN.md: without them per-commit latency
// grows with every commit), and zstd at level 1: slightly larger files than iceberg-go's default level, encoded
// much faster, and encoding is most of the writer's CPU and of a copy-on-write rewrite's (bench_test.go and
// bench_cow_test.go measure both levels).
var Defaults = map[string]string{
	table.MetadataDeleteAfterCommitEnabledKey: "true",
	table.MetadataPreviousVersionsMaxKey:      "10",
	table.ManifestMergeEnabledKey:             "true",
	table.ParquetCompressionKey:               "zstd",
	table.ParquetCompressionLevelKey:          "1",
}

// LoadOrCreate loads the table, creating namespace and table as spec says when it is missing (spec nil: never).
// It reports whether it created the table.
func LoadOrCreate(ctx context.Context, cat catalog.Catalog, ident table.Identifier, spec *Spec) (*table.Table, bool, error) {
	tbl, err := cat.LoadTable(ctx, ident)
	if err == nil {
		return tbl, false, nil
	}
	if !errors.Is(err, catalog.ErrNoSuchTable) || spec == nil {
		return nil, false, fmt.Errorf("iceberg: load table %v: %w", ident, err)
	}
	if spec.Schema == nil {
		return nil, false, optionErr("WithCreate", "nil schema")
	}
	sc, pspec, err := Schema(spec.Schema, spec.Identifiers, spec.PartitionBy)
	if err != nil {
		return nil, false, err
	}
	if sc, err = versioned(sc, spec.FormatVersion, spec.Defaults); err != nil {
		return nil, false, err
	}
	if len(ident) > 1 {
		ns := catalog.NamespaceFromIdent(ident)
		if err := cat.CreateNamespace(ctx, ns, nil); err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
			return nil, false, fmt.Errorf("iceberg: create namespace %v: %w", ns, err)
		}
	}
	props := ice.Properties{"format-version": strconv.Itoa(spec.FormatVersion)}
	for k, v := range Defaults {
		props[k] = v
	}
	for k, v := range spec.Properties {
		props[k] = v
	}
	if _, set := spec.Properties[table.ParquetCompressionLevelKey]; !set && props[table.ParquetCompressionKey] != "zstd" {
		delete(props, table.ParquetCompressionLevelKey) // level 1 is the zstd default's; another codec keeps its own
	}
	copts := []catalog.CreateTableOpt{catalog.WithProperties(props)}
	if pspec != nil {
		copts = append(copts, catalog.WithPartitionSpec(pspec))
	}
	if spec.Location != "" {
		copts = append(copts, catalog.WithLocation(spec.Location))
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

// Schema converts the Arrow schema of WithCreate to an Iceberg schema with the identifier fields identifiers
// and the partition spec of partitionBy (nil: unpartitioned).
func Schema(as *arrow.Schema, identifiers, partitionBy []string) (*ice.Schema, *ice.PartitionSpec, error) {
	fields := make([]arrow.Field, as.NumFields())
	copy(fields, as.Fields())
	for _, key := range identifiers {
		idx := as.FieldIndices(key)
		if len(idx) == 0 {
			return nil, nil, conform.ColumnErr(key, conform.ErrMissingColumn, "identifier field not in the schema")
		}
		fields[idx[0]].Nullable = false
	}
	fresh, err := table.ArrowSchemaToIcebergWithFreshIDs(arrow.NewSchema(fields, nil), false)
	if err != nil {
		return nil, nil, fmt.Errorf("iceberg: WithCreate schema: %w", err)
	}
	ids := make([]int, 0, len(identifiers))
	for _, key := range identifiers {
		f, _ := fresh.FindFieldByName(key)
		if _, ok := f.Type.(ice.PrimitiveType); !ok {
			return nil, nil, conform.ColumnErr(key, conform.ErrTypeMismatch,
				"a %s column cannot be an identifier field (the spec allows primitive types only)", f.Type)
		}
		ids = append(ids, f.ID)
	}
	sc := ice.NewSchemaWithIdentifiers(0, ids, fresh.Fields()...)
	if len(partitionBy) == 0 {
		return sc, nil, nil
	}
	var popts []ice.PartitionOption
	for _, expr := range partitionBy {
		name, col, tr, err := ParsePartitionField(expr)
		if err != nil {
			return nil, nil, err
		}
		if _, ok := sc.FindFieldByName(col); !ok {
			return nil, nil, conform.ColumnErr(col, conform.ErrMissingColumn, "PartitionBy(%q): no such column", expr)
		}
		popts = append(popts, ice.AddPartitionFieldByName(col, name, tr, sc, nil))
	}
	spec, err := ice.NewPartitionSpecOpts(popts...)
	if err != nil {
		return nil, nil, fmt.Errorf("iceberg: PartitionBy: %w", err)
	}
	return sc, &spec, nil
}

// versioned checks that a table of format version v can hold every type of sc, and gives its top-level columns
// the defaults (initial-default and write-default; version 3 only).
func versioned(sc *ice.Schema, v int, defaults map[string]ice.Literal) (*ice.Schema, error) {
	fields := sc.Fields()
	for _, f := range fields {
		if err := evolve.CheckVersion(f.Name, f.Type, v); err != nil {
			return nil, err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(defaults)) {
		i := slices.IndexFunc(fields, func(f ice.NestedField) bool { return f.Name == name })
		if i < 0 {
			return nil, conform.ColumnErr(name, conform.ErrMissingColumn, "ColumnDefault: no such column in the WithCreate schema")
		}
		if v < 3 {
			return nil, conform.ColumnErr(name, conform.ErrNotSupported, "ColumnDefault: format version %d has no defaults: use FormatVersion(3)", v)
		}
		value, err := evolve.DefaultValue(fields[i].Type, defaults[name])
		if err != nil {
			return nil, conform.ColumnErr(name, conform.ErrTypeMismatch, "ColumnDefault %s for a column of type %s: %v", defaults[name], fields[i].Type, err)
		}
		fields[i].InitialDefault, fields[i].WriteDefault = value, value
	}
	if len(defaults) == 0 {
		return sc, nil
	}
	return ice.NewSchemaWithIdentifiers(sc.ID, sc.IdentifierFieldIDs, fields...), nil
}

var partitionExpr = regexp.MustCompile(`^\s*([a-z]+)\s*\(\s*(?:(\d+)\s*,\s*)?([^(),\s]+)\s*\)\s*$`)

// ParsePartitionField parses "day(ts)", "bucket(16, user_id)", "truncate(4, s)" or a bare column name.
func ParsePartitionField(expr string) (name, col string, tr ice.Transform, err error) {
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
