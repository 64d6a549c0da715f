package iceberg

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
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
	lay, err := w.changes.Layout(rec.Schema())
	if err != nil {
		return err
	}
	data := lay.Project(rec)
	defer data.Release()
	if w.view.evolving() {
		if conf, err = w.evolveFor(ctx, data.Schema()); err != nil {
			return err
		}
	} else if err := checkKnown(conf.target, data.Schema()); err != nil {
		return err
	}
	cb, err := w.changes.Read(ctx, conf.Conformer, ks.schemaFor(conf.target), lay, rec)
	if err != nil {
		return err
	}
	defer cb.Release()
	unlock, err := w.changes.Lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	vers, err := w.changes.VersionsFor(ctx, tbl, w.env.branch)
	if err != nil {
		return err
	}
	plan, err := cb.Resolve(vers, resolveHash)
	if err != nil {
		return err
	}
	del, delSize, err := changes.DeleteRecord(ctx, w.env.mem, cb, plan)
	if err != nil {
		return err
	}
	ups, upSel, upSize, dead, err := changes.UpsertRecord(ctx, conf.Conformer, data, plan)
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
	upHashes := plan.UpHashes
	if len(dead) > 0 {
		upHashes = nil
	}
	if err := w.acceptChanges(ctx, source, keyedRecord{rec: del, size: delSize, hashes: plan.DelHashes},
		keyedRecord{rec: ups, size: upSize, hashes: upHashes, sel: upSel}, undo); err != nil {
		return err
	}
	w.changes.Accepted(vers, plan, dead, undo)
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

// withDefaults fills the empty fields of c with their defaults.
func (c ChangeColumns) withDefaults(memoryLimit int64) ChangeColumns {
	return ChangeColumns(changes.Columns(c).WithDefaults(memoryLimit))
}

// validate checks what can be checked without the table (newChangeStage checks the rest).
func (c ChangeColumns) validate(memoryLimit int64) error {
	if err := changes.Columns(c).Validate(memoryLimit); err != nil {
		return optionErr("WithChangeColumns", "%v", err)
	}
	return nil
}

// versionBudget is the memory set aside for the versions of keys.
func (c ChangeColumns) versionBudget() int64 { return changes.Columns(c).VersionBudget() }

// newChangeStage checks the change columns against the table (target: its Arrow schema) and the key (nil: no
// key; Apply then fails the key stage's check).
func newChangeStage(o *options, target *arrow.Schema, ks *keySpec) (*changes.Stage, error) {
	var names []string
	if ks != nil {
		names = ks.names
	}
	var pool changes.Pool
	var limit int64
	if o.shared != nil && o.shared.versions != nil {
		pool, limit = versionPool{o.shared.versions}, o.shared.versions.limit
	}
	st, err := changes.NewStage(changes.Columns(o.keyed.changes), target, names, pool, limit)
	if err != nil {
		return nil, optionErr("WithChangeColumns", "%v", err)
	}
	return st, nil
}
