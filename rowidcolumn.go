package iceberg

import (
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/icewriter/iceberg/internal/keyindex"
	"github.com/icewriter/iceberg/internal/keyindex/keyenc"
	"github.com/icewriter/iceberg/internal/keyindex/store"
)

// Row lineage written with a merge-on-read batch (format version 3). An upserted row's new version keeps the
// _row_id of the row it replaces. The key index knows that id before the batch is encoded (the replaced row's
// file and position, and the file's first_row_id or explicit ids), so the encoder writes the batch's data
// files with an explicit _row_id column the first time: the replaced rows' ids, null for every other row, which
// then inherits first_row_id + position from the row delta that commits the file (the v3 spec's inheritance).
// Before, the id was carried at commit time by reading the uploaded file back whole, writing it again with the
// column and deleting the first copy (per commit on S3: 7 GETs, a second data-file PUT and a DELETE).
//
// What the encoder wrote is a guess made on the index as it was then: a batch ahead of it in the commit order
// that was not yet applied may still delete or move one of its keys. apply computes the carried ids again in
// sequence order and accepts the column only when they are the same; otherwise (and when the encoder could not
// tell, e.g. a key the index reads from a spilled run it could not read) the commit-time rewrite
// (keyStage.carryRowIDs) writes the column again, as before.

// encodeRowIDs adds the _row_id column to a resolved keyed batch about to be encoded on a format-version 3 table
// with the key index on: for each row whose key the batch upserts and whose replaced row's id the index knows
// now, that id; null for the others. It returns the Arrow schema to write b.recs with (schema itself when no
// row needs an id) and records the ids written in b.rowIDs, and the Iceberg schema WriteRecords must write the
// column with in b.lineage (batch.writeOptions).
func (k *keyStage) encodeRowIDs(tbl *table.Table, schema *arrow.Schema, b *batch, res *resolved) (*arrow.Schema, error) {
	if k.atCommit || tbl.Metadata().Version() < 3 || res == nil || len(res.deletes) == 0 || len(b.In.Recs) == 0 {
		return schema, nil
	}
	guess, err := k.knownRowIDs(res.deletes)
	if err != nil || len(guess) == 0 {
		return schema, err
	}
	keys := res.dataKeys()
	var rows int64
	for _, r := range b.In.Recs {
		rows += r.NumRows()
	}
	if int64(keys.Len()) != rows {
		return schema, nil // not the rows dataKeys describes: leave the ids to apply
	}
	// A key held by more than one written row (inserts of a key after its upsert) gets no id here: which of
	// its rows keeps it is apply's choice (the first in file order).
	count := make(map[string]int, len(guess))
	for _, key := range keys.All() {
		if _, ok := guess[string(key)]; ok {
			count[string(key)]++
		}
	}
	written := make(map[string]int64, len(guess))
	for key, n := range count {
		if n == 1 {
			written[key] = guess[key]
		}
	}
	if len(written) == 0 {
		return schema, nil
	}
	lineage := ice.SchemaWithRowLineageColumns(tbl.Schema(), true, false)
	full, err := table.SchemaToArrowSchemaWithOptions(lineage, table.ArrowSchemaOptions{IncludeFieldIDs: true,
		TableProperties: tbl.Metadata().Properties()})
	if err != nil {
		return schema, err
	}
	idField := full.Field(full.NumFields() - 1)
	if idField.Name != ice.RowIDColumnName {
		return schema, fmt.Errorf("iceberg: row lineage: %s is not the last column of %v", ice.RowIDColumnName, full)
	}
	fields := append(slices.Clip(schema.Fields()), idField)
	md := schema.Metadata()
	out := arrow.NewSchema(fields, &md)
	recs := make([]arrow.RecordBatch, len(b.In.Recs))
	row := 0
	for i, r := range b.In.Recs {
		ib := array.NewInt64Builder(memory.DefaultAllocator)
		ib.Reserve(int(r.NumRows()))
		for j := 0; j < int(r.NumRows()); j++ {
			if id, ok := written[string(keys.Key(row+j))]; ok {
				ib.Append(id)
			} else {
				ib.AppendNull()
			}
		}
		row += int(r.NumRows())
		col := ib.NewArray()
		ib.Release()
		recs[i] = array.NewRecordBatch(out, append(r.Columns()[:r.NumCols():r.NumCols()], col), r.NumRows())
		col.Release()
	}
	for i, r := range b.In.Recs {
		r.Release()
		b.In.Recs[i] = recs[i]
	}
	b.keys.rowIDs, b.keys.lineage = written, lineage
	return out, nil
}

// knownRowIDs returns, by key (keyenc's encoding), the _row_id of the one live row the key index holds for
// each key of the key-only records keyRecs, where the index knows that id. It only reads the index (a spilled
// run is read, never changed); keys it cannot tell are left out, and so is every key while the index is busy.
func (k *keyStage) knownRowIDs(keyRecs []arrow.RecordBatch) (map[string]int64, error) {
	// apply and committed hold mu through a run's I/O (deletion vectors, the commit-time rewrite): an encoder
	// that waited for them would stall the pipeline behind the commit. A batch encoded meanwhile follows one not
	// yet applied, whose keys the index cannot place yet anyway; its ids are left to apply's rewrite.
	if !k.mu.TryLock() {
		return nil, nil
	}
	defer k.mu.Unlock()
	idx := k.idx.Load()
	if idx == nil {
		return nil, nil
	}
	var out map[string]int64
	var buf []byte
	var locs []store.Loc
	for _, rec := range keyRecs {
		enc, err := keyenc.NewEncoder(rec.Columns())
		if err != nil {
			return nil, err
		}
		for r := 0; r < int(rec.NumRows()); r++ {
			buf = enc.AppendKey(buf[:0], r)
			var id int64
			var ok bool
			if id, ok, locs = idx.KnownRowID(buf, locs); ok {
				if out == nil {
					out = map[string]int64{}
				}
				out[string(buf)] = id
			}
		}
	}
	return out, nil
}

// writeOptions are the options b's data files are written with besides the encoder's: the _row_id column
// (encodeRowIDs) when the batch carries one.
func (b *batch) writeOptions() []table.WriteRecordOption {
	if b.keys.lineage == nil {
		return nil
	}
	return []table.WriteRecordOption{table.WithPreserveRowLineage(b.keys.lineage)}
}

// sameRowIDs reports whether the ids apply carries for a batch are exactly those its encoder wrote.
func sameRowIDs(carried, written map[string]int64) bool {
	if len(carried) != len(written) {
		return false
	}
	for key, id := range carried {
		if w, ok := written[key]; !ok || w != id {
			return false
		}
	}
	return true
}

// rowIDsByFile returns, per file of fks, the explicit _row_id its rows were written with (written: by key, each
// key on one row of the batch), by position.
func rowIDsByFile(fks []keyindex.FileKeys, written map[string]int64) []map[int32]int64 {
	ids := make([]map[int32]int64, len(fks))
	for i := range fks {
		for pos, key := range fks[i].Keys.All() {
			if id, ok := written[string(key)]; ok {
				if ids[i] == nil {
					ids[i] = map[int32]int64{}
				}
				ids[i][int32(pos)] = id
			}
		}
	}
	return ids
}
