package iceberg

import (
	"fmt"
	"maps"
	"slices"

	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/icewriter/iceberg/internal/encode"
)

// ShreddedPathsPropertyPrefix is the table property prefix naming a variant column's chosen shredded paths:
// write.parquet.variant-shredded-paths.<column> = "<path>:<type>,...", for example
// "write.parquet.variant-shredded-paths.payload" = "user.id:long, event:string". Types: boolean, int, long,
// float, double, string, binary, date, time, timestamp, timestamptz. Every writer of this library that opens
// the table follows it (see WithShreddedPaths); other writers ignore it.
const ShreddedPathsPropertyPrefix = encode.ShredPropertyPrefix

// ShreddedPath is a path of a variant column to shred: its values of Type are stored in a column of their own
// in each data file, with the spec's variant bounds in the file's metrics, so that a reader filtering on the path
// (iceberg.Extract(iceberg.Reference(column), path, type)) skips the files whose bounds exclude it.
type ShreddedPath struct {
	// Path names object fields from the variant's root: "$.user.id" or "user.id". Array elements cannot be
	// chosen.
	Path string
	// Type is the Iceberg type the path's values are stored as: a primitive of iceberg-go's PrimitiveTypes
	// (Bool, Int32, Int64, Float32, Float64, String, Binary, Date, Time, Timestamp, TimestampTz). A value of
	// another type at the path (an integer too large for Int32, a string where Int64 was chosen) is kept in the
	// variant's residual, never lost; it only gives the file no bound for it.
	Type ice.Type
}

// shredOption is one WithShreddedPaths call.
type shredOption struct {
	column string
	paths  []ShreddedPath
}

// WithShreddedPaths shreds the chosen paths of a variant column in every data file the writer writes: each
// file stores exactly those paths typed (in the variant's typed_value) and everything else in the residual,
// whatever the rows hold, and its metrics carry the spec's variant bounds on them (iceberg-go's writer, used
// otherwise, infers a layout per file from its rows, which drops a path whose type varies). The rows read back
// exactly: values at the paths, values of another type there, rows without the path, the variant null and SQL
// null.
//
// The option overrides, for its column, the table property ShreddedPathsPropertyPrefix+column, which sets the
// same for every writer of this library that opens the table (set it at creation with TableProperties to make
// the choice part of the table). Default: the table property's paths, else none (each file's layout inferred when
// write.parquet.shred-variants is true).
//
// NewWriter checks the paths against the table: the column must be a top-level variant column, each path
// object fields with a type listed at ShreddedPath.Type, no path inside another; a bad one is a *ColumnError
// naming the column and wrapping ErrInvalidOption. Every data file the writer writes follows the layout:
// appends, merge-on-read upserts, copy-on-write rewrites, compaction (Compact and the background passes) and a
// Router's bulk phase (which then writes files per batch, as for any table that shreds). With chosen paths
// those files are written by this library (arrow-go's shredded variant builder and pqarrow, statistics by
// iceberg-go's table.FileToDataFile) instead of iceberg-go's writer; variant columns without chosen paths are
// then stored unshredded. A sorted table's records are sorted as iceberg-go's writer sorts them (each record by
// the sort order's source columns); a partitioned table's files hold one partition each (in the table's data
// location, not a directory per partition). A copy-on-write rewrite or compaction of a file of an earlier
// partition spec fails with an error saying so: it would have to re-partition the rows, which this writer does
// not do yet.
func WithShreddedPaths(column string, paths ...ShreddedPath) Option {
	return func(o *options) {
		o.files.shred = append(o.files.shred, shredOption{column: column, paths: slices.Clone(paths)})
	}
}

// shredLayout resolves the chosen paths of tbl's variant columns: the table property's, overridden per column
// by WithShreddedPaths, each checked against the table (nil: none chosen).
func shredLayout(o *options, tbl *table.Table) (encode.ShredLayout, error) {
	layout, err := encode.ShredLayoutOf(tbl.Properties())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	for _, s := range o.files.shred {
		paths := make([]encode.ShredPath, len(s.paths))
		for i, p := range s.paths {
			fields, err := encode.ParsePath(p.Path)
			if err != nil {
				return nil, columnErr(s.column, ErrInvalidOption, "WithShreddedPaths: %v", err)
			}
			paths[i] = encode.ShredPath{Fields: fields, Type: p.Type}
		}
		if layout == nil {
			layout = encode.ShredLayout{}
		}
		layout[s.column] = paths
	}
	for _, col := range slices.Sorted(maps.Keys(layout)) {
		if err := encode.CheckColumn(tbl.Schema(), col, layout[col]); err != nil {
			return nil, columnErr(col, ErrInvalidOption, "shredded paths (WithShreddedPaths or table property %s%s): %v",
				ShreddedPathsPropertyPrefix, col, err)
		}
	}
	if len(layout) == 0 {
		return nil, nil
	}
	if col, why := encode.CheckPartitionSources(tbl.Spec(), tbl.Schema()); why != "" {
		return nil, columnErr(col, ErrNotSupported, "shredded variant paths on table %v: %s (the writer of the chosen "+
			"layout reads partition values of top-level primitive columns only)", tbl.Identifier(), why)
	}
	return layout, nil
}
