package iceberg

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/icewriter/iceberg/internal/encode"
)

// Splitting a batch that fans out over many partitions. Iceberg puts a data file in one partition, so a batch
// over 86,000 partitions writes 86,000 files. Their metadata waits for the commit packed (heldfiles.go, about
// 400 B a file), but the run that commits them decodes it into iceberg-go DataFiles (fileMetaBytes, 3.7 KiB a
// file of six columns once read): 300 MiB for one commit of them all. So a batch whose partitions' files would
// exceed a share of the memory limit (fanoutShare) is cut at its seal into batches of whole partitions, each
// within the share (every partition in one of them: no more files than one batch would write), and a run takes
// batches only up to that much (pipeline.runHeldCap), so each commit decodes at most its share.

// fanoutShare is the part of the row budget one batch's (and one commit's) file metadata may take.
func fanoutShare(rowBudget int64) int64 { return rowBudget / 8 }

// splitFanout is the pipeline's split (pipelineConfig.split): the parts of a sealed batch of inserts into a
// partitioned table whose partitions' file metadata would exceed share, cut by partition (a partition's rows
// all go to one part, in their order); nil when the batch stays whole. Called with the pipeline's mu held: it
// only reads the batch's records and the view's table.
func (w *Writer) splitFanout(b *batch, share int64) []*batch {
	tbl := w.view.table()
	if tbl == nil || tbl.Spec().IsUnpartitioned() || b.In.Keyed || len(b.In.Recs) == 0 || b.In.Schema == nil {
		return nil
	}
	meta := fileMetaBytes(b.In.Schema)
	if b.Rows*meta <= share {
		return nil // even a partition per row fits
	}
	if n := w.files.LastParts(); n > 0 && 4*n*meta < share {
		return nil // the writer's last batch was far from it: no grouping under the pipeline's lock
	}
	spec, sc := tbl.Spec(), tbl.Schema()
	ids := map[string]int32{}
	groups := make([][]int32, len(b.In.Recs)) // per record, each row's partition
	var key []byte
	for i, rec := range b.In.Recs {
		keyers, ok := encode.PartitionKeyers(spec, sc, rec)
		if !ok {
			return nil
		}
		g := make([]int32, rec.NumRows())
		for r := range g {
			key = key[:0]
			for _, k := range keyers {
				if key, ok = k(key, r); !ok {
					return nil
				}
			}
			id, seen := ids[string(key)]
			if !seen {
				id = int32(len(ids))
				ids[string(key)] = id
			}
			g[r] = id
		}
		groups[i] = g
	}
	w.files.WarnFanout(tbl, len(ids), b.Rows)
	parts := int((int64(len(ids))*meta + share - 1) / share)
	if parts < 2 {
		return nil
	}
	out := make([]*batch, parts)
	for j := range out {
		out[j] = &batch{}
		out[j].FirstAt, out[j].In.Schema, out[j].Uncovered = b.FirstAt, b.In.Schema, b.Uncovered
	}
	ctx := context.Background()
	var given int64 // bytes handed to parts (the last takes the rest, so the memory counted stays the same)
	for i, rec := range b.In.Recs {
		rows := make([][]int32, parts)
		for r, id := range groups[i] {
			j := int(id) % parts
			rows[j] = append(rows[j], int32(r))
		}
		for j, idx := range rows {
			if len(idx) == 0 {
				continue
			}
			part, err := encode.TakeRecordRows(ctx, w.env.mem, rec, idx)
			if err != nil {
				for _, o := range out {
					releaseAll(o.In.Recs)
				}
				return nil // the batch is written whole
			}
			size := b.In.Sizes[i] * int64(len(idx)) / rec.NumRows()
			out[j].Push(batchRecord{Rec: part, Kind: b.In.Kinds[i], Source: b.In.Sources[i], Size: size})
			out[j].Rows += part.NumRows()
			out[j].Bytes += size
			given += size
		}
	}
	last := out[parts-1]
	last.Bytes += b.Bytes - given
	last.Token, last.HasToken, last.Positions, last.PosSince = b.Token, b.HasToken, b.Positions, b.PosSince
	releaseAll(b.In.Recs)
	b.In.Recs = nil
	kept := out[:0]
	for _, o := range out {
		if len(o.In.Recs) > 0 || o == last {
			kept = append(kept, o)
		}
	}
	return kept
}

// releaseAll releases records.
func releaseAll(recs []arrow.RecordBatch) {
	for _, r := range recs {
		if r != nil {
			r.Release()
		}
	}
}
