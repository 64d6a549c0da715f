package iceberg

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/icewriter/iceberg/internal/arrowx"
	"github.com/icewriter/iceberg/internal/changes"
	"github.com/icewriter/iceberg/internal/conform"
)

// ErrUnknownOperation is wrapped by the *ColumnError Apply returns for a row whose op value is not one it
// accepts.
var ErrUnknownOperation = changes.ErrUnknownOperation

// Apply applies an ordered change stream: each row carries its operation in the op column (WithChangeColumns,
// default "op"), and the rows apply in order, within the call and after every call accepted before it, with
// the semantics of Upsert and Delete:
//
//   - "insert", "update", and Debezium's "c" (create), "u" (update) and "r" (read, a snapshot row), in any
//     letter case, upsert the row by key (WithKeys or the table's identifier fields);
//   - "delete" and Debezium's "d", in any letter case, delete the row's key. A delete row needs only its key:
//     its other columns may be null, required ones included, and when a key column is null the before-image
//     key is used (Debezium's delete has no after image).
//
// Any other value, a null included, is a *ColumnError naming the op column and the row (wrapping
// ErrUnknownOperation); Debezium's "t" (truncate) and "m" (message) are not accepted.
//
// An update that changes the key deletes the old key: the before-image key columns are the key columns' names
// with ChangeColumns.BeforePrefix (default "before_": "before_id" for key id), a flattened form of Debezium's
// before struct. They are optional: all of them or none; in a row they are all null (no before image) or all
// set. A row whose before-image key differs from its key deletes the before-image key, then upserts its own.
//
// With a version column (ChangeColumns.Version: an integer such as a log sequence number or an offset, not
// null), a change whose version is lower than the version of the last change accepted for its key is skipped
// (Stats.ChangesSkipped); equal versions apply (the changes of one transaction often share its LSN). The
// versions are kept in memory: loaded on the first Apply from the committed rows' key and version columns when
// the version column is a table column, then updated as changes are accepted, deletes included (a change whose
// row goes to the dead letter handler is not applied and records none). Deleted keys' versions do not survive a
// restart (the table holds no row for them): after one, a replayed change older than a key's delete is applied
// again, and the replay's later changes of that key (its delete) set it right. Past ChangeColumns.VersionBytes
// the keys changed least recently lose their versions, with the same effect.
//
// Within one call the changes are resolved per key (the last applied change of a key wins), so the call hands
// at most one row per key to the writer: Apply costs about what Upsert of the surviving rows costs. Columns are
// matched to the table as Write matches them; the op column, the version column and the before-image columns
// are written only when the table has a column of that name. Only rows that end up written are checked
// against the table's nullability. As with Write, an error means nothing of the call was accepted and the
// writer stays usable, and the caller may Release the batch as soon as the call returns. Unlike Write,
// a call of 64 rows or more whose columns need no conversion keeps a reference to the batch's buffers (Arrow
// buffers are immutable: never write into them after the call) instead of copying the rows it upserts, until
// its batch is encoded; the memory limit counts those buffers whole. A batch that would pin more than twice
// what a copy of those rows holds (a slice of a larger batch, a call that keeps few of its rows) is copied.
func (w *Writer) Apply(ctx context.Context, rec arrow.RecordBatch) error {
	return w.apply(ctx, "", rec)
}

