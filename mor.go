package iceberg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// ErrNoKeys is returned by Upsert and Delete on a writer with no key: neither WithKeys nor identifier fields.
var ErrNoKeys = errors.New("iceberg: no key columns (use WithKeys or set the table's identifier fields)")

type opKind uint8

const (
	opInsert opKind = iota
	opUpsert
	opDelete
)

// resolveKeys sets the writer's key from WithKeys, else the table's identifier fields. On a partitioned table
// every partition source column must be part of the key: an upsert that moved a key to another partition would
// otherwise leave the old row alive (equality deletes apply within one partition only). With WithKeys that is
// an error here; with identifier fields it is reported by the first Upsert or Delete.
func resolveKeys(tbl *table.Table, target *arrow.Schema, o *options) (*keySpec, error, error) {
	names := o.keys
	explicit := len(names) > 0
	sc := tbl.Schema()
	if !explicit {
		for _, id := range sc.IdentifierFieldIDs {
			if n, ok := sc.FindColumnName(id); ok {
				names = append(names, n)
			}
		}
	}
	if len(names) == 0 {
		return nil, nil, nil
	}
	ks := &keySpec{names: names}
	var fields []arrow.Field
	for _, n := range names {
		f, ok := sc.FindFieldByName(n)
		idx := target.FieldIndices(n)
		if !ok || len(idx) == 0 {
			return nil, columnErr(n, ErrUnknownColumn, "WithKeys: table columns are %s", fieldNames(target)), nil
		}
		if _, err := keyColumnEncoder(array.MakeArrayOfNull(memory.DefaultAllocator, target.Field(idx[0]).Type, 0)); err != nil {
			return nil, columnErr(n, err, ""), nil
		}
		ks.fieldIDs = append(ks.fieldIDs, f.ID)
		ks.idx = append(ks.idx, idx[0])
		kf := target.Field(idx[0])
		kf.Nullable = false
		fields = append(fields, kf)
	}
	ks.schema = arrow.NewSchema(fields, nil)
	var partErr error
	spec := tbl.Spec()
	for _, pf := range spec.Fields() {
		if !slices.Contains(ks.fieldIDs, pf.SourceID()) {
			col, _ := sc.FindColumnName(pf.SourceID())
			partErr = columnErr(col, ErrMissingColumn,
				"partition source column must be part of the key (keys %v): an upsert moving a key across partitions would leave the old row", names)
			break
		}
	}
	if partErr != nil && explicit {
		return nil, partErr, nil
	}
	return ks, nil, partErr
}

// mode is the writer's update mode: WithMode, else the table's write.update.mode, else MergeOnRead.
func (w *Writer) mode() Mode {
	if w.opts.mode != nil {
		return *w.opts.mode
	}
	if w.view.table().Properties().Get("write.update.mode", "") == table.WriteModeCopyOnWrite {
		return CopyOnWrite
	}
	return MergeOnRead
}

// checkKeyed reports why Upsert and Delete cannot run, if they cannot.
func (w *Writer) checkKeyed(op string) error {
	if w.keys == nil {
		return fmt.Errorf("%s: %w", op, ErrNoKeys)
	}
	if w.keyErr != nil {
		return w.keyErr
	}
	v := w.view.table().Metadata().Version()
	if w.cow {
		return nil
	}
	if v < 2 {
		return fmt.Errorf("%w: %s in merge-on-read mode needs a format-version 2 or later table (use WithMode(CopyOnWrite))", ErrNotSupported, op)
	}
	return nil
}

