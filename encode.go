package iceberg

import (
	"context"

	"github.com/icewriter/iceberg/internal/pipeline"

	"github.com/apache/arrow-go/v18/arrow"
	ice "github.com/apache/iceberg-go"
	"github.com/icewriter/iceberg/internal/encode"
	"github.com/icewriter/iceberg/internal/keyindex"
)

// encode writes a sealed batch's files for the pipeline. A keyed batch is resolved first (rows superseded
// inside it are dropped); what its upserted and deleted keys become is the key stage's choice
// (keyStage.stageDeletes): with the key index they wait for the commit loop to turn them into deletion vectors
// (and the keys of the batch's new data files go to the index: keyStage.fileKeys), in copy-on-write mode they go to
// the committer, which rewrites the files holding them, and otherwise they are written here as equality delete
// files.
func (w *Writer) encode(ctx context.Context, b *batch, slots pipeline.Slots) error {
	tbl, conf := w.view.get()
	schema := b.In.Schema
	if schema == nil {
		schema = conf.target
	}
	if b.Bulk.Closer {
		return w.files.CloseGen(ctx, tbl, &b.Bulk)
	}
	var files, deletes []ice.DataFile
	var res *resolved
	var err error
	indexed := w.keys.indexed()
	var delDone chan struct{}
	var delErr error
	if w.keys.spec != nil {
		res, err = w.keys.resolve(ctx, b, w.env.mem)
		if err == nil {
			for _, r := range b.In.Recs {
				r.Release()
			}
			b.In.Recs, b.In.Hashes, b.In.Sels = res.data, nil, nil
			// The deletes are staged, or written as equality delete files, while the data files are written: in
			// BenchmarkApply the delete file took an eighth of the batch's encoding, on one core of two.
			delDone = make(chan struct{})
			go func() {
				defer close(delDone)
				deletes, delErr = w.keys.stageDeletes(ctx, tbl, b, res.deletes, indexed)
			}()
		}
	}
	var packed *encode.PackedFiles
	// carries: the batch goes into an open bulk file (a Router's bulk phase).
	carries := func() bool { return w.files.Carries(tbl, !b.In.Keyed && b.Uncovered == nil) }
	if err == nil && indexed && !carries() {
		// Format version 3: the upserted rows' _row_id goes into the files now, not in a rewrite at commit.
		schema, err = w.keys.encodeRowIDs(tbl, schema, b, res)
	}
	if err == nil && len(b.In.Recs) > 0 {
		eb := &encode.Batch[*batch]{Recs: b.In.Recs, Seq: b.Seq, Self: b, Bulk: &b.Bulk}
		if carries() {
			err = w.files.WriteBulk(ctx, tbl, schema, eb) // its files come when they close
		} else {
			// Only the commit reads an inserts-only batch's files (a key index reads them too): packed until then.
			parts, release := 1, func() {}
			if tbl.Spec().IsUnpartitioned() && !w.files.Bulk() {
				parts, release = slots.Parts(recordsSize(b.In.Recs))
			}
			var out encode.Written
			out, err = w.files.Write(ctx, tbl, schema, eb, b.writeOptions(), !b.In.Keyed && !indexed, parts)
			files, packed, b.enc.rowMap = out.Files, out.Packed, rowMapOf(out.Rows)
			release()
		}
		b.In.Recs = eb.Recs
	}
	if delDone != nil {
		<-delDone
		if err == nil {
			err = delErr
		}
	}
	if err == nil && indexed {
		b.keys.fileKeys, err = w.keys.fileKeys(ctx, tbl, files, res, b.enc.rowMap)
	}
	var written, keyed map[uint64]struct{}
	if res != nil {
		written, keyed = res.keySets()
	}
	if err != nil {
		return err
	}
	b.enc.files, b.enc.deletes, b.enc.packed = files, deletes, packed
	b.enc.held = packed.MemBytes() + int64(len(files)+len(deletes))*fileMetaBytes(schema)
	b.enc.runHeld = int64(b.dataFileCount()+len(deletes)) * fileMetaBytes(schema)
	if res != nil {
		b.enc.written, b.enc.keyedSet = written, keyed
	}
	return nil
}

// fileMetaBytes estimates the memory one data or delete file's metadata holds as an iceberg-go DataFile: its
// path, partition maps and each column's statistics, once as Avro lists and, after any statistics accessor ran,
// again as maps (Go maps grow in steps: 9 columns cost as much as 12). TestFileMetadataMemory checks that the
// estimate covers what a file holds once read, for 2 to 64 columns, without overshooting it by more than half.
// A batch's files held this way until the commit count against the memory limit (pipeline.heldLocked), and a run
// takes batches up to a share of the limit of it (pipeline.runHeldCap): the files of inserts-only batches wait
// packed (heldfiles.go, about a tenth of it) and take this much only in the run that commits them.
func fileMetaBytes(schema *arrow.Schema) int64 {
	return 2560 + 416*int64(schema.NumFields())
}

// rowMapOf is the key stage's map of the rows of a batch's new data files, from the order the encoder wrote
// them in (nil: unknown).
func rowMapOf(o *encode.RowOrder) *keyindex.RowMap {
	switch {
	case o == nil:
		return nil
	case o.Order == nil:
		return keyindex.Unpartitioned
	}
	return keyindex.NewRowMap(o.Order, o.Ends)
}