// apply is Apply of a source partition's changes.
func (w *Writer) apply(ctx context.Context, source string, rec arrow.RecordBatch) error {
	if err := w.pipe.Usable(); err != nil {
		return err
	}
	tbl, conf := w.view.get()
	ks := w.keys.spec
	if err := w.keys.check("Apply", tbl.Metadata().Version()); err != nil {
		return err
	}
	if rec == nil {
		return fmt.Errorf("iceberg: nil record batch")
	}
	if err := conform.CheckNames(rec.Schema()); err != nil {
		return err
	}
	lay, err := w.changes.layout(rec.Schema(), ks)
	if err != nil {
		return err
	}
	data := lay.project(rec)
	defer data.Release()
	if w.view.evolving() {
		if conf, err = w.evolveFor(ctx, data.Schema()); err != nil {
			return err
		}
	} else if err := checkKnown(conf.target, data.Schema()); err != nil {
		return err
	}
	cb, err := w.changes.read(ctx, conf, ks, lay, rec)
	if err != nil {
		return err
	}
	defer cb.release()
	unlock, err := w.changes.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	vers, err := w.changes.versionsFor(ctx, tbl, w.env.branch, ks)
	if err != nil {
		return err
	}
	plan, err := cb.resolve(ks, lay, vers)
	if err != nil {
		return err
	}
	del, delSize, err := deleteRecord(ctx, w.env.mem, ks, cb, plan)
	if err != nil {
		return err
	}
	ups, upSel, upSize, dead, err := upsertRecord(ctx, conf, data, plan)
	if err != nil {
		arrowx.ReleaseRecords(del)
		return err
	}
	var undo *changes.CallUndo
	if vers != nil && source != "" {
		undo = changes.NewCallUndo() // filled below, under the lock restore takes
	}
	// The key hashes go with the rows when they are the rows' own: an upserted row routed to the dead letter
	// handler is not in ups, and the key stage then hashes the record itself.
	upHashes := plan.upHashes
	if len(dead) > 0 {
		upHashes = nil
	}
	if err := w.acceptChanges(ctx, source, keyedRecord{rec: del, size: delSize, hashes: plan.delHashes},
		keyedRecord{rec: ups, size: upSize, hashes: upHashes, sel: upSel}, undo); err != nil {
		return err
	}
	if vers != nil {
		vers.Accepted(plan.keys, plan.upRows, plan.vers, dead, undo)
		w.changes.skipped.Add(int64(plan.skipped))
	}
	return nil
}

// keyedRecord is one of an Apply call's records: nil when the call has none, with the memory it holds, its
// rows' key hashes (resolveHash; nil: not known) and the rows of rec it hands on (batchRecord.sel; nil: all).
type keyedRecord struct {
	rec    arrow.RecordBatch
	size   int64
	hashes []uint64
	sel    []int32
}

// acceptChanges hands one Apply call's records to the pipeline together, all or none: the keys it deletes, then
// the rows it upserts (the two hold distinct keys), each with its part of undo (nil: none). On an error they
// are released.
func (w *Writer) acceptChanges(ctx context.Context, source string, del, ups keyedRecord, undo *changes.CallUndo) error {
	recs := make([]batchRecord, 0, 2)
	for _, r := range []struct {
		keyedRecord
		kind opKind
	}{{del, opDelete}, {ups, opUpsert}} {
		if r.rec == nil {
			continue
		}
		br := batchRecord{Rec: r.rec, Kind: r.kind, Source: source, Sel: r.sel}
		if len(r.hashes) == int(br.NumRows()) {
			br.Hashes = r.hashes
		}
		// The hashes and the selection are held with the rows until the batch is encoded: the memory limit
		// counts them.
		br.Size = r.size + 8*int64(len(br.Hashes)) + 4*int64(len(br.Sel))
		if undo != nil {
			br.Undo = []*changes.Undo{undo.Del}
			if r.kind == opUpsert {
				br.Undo = []*changes.Undo{undo.Ups}
			}
		}
		recs = append(recs, br)
	}
	if len(recs) == 0 {
		return nil
	}
	if err := w.pipe.Accept(ctx, recs...); err != nil {
		arrowx.ReleaseRecords(del.rec, ups.rec)
		return err
	}
	return nil
}

// checkKnown rejects a column the table does not have.
func checkKnown(target, in *arrow.Schema) error {
	for _, f := range in.Fields() {
		if len(target.FieldIndices(f.Name)) == 0 {
			return columnErr(f.Name, ErrUnknownColumn, "table columns are %s", conform.FieldNames(target))
		}
	}
	return nil
}