// Upsert replaces any existing row with the same key (WithKeys or the table's identifier fields) and inserts
// the rest. Later operations on a key win over earlier ones, across batches and coalesced commits.
//
// In MergeOnRead mode each commit deletes the earlier rows of the keys it upserts or deletes with delete files:
// deletion vectors on the files that hold them on a format-v3 table while the key index places every key
// (WithKeyIndexBytes), else equality deletes on the key. Rows superseded inside the writer are dropped before
// they are written. Key columns must not be null.
func (w *Writer) Upsert(ctx context.Context, rec arrow.RecordBatch) error {
	if err := w.pipe.usable(); err != nil {
		return err
	}
	conf := w.view.conformer()
	w.mu.Lock()
	ks := w.keys
	err := w.checkKeyed("Upsert")
	w.mu.Unlock()
	if err != nil {
		return err
	}
	if w.opts.evolve && rec != nil {
		if conf, err = w.evolveFor(ctx, rec.Schema()); err != nil {
			return err
		}
	}
	owned, size, err := conf.conform(ctx, rec)
	if err != nil {
		return err
	}
	if err := checkKeyNulls(keyColumns(owned, ks, false), ks); err != nil {
		owned.Release()
		return err
	}
	if owned.NumRows() == 0 {
		// Validated like any batch, but nothing to keep.
		owned.Release()
		return nil
	}
	if err := w.pipe.accept(ctx, batchRecord{owned, size, opUpsert}); err != nil {
		owned.Release()
		return err
	}
	return nil
}

// Delete removes the rows whose key matches a row of keys (only the key columns are read).
func (w *Writer) Delete(ctx context.Context, keys arrow.RecordBatch) error {
	if err := w.pipe.usable(); err != nil {
		return err
	}
	conf := w.view.conformer()
	w.mu.Lock()
	ks := w.keys
	err := w.checkKeyed("Delete")
	w.mu.Unlock()
	if err != nil {
		return err
	}
	if keys == nil {
		return fmt.Errorf("iceberg: nil record batch")
	}
	cols := make([]arrow.Array, len(ks.names))
	release := func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}
	var size int64
	for i, name := range ks.names {
		idx := keys.Schema().FieldIndices(name)
		if len(idx) == 0 {
			release()
			return columnErr(name, ErrMissingColumn, "Delete needs every key column %v", ks.names)
		}
		col, err := conf.column(ctx, ks.schema.Field(i), keys.Schema().Field(idx[0]), keys.Column(idx[0]))
		if err != nil {
			release()
			return err
		}
		cols[i] = col
		size += arraySize(col.Data())
	}
	owned := array.NewRecordBatch(ks.schema, cols, keys.NumRows())
	release()
	if owned.NumRows() == 0 {
		// The key columns were validated like any batch's, but there is nothing to delete.
		owned.Release()
		return nil
	}
	if err := w.pipe.accept(ctx, batchRecord{owned, size, opDelete}); err != nil {
		owned.Release()
		return err
	}
	return nil
}

func checkKeyNulls(cols []arrow.Array, ks *keySpec) error {
	for i, c := range cols {
		if c.NullN() > 0 {
			return columnErr(ks.names[i], ErrNullInRequired, "key column has %d null value(s)", c.NullN())
		}
	}
	return nil
}

// resolved is a keyed batch after resolving its operations in order.
type resolved struct {
	data    []arrow.RecordBatch // rows to write: inserts and upserts not superseded inside the batch
	deletes []arrow.RecordBatch // key-only rows for the equality deletes (every upserted or deleted key)
	written map[uint64]struct{} // hashes of the keys of the rows written
	keyed   map[uint64]struct{} // hashes of the keys upserted or deleted
}

// resolveHash hashes keys in resolve (a variable so that a test can make every key collide).
var resolveHash = keyHash

