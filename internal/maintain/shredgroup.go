package maintain

import (
	"context"
	"fmt"
	"slices"

	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/icewriter/iceberg/internal/encode"
)

// executeShredGroup is table.ExecuteCompactionGroup for a table whose variant paths are chosen (Env.Shred): the
// group's rows, its deletes applied, read with their row lineage when every file carries it (format version 3),
// are written in the chosen layout by encode.ShredWrite instead of iceberg-go's writer, which would infer
// another layout per file. The rest is iceberg-go's: the files replaced, the delete files that become dead.
func executeShredGroup(ctx context.Context, env *Env, tbl *table.Table, g table.CompactionTaskGroup) (table.CompactionGroupResult, error) {
	if len(g.Tasks) == 0 {
		return table.CompactionGroupResult{PartitionKey: g.PartitionKey}, nil
	}
	lineage := tbl.Metadata().Version() >= 3
	var rows int64
	for _, t := range g.Tasks {
		lineage = lineage && t.FirstRowID != nil
		rows += t.File.Count()
	}
	var scanOpts []table.ScanOption
	var projected *ice.Schema
	if lineage {
		scanOpts = append(scanOpts, table.WithRowLineage())
		projected = ice.SchemaWithRowLineage(tbl.Schema())
	}
	schema, recs, err := tbl.Scan(scanOpts...).ReadTasks(ctx, g.Tasks)
	if err != nil {
		return table.CompactionGroupResult{}, fmt.Errorf("read tasks for compaction group %q: %w", g.PartitionKey, err)
	}
	if lineage {
		// The reserved lineage columns' field ids, as iceberg-go's compaction writes them.
		if schema, err = table.SchemaToArrowSchemaWithOptions(projected, table.ArrowSchemaOptions{IncludeFieldIDs: true,
			TableProperties: tbl.Metadata().Properties()}); err != nil {
			return table.CompactionGroupResult{}, err
		}
	}
	var part map[int]any // a group is one partition: its files' values, of the current spec
	for _, t := range g.Tasks {
		if part, err = encode.PartitionOf(tbl, t.File); err != nil {
			return table.CompactionGroupResult{}, err
		}
	}
	w := encode.ShredWrite{Partition: part, Layout: env.Shred, TargetFileSize: env.TargetFileSize, RowGroupRows: env.RowGroupRows,
		BloomKeys: env.KeyNames, BloomRows: min(rows, int64(env.RowGroupRows)), Lineage: projected}
	if env.FileUUID != nil {
		w.UUID = env.FileUUID()
	}
	files, err := w.Write(ctx, tbl, schema, recs)
	if err != nil {
		return table.CompactionGroupResult{PartitionKey: g.PartitionKey}, fmt.Errorf("write compacted files for group %q: %w", g.PartitionKey, err)
	}
	old := make([]ice.DataFile, len(g.Tasks))
	var after int64
	for i, t := range g.Tasks {
		old[i] = t.File
	}
	for _, f := range files {
		after += f.FileSizeBytes()
	}
	return table.CompactionGroupResult{
		PartitionKey:        g.PartitionKey,
		OldDataFiles:        old,
		NewDataFiles:        files,
		SafePosDeletes:      table.CollectSafePositionDeletes(g.Tasks),
		SafeDeletionVectors: table.CollectSafeDeletionVectors(g.Tasks),
		BytesBefore:         g.TotalSizeBytes,
		BytesAfter:          after,
	}, nil
}

// rewriteShredded is tx.RewriteDataFiles (the user's Compact) for a table whose variant paths are chosen: each
// group executed by executeShredGroup, the results applied as one rewrite with the plan's dead equality
// deletes, counted as iceberg-go's RewriteResult counts them.
func rewriteShredded(ctx context.Context, env *Env, tbl *table.Table, tx *table.Transaction, pl *rewritePlan,
	props ice.Properties) (CompactResult, error) {
	var res CompactResult
	rw := tx.NewRewrite(props)
	staged := map[string]struct{}{}
	groups := 0
	for _, g := range pl.groups {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		gr, err := executeShredGroup(ctx, env, tbl, g)
		if err != nil {
			return res, err
		}
		if len(gr.OldDataFiles) == 0 && len(gr.NewDataFiles) == 0 {
			continue
		}
		groups++
		rw.ApplyResult(gr)
		res.RewrittenDataFiles += len(gr.OldDataFiles)
		res.AddedDataFiles += len(gr.NewDataFiles)
		res.BytesBefore += gr.BytesBefore
		res.BytesAfter += gr.BytesAfter
		for _, df := range append(slices.Clone(gr.SafePosDeletes), gr.SafeDeletionVectors...) {
			if _, ok := staged[df.FilePath()]; !ok {
				staged[df.FilePath()] = struct{}{}
				res.RemovedDeleteFiles++
			}
		}
	}
	if groups == 0 {
		return res, nil
	}
	for _, df := range pl.deadEq {
		if _, ok := staged[df.FilePath()]; ok {
			continue
		}
		staged[df.FilePath()] = struct{}{}
		rw.DeleteFile(df)
		res.RemovedDeleteFiles++
	}
	if err := rw.Commit(ctx); err != nil {
		return res, fmt.Errorf("commit compaction: %w", err)
	}
	return res, nil
}