// deleteRecord builds the key-only record of the keys a call deletes (nil when none): for each key column, the
// values of the rows deleting their key, then those of the rows deleting their before-image key, taken into
// the writer's memory.
func deleteRecord(ctx context.Context, mem memory.Allocator, ks *keySpec, cb *changeBatch, plan *changePlan) (arrow.RecordBatch, int64, error) {
	n := len(plan.delKeys) + len(plan.delBefore)
	if n == 0 {
		return nil, 0, nil
	}
	take := conform.NewRowTaker(ctx, mem)
	cols := make([]arrow.Array, len(ks.names))
	defer arrowx.ReleaseArrays(cols)
	var size int64
	for i := range ks.names {
		var parts []arrow.Array
		if len(plan.delKeys) > 0 {
			p, err := take.Array(cb.keys[i], plan.delKeys)
			if err != nil {
				return nil, 0, fmt.Errorf("iceberg: take the deleted keys: %w", err)
			}
			parts = append(parts, p)
		}
		if len(plan.delBefore) > 0 {
			p, err := take.Array(cb.before[i], plan.delBefore)
			if err != nil {
				arrowx.ReleaseArrays(parts)
				return nil, 0, fmt.Errorf("iceberg: take the deleted keys: %w", err)
			}
			parts = append(parts, p)
		}
		if len(parts) == 1 {
			cols[i] = parts[0]
		} else {
			col, err := array.Concatenate(parts, mem)
			arrowx.ReleaseArrays(parts)
			if err != nil {
				return nil, 0, err
			}
			cols[i] = col
		}
		size += arrowx.ArraySize(cols[i].Data())
	}
	return array.NewRecordBatch(ks.arraysSchema(cols), cols, int64(n)), size, nil
}

// upsertRecord returns the rows a call upserts (nil when none) in the table's schema, with the memory they hold,
// and the rows of data routed to the dead letter handler (ascending). Only the upserted rows are checked: a
// delete row's other columns may be null even where the table requires them. When data needs no conversion
// (conformer.keepRows) it is kept as it is, uncopied, and sel names the upserted rows (plan.upserts): the
// batch's resolve takes them, once, with the rows of the calls before and after it. Otherwise the upserted rows
// are conformed into the writer's memory and sel is nil.
func upsertRecord(ctx context.Context, conf *conformer, data arrow.RecordBatch, plan *changePlan) (rec arrow.RecordBatch, sel []int32, size int64, dead []int32, err error) {
	if len(plan.upserts) == 0 {
		return nil, nil, 0, nil, nil
	}
	if rec, size, ok := conf.KeepRows(data, plan.upserts); ok {
		return rec, plan.upserts, size, nil, nil
	}
	rec, size, dead, err = conformUpserts(ctx, conf, data, plan)
	return rec, nil, size, dead, err
}

// conformUpserts conforms the rows a call upserts into the table's schema, in the writer's memory.
func conformUpserts(ctx context.Context, conf *conformer, data arrow.RecordBatch, plan *changePlan) (arrow.RecordBatch, int64, []int32, error) {
	var out arrow.RecordBatch
	var size int64
	var dead []int64
	var err error
	if len(plan.upserts) == int(data.NumRows()) {
		out, size, dead, err = conf.Conform(ctx, data)
	} else {
		taken, terr := conform.NewRowTaker(ctx, conf.Mem()).Record(data, plan.upserts)
		if terr != nil {
			return nil, 0, nil, fmt.Errorf("iceberg: take the upserted rows: %w", terr)
		}
		defer taken.Release()
		// The rows were copied into the writer's memory already: the conformed record may share those buffers
		// (a view keeps them alive) instead of copying them a second time.
		out, size, dead, err = conf.ConformView(ctx, taken)
	}
	if err != nil {
		return nil, 0, nil, err
	}
	var rows []int32
	for _, d := range dead {
		rows = append(rows, plan.upserts[d]) // the conformed rows are plan.upserts, in order
	}
	return out, size, rows, nil
}