// resolve applies the sequential model inside one batch: a key's rows before its last upsert or delete are
// dropped (the equality delete would not reach rows of the same commit), and the batch's equality deletes
// cover every key it upserts or deletes. It consumes b.recs.
func (w *Writer) resolve(ctx context.Context, b *batch) (*resolved, error) {
	ks := w.keys
	r := &resolved{keyed: map[uint64]struct{}{}}
	encs := make([]*keyEncoder, len(b.recs))
	for i, rec := range b.recs {
		enc, err := newKeyEncoder(keyColumns(rec, ks, b.kinds[i] == opDelete))
		if err != nil {
			return nil, err
		}
		encs[i] = enc
	}
	var total, keyedRows, deleteRows int
	starts := make([]int, len(b.recs)) // the ordinal of each record's first row
	for i, rec := range b.recs {
		starts[i] = total
		total += int(rec.NumRows())
		if b.kinds[i] != opInsert {
			keyedRows += int(rec.NumRows())
		}
		if b.kinds[i] == opDelete {
			deleteRows += int(rec.NumRows())
		}
	}
	r.written = make(map[uint64]struct{}, total-deleteRows)
	// keyAt encodes the key of the row at ordinal ord.
	keyAt := func(dst []byte, ord int) []byte {
		i := sort.Search(len(starts), func(j int) bool { return starts[j] > ord }) - 1
		return encs[i].appendKey(dst, ord-starts[i])
	}
	// lastKeyed maps a key to the ordinal of its last upsert or delete in the batch. It is keyed by the key's
	// 64-bit hash, checked against the key bytes whenever a hash repeats; the rare batch where two keys share
	// a hash takes a map keyed by the bytes instead.
	var lastKeyed map[uint64]int
	var lastKeyedExact map[string]int
	var buf, other []byte
	if b.keyed {
		lastKeyed = make(map[uint64]int, keyedRows)
		r.keyed = make(map[uint64]struct{}, keyedRows)
		collided := false
		ord := 0
		for i, rec := range b.recs {
			for row := 0; row < int(rec.NumRows()); row++ {
				if b.kinds[i] != opInsert {
					buf = encs[i].appendKey(buf[:0], row)
					h := resolveHash(buf)
					if prev, ok := lastKeyed[h]; ok && !collided {
						other = keyAt(other[:0], prev)
						collided = !bytes.Equal(other, buf)
					}
					lastKeyed[h] = ord
					r.keyed[h] = struct{}{}
				}
				ord++
			}
		}
		if collided {
			lastKeyedExact = make(map[string]int, keyedRows)
			ord := 0
			for i, rec := range b.recs {
				for row := 0; row < int(rec.NumRows()); row++ {
					if b.kinds[i] != opInsert {
						buf = encs[i].appendKey(buf[:0], row)
						lastKeyedExact[string(buf)] = ord
					}
					ord++
				}
			}
		}
	}
	// superseded reports whether the key in buf (hash h) of the row at ordinal self is upserted or deleted
	// again later in the batch.
	superseded := func(buf []byte, h uint64, self int) bool {
		if lastKeyedExact != nil {
			last, ok := lastKeyedExact[string(buf)]
			return ok && last > self
		}
		last, ok := lastKeyed[h]
		if !ok || last <= self {
			return false
		}
		// The map holds no two keys with one hash, but an inserted row's key may share a hash with a keyed
		// one: a row is only dropped for its own key.
		other = keyAt(other[:0], last)
		return bytes.Equal(other, buf)
	}
	ord := 0
	for i, rec := range b.recs {
		n := int(rec.NumRows())
		if b.kinds[i] == opDelete {
			rec.Retain()
			r.deletes = append(r.deletes, rec)
			ord += n
			continue
		}
		if b.kinds[i] == opUpsert {
			keyRec := array.NewRecordBatch(ks.schema, keyColumns(rec, ks, false), rec.NumRows())
			r.deletes = append(r.deletes, keyRec)
		}
		var keep *array.BooleanBuilder
		dropped := 0
		for row := 0; row < n; row++ {
			buf = encs[i].appendKey(buf[:0], row)
			h := resolveHash(buf)
			if superseded(buf, h, ord+row) {
				if keep == nil {
					keep = array.NewBooleanBuilder(w.mem)
					for j := 0; j < row; j++ {
						keep.Append(true)
					}
				}
				keep.Append(false)
				dropped++
				continue
			}
			if keep != nil {
				keep.Append(true)
			}
			r.written[h] = struct{}{}
		}
		ord += n
		if keep == nil {
			rec.Retain()
			r.data = append(r.data, rec)
			continue
		}
		mask := keep.NewBooleanArray()
		keep.Release()
		if dropped < n {
			filtered, err := compute.FilterRecordBatch(ctx, rec, mask, compute.DefaultFilterOptions())
			if err != nil {
				mask.Release()
				return nil, err
			}
			r.data = append(r.data, filtered)
		}
		mask.Release()
	}
	return r, nil
}

// writeEqualityDeletes writes the batch's equality delete files on the key columns.
func (w *Writer) writeEqualityDeletes(ctx context.Context, tbl *table.Table, recs []arrow.RecordBatch) ([]ice.DataFile, error) {
	return writeKeyDeletes(ctx, tbl, w.keys.fieldIDs, recs)
}

func intersects(a, b map[uint64]struct{}) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	for k := range a {
		if _, ok := b[k]; ok {
			return true
		}
	}
	return false
}
