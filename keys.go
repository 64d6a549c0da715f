package iceberg

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/icewriter/iceberg/internal/commit/cow"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/icewriter/iceberg/internal/arrowx"
	"github.com/icewriter/iceberg/internal/commit"
	"github.com/icewriter/iceberg/internal/conform"
	"github.com/icewriter/iceberg/internal/keyindex"
	"github.com/icewriter/iceberg/internal/keyindex/keyenc"
	"github.com/icewriter/iceberg/internal/keyindex/store"
)

// keyStage is the writer's key stage, the one owner of everything keyed: the key columns (keySpec), the
// resolution of a batch's operations by key (resolve), what the keys a batch upserts or deletes become
// (stageDeletes: rewrites in copy-on-write mode; in merge-on-read mode position deletes, deletion vectors on v3
// and position delete files on v2, while the key index places every key, else what WithDeleteFiles allows:
// equality deletes, rewrites or an error, see uncovered) and the key index itself, with its operations in
// keyindex.go (load, apply a run, committed, rebase after a compaction, drop). A Writer holds one whether or not
// it has a key (spec nil: no key columns, or identifier fields no key can be; Upsert and Delete then fail check).
//
// Locking. spec, cow, layoutErr and the configuration are set by newKeyStage and never change: read them
// freely. The index is changed only by load, apply, committed, rebase and drop, which hold mu for their whole
// run, I/O included (reading key columns, writing deletion vectors); the commit pipeline calls them one at a
// time, apply and committed around each run's Commit. Encoders only ask whether the index is on (indexed), an
// atomic load that never waits for mu. Once off, the index stays off.
//
// Lock order: the pipeline's commitMu, then keyStage.mu. keyStage.mu is a leaf: the stage calls nothing back in
// the Writer, and nothing else is locked while it is held.
type keyStage struct {
	spec      *keySpec    // nil: no key columns
	cow       bool        // copy-on-write mode: the committer rewrites the files that hold upserted and deleted keys
	layoutErr error       // why Upsert and Delete cannot run on this table's layout or identifier fields (reported by check)
	deletes   DeleteFiles // WithDeleteFiles: what a keyed change the index cannot cover becomes
	rewrite   cow.Config  // how new data files are written again to carry row ids (carryRowIDs)
	// supersedeBatch is how many superseded v2 position delete files wait before a run removes them
	// (supersededBatch; WithSupersededBatchForTest lowers it).
	supersedeBatch int
	atCommit       bool // row ids only by the commit-time rewrite (a benchmark's baseline; options.rowIDsAtCommit)

	ident    table.Identifier
	branch   string
	writerID string
	limit    int64         // the index's memory budget (WithKeyIndexBytes); 0: no index
	pool     keyindex.Pool // a Router's key index budget, in place of limit (nil: a lone writer)
	spillDir string        // where the index spills its runs (WithKeyIndexSpillDir; "": os.TempDir())
	parallel int           // data files read at once by load
	log      *slog.Logger
	files    *fileNamer // names deletion vector files (nil: random names)

	mu  sync.Mutex                     // held by every operation that changes the index
	idx atomic.Pointer[keyindex.Index] // nil: off, upserts and deletes use equality deletes
	// fresh: another writer's commit made a run fall back to equality deletes; the writer reloads the table
	// before placing its runs in the index (wantsFresh), so they place themselves on the head, not on the table
	// its last commit left. A writer that never meets another pays no reload.
	fresh atomic.Bool
}

// wantsFresh reports whether the next run should be placed in the key index on a freshly loaded table.
func (k *keyStage) wantsFresh() bool { return k.fresh.Load() && k.idx.Load() != nil }

// newKeyStage resolves the writer's key from WithKeys, else the table's identifier fields (see resolveKeys);
// target is the table's schema as Arrow. The key index starts off: load opens it.
func newKeyStage(tbl *table.Table, target *arrow.Schema, o *options, copyOnWrite bool) (*keyStage, error) {
	spec, err, layoutErr := resolveKeys(tbl, target, o)
	if err != nil {
		return nil, err
	}
	return &keyStage{
		spec: spec, cow: copyOnWrite, layoutErr: layoutErr, ident: tbl.Identifier(), branch: o.branch,
		writerID: o.writerID, limit: o.keyed.indexBytes, deletes: o.keyed.deleteFiles, supersedeBatch: o.keyed.supersedeBatch,
		rewrite: cow.Config{Parallel: o.flush.maxInFlight, TargetFileSize: o.files.targetFileSize, RowGroupRows: o.files.rowGroupRows}, parallel: o.flush.maxInFlight, log: o.logger, pool: routerIndexPool(o),
		spillDir: o.keyed.spillDir,
		atCommit: o.keyed.rowIDsAtCommit,
	}, nil
}

// checkSpillDir reports, as an ErrInvalidOption naming WithKeyIndexSpillDir, a spill directory the writer cannot
// create its runs in (store.CheckDir), so that NewWriter fails instead of the first spill, which would turn the
// index off in the middle of a stream. "" (os.TempDir()) is not checked: the index then goes off at its first
// spill, logged, as before the option existed.
func checkSpillDir(dir string) error {
	if err := store.CheckDir(dir); err != nil {
		return optionErr("WithKeyIndexSpillDir", "%w", err)
	}
	return nil
}

// names returns the key column names (nil without a key).
func (k *keyStage) names() []string {
	if k.spec == nil {
		return nil
	}
	return k.spec.names
}

// check reports why op (Upsert or Delete) cannot run on a table of the given format version, if it cannot.
func (k *keyStage) check(op string, formatVersion int) error {
	if k.layoutErr != nil {
		return k.layoutErr
	}
	if k.spec == nil {
		return fmt.Errorf("%s: %w", op, ErrNoKeys)
	}
	if !k.cow && formatVersion < 2 {
		return fmt.Errorf("%w: %s in merge-on-read mode needs a format-version 2 or later table (use WithMode(CopyOnWrite))", ErrNotSupported, op)
	}
	if !k.cow && k.deletes == NoEqualityDeletesOrFail && !k.indexed() {
		return fmt.Errorf("%s: %w", op, ErrEqualityDeletesRefused)
	}
	return nil
}

// indexed reports whether the key index is on. An encoder asks once per batch and passes the answer to
// stageDeletes and fileKeys: a batch encoded for the index gets its equality deletes from apply if the index
// goes off before the batch's run forms.
func (k *keyStage) indexed() bool { return k.idx.Load() != nil }

// stageDeletes routes the keys a resolved batch upserts or deletes (key-only records, resolved.deletes): with
// the index on (indexed, as the encoder saw it) they wait in the batch for apply, which turns them into deletion
// vectors in sequence order; in copy-on-write mode they go to the committer, which rewrites the files holding
// them; otherwise they are written here as equality delete files on the key, which it returns.
func (k *keyStage) stageDeletes(ctx context.Context, tbl *table.Table, b *batch, keys []arrow.RecordBatch, indexed bool) ([]ice.DataFile, error) {
	switch {
	case indexed:
		b.keys.keyRecs = keys
		return nil, nil
	case k.cow:
		b.keys.cowKeys = keys
		return nil, nil
	}
	return k.uncovered(ctx, tbl, keys, &b.keys.cowKeys)
}

// uncovered is what the keys a batch upserts or deletes become when the key index cannot place them, by
// WithDeleteFiles: equality delete files on the key (returned), or keys for the committer to rewrite the files
// holding them (appended to cowKeys: NoEqualityDeletes), or ErrEqualityDeletesRefused (NoEqualityDeletesOrFail).
func (k *keyStage) uncovered(ctx context.Context, tbl *table.Table, keys []arrow.RecordBatch, cowKeys *[]arrow.RecordBatch) ([]ice.DataFile, error) {
	switch {
	case len(keys) == 0:
		return nil, nil
	case k.deletes == NoEqualityDeletes:
		*cowKeys = append(*cowKeys, keys...)
		return nil, nil
	case k.deletes == NoEqualityDeletesOrFail:
		return nil, fmt.Errorf("%w: the key index is off", ErrEqualityDeletesRefused)
	}
	return k.equalityDeletes(ctx, tbl, keys)
}

// fileKeys returns the keys of a batch's new data files in row order, for apply to index: taken from the
// batch's resolved rows (res) where rows says which rows each file holds (keyindex.RowMap), else read back from the
// files (readKeys).
func (k *keyStage) fileKeys(ctx context.Context, tbl *table.Table, files []ice.DataFile, res *resolved, rows *keyindex.RowMap) ([]keyindex.FileKeys, error) {
	if len(files) == 0 {
		return nil, nil
	}
	if res != nil && rows != nil {
		keys := res.dataKeys()
		if out, ok := rows.Split(&keys, files); ok {
			return out, nil
		}
	}
	return k.readKeys(ctx, tbl, files)
}

// readKeys reads back the keys of a batch's new data files in row order (iceberg-go's writer decides how rows
// roll across files).
func (k *keyStage) readKeys(ctx context.Context, tbl *table.Table, files []ice.DataFile) ([]keyindex.FileKeys, error) {
	out := make([]keyindex.FileKeys, 0, len(files))
	for _, f := range files {
		keys, err := keyindex.ReadFileKeys(ctx, tbl, f, k.spec.columns())
		if err != nil {
			return nil, err
		}
		out = append(out, keyindex.FileKeys{DF: f, Keys: keys})
	}
	return out, nil
}

// equalityDeletes writes equality delete files on the key columns for key-only records.
func (k *keyStage) equalityDeletes(ctx context.Context, tbl *table.Table, recs []arrow.RecordBatch) ([]ice.DataFile, error) {
	return commit.WriteKeyDeletes(ctx, tbl, k.spec.fieldIDs, recs)
}

// keySpec is the writer's key: the columns Upsert and Delete match rows by.
type keySpec struct {
	names    []string
	fieldIDs []int
	schema   *arrow.Schema // the key columns, as the table types them (Delete's input is projected onto it)
	idx      []int         // positions of the key columns in the table's Arrow schema
}

// columns are the key columns as the key index reads them from data files.
func (ks *keySpec) columns() keyindex.Columns {
	return keyindex.Columns{Names: ks.names, FieldIDs: ks.fieldIDs}
}

// schemaOf is the key columns' schema with the types types(i) gives (the batch's or the table's now): ks.schema
// unless schema evolution promoted a key column since the writer opened.
func (ks *keySpec) schemaOf(types func(i int) arrow.DataType) *arrow.Schema {
	var fields []arrow.Field
	for i, f := range ks.schema.Fields() {
		if t := types(i); fields != nil || !arrow.TypeEqual(t, f.Type) {
			if fields == nil {
				fields = slices.Clone(ks.schema.Fields()[:i])
			}
			f.Type = t
			fields = append(fields, f)
		}
	}
	if fields == nil {
		return ks.schema
	}
	return arrow.NewSchema(fields, nil)
}

// schemaFor is the key columns' schema as target (the table's Arrow schema) types them.
func (ks *keySpec) schemaFor(target *arrow.Schema) *arrow.Schema {
	return ks.schemaOf(func(i int) arrow.DataType { return target.Field(ks.idx[i]).Type })
}

// arraysSchema is the key columns' schema as cols (one per key column) type them.
func (ks *keySpec) arraysSchema(cols []arrow.Array) *arrow.Schema {
	return ks.schemaOf(func(i int) arrow.DataType { return cols[i].DataType() })
}

// resolveKeys sets the writer's key from WithKeys, else the table's identifier fields. On a partitioned table
// every partition source column must be part of the key: an upsert that moved a key to another partition would
// otherwise leave the old row alive (equality deletes apply within one partition only). With WithKeys that is
// an error here; with identifier fields it is reported by the first Upsert or Delete. So is a key column of a
// type no key can have (a variant): with WithKeys an error here; with identifier fields the writer has no key,
// appends work, and Upsert, Delete and Apply return the error (the third result).
func resolveKeys(tbl *table.Table, target *arrow.Schema, o *options) (*keySpec, error, error) {
	names := o.keyed.keys
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
			return nil, columnErr(n, ErrUnknownColumn, "WithKeys: table columns are %s", conform.FieldNames(target)), nil
		}
		var typeErr error
		if _, ok := f.Type.(ice.PrimitiveType); !ok {
			typeErr = columnErr(n, ErrTypeMismatch, "a %s column cannot be a key (the spec allows primitive types only)", f.Type)
		} else if err := keyenc.CheckType(target.Field(idx[0]).Type); err != nil {
			typeErr = columnErr(n, err, "")
		}
		if typeErr != nil && explicit {
			return nil, typeErr, nil
		}
		if typeErr != nil {
			// Identifier fields another tool set (a variant one): appends go on; Upsert, Delete and Apply,
			// which would match rows by it, fail with typeErr (check).
			return nil, nil, typeErr
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

// keyColumns returns the key columns of a record in the table's schema (or of a key-only record).
func keyColumns(rec arrow.RecordBatch, ks *keySpec, keyOnly bool) []arrow.Array {
	cols := make([]arrow.Array, len(ks.idx))
	for i, idx := range ks.idx {
		if keyOnly {
			cols[i] = rec.Column(i)
		} else {
			cols[i] = rec.Column(idx)
		}
	}
	return cols
}

// resolved is a keyed batch after resolving its operations in order.
type resolved struct {
	data    []arrow.RecordBatch // rows to write: inserts and upserts not superseded inside the batch
	deletes []arrow.RecordBatch // key-only rows of every key upserted or deleted, for stageDeletes
	written map[uint64]struct{} // hashes of the keys of the rows written
	keyed   map[uint64]struct{} // hashes of the keys upserted or deleted
	sets    chan struct{}       // closed once written and keyed are built (keySets)
	// What dataKeys reads: each row's key, its operation and whether a later change of its key superseded it,
	// by ordinal over the batch's rows.
	rows    keyindex.RowKeys
	kinds   []opKind
	dropped []bool
}

// dataKeys returns the keys of the rows of data in order (keyenc's encoding): the rows of the batch's
// inserts and upserts that no later change in the batch superseded. The key index learns the keys of the
// batch's new data files from it (keyindex.RowMap) instead of reading them back.
func (r *resolved) dataKeys() keyenc.List {
	var l keyenc.List
	if r.rows.Ints != nil {
		l.Grow(9 * len(r.rows.Ints)) // keyenc.AppendInt's width
	} else {
		l.Grow(len(r.rows.Bytes))
	}
	var ikey []byte
	for ord, kind := range r.kinds {
		if kind == opDelete || r.dropped[ord] {
			continue
		}
		if r.rows.Ints != nil {
			ikey = keyenc.AppendInt(ikey[:0], r.rows.Ints[ord])
			l.Add(ikey)
			continue
		}
		l.Add(r.rows.Bytes[r.rows.Offs[ord]:r.rows.Offs[ord+1]])
	}
	return l
}

// keySets waits until the key sets are built and returns them: written, then keyed.
func (r *resolved) keySets() (written, keyed map[uint64]struct{}) {
	<-r.sets
	return r.written, r.keyed
}

// resolveHash hashes keys in resolve (a variable so that a test can make every key collide).
var resolveHash = keyenc.Hash

// resolve applies the sequential model inside one batch: a key's rows before its last upsert or delete are
// dropped (a delete of the batch's commit would not reach rows of that same commit), and the batch's deletes
// (stageDeletes) cover every key it upserts or deletes. It reads b.recs; what it returns holds references of
// its own. mem allocates the records of the rows kept (conform.RowSelection).
//
// Each row's key is encoded (or, for one integer column, read as an integer) and hashed once; one pass from the
// last row to the first then finds the rows a later upsert or delete supersedes (keyindex.Supersede). When many rows change a key already changed (a change stream's updates), the deletes hold each key
// once (distinctKeys).
func (k *keyStage) resolve(ctx context.Context, b *batch, mem memory.Allocator) (*resolved, error) {
	ks := k.spec
	total := 0
	for i := range b.In.Recs {
		total += int(b.RecRows(i))
	}
	// A key of one integer column (an id) is every row's integer, ints; any other key is every row's encoded
	// key, row ord's at keys[offs[ord]:offs[ord+1]]. kinds is each row's operation.
	ints := intKeys(b, ks, total)
	var keys []byte
	var offs []int
	if ints == nil {
		offs = make([]int, 1, total+1)
	}
	hashes := make([]uint64, 0, total)
	kinds := make([]opKind, 0, total)
	keyedRows := 0
	ikey := make([]byte, 0, 9) // an integer key encoded as keyenc.Encoder does (so that its hash is the same)
	for i, rec := range b.In.Recs {
		n, sel := int(b.RecRows(i)), b.Sel(i)
		// A record an Apply call hashed (with the same function) brings its hashes: only a key that is not one
		// integer column still needs its bytes, to check keys sharing a hash.
		carried := i < len(b.In.Hashes) && len(b.In.Hashes[i]) == n
		if carried {
			hashes = append(hashes, b.In.Hashes[i]...)
		}
		if ints != nil {
			if !carried {
				for _, v := range ints[len(hashes) : len(hashes)+n] {
					ikey = keyenc.AppendInt(ikey[:0], v)
					hashes = append(hashes, resolveHash(ikey))
				}
			}
		} else {
			enc, err := keyenc.NewEncoder(keyColumns(rec, ks, b.In.Kinds[i] == opDelete))
			if err != nil {
				return nil, err
			}
			for j := range n {
				row := j
				if sel != nil {
					row = int(sel[j])
				}
				from := len(keys)
				keys = enc.AppendKey(keys, row)
				offs = append(offs, len(keys))
				if !carried {
					hashes = append(hashes, resolveHash(keys[from:]))
				}
			}
		}
		for range n {
			kinds = append(kinds, b.In.Kinds[i])
		}
		if b.In.Kinds[i] != opInsert {
			keyedRows += n
		}
	}
	// dropped marks the rows a later upsert or delete of their key supersedes.
	dropped := make([]bool, total)
	r := &resolved{rows: keyindex.RowKeys{Ints: ints, Bytes: keys, Offs: offs}, kinds: kinds, dropped: dropped}
	var distinct []int32 // the last row upserting or deleting each key, from the last row to the first
	if b.In.Keyed {
		distinct = keyindex.Supersede(hashes, kinds, opInsert, keyedRows, &r.rows, dropped)
	}
	kept := conform.NewRowSelection(ctx, mem)
	fail := func(err error) (*resolved, error) {
		kept.Release()
		arrowx.ReleaseRecords(r.deletes...)
		return nil, err
	}
	ord := 0
	for i, rec := range b.In.Recs {
		n, sel := int(b.RecRows(i)), b.Sel(i)
		if b.In.Kinds[i] == opDelete {
			rec.Retain()
			r.deletes = append(r.deletes, rec)
			ord += n
			continue
		}
		if b.In.Kinds[i] == opUpsert {
			kc := keyColumns(rec, ks, false)
			keyRec := array.NewRecordBatch(ks.arraysSchema(kc), kc, rec.NumRows())
			if sel != nil {
				// Only the selected rows' keys are upserted: a row left out may be a skipped change or a delete
				// whose key is null.
				taken, err := conform.NewRowTaker(ctx, mem).Record(keyRec, sel)
				keyRec.Release()
				if err != nil {
					return fail(fmt.Errorf("iceberg: take the upserted keys: %w", err))
				}
				keyRec = taken
			}
			r.deletes = append(r.deletes, keyRec)
		}
		if err := kept.Add(rec, sel, dropped[ord:ord+n]); err != nil {
			return fail(err)
		}
		ord += n
	}
	var err error
	if r.data, err = kept.Records(); err != nil {
		return fail(err)
	}
	if keyedRows-len(distinct) > keyedRows/8 && conform.ChunkTakeable(ks.schema) {
		keys, err := distinctKeys(ctx, mem, ks, r.deletes, b, distinct)
		if err != nil {
			arrowx.ReleaseRecords(r.data...)
			arrowx.ReleaseRecords(r.deletes...)
			return nil, err
		}
		arrowx.ReleaseRecords(r.deletes...)
		r.deletes = []arrow.RecordBatch{keys}
	}
	// The key sets are read only when the batch's run is formed, after its files are written: they are built
	// while the encoder writes them (at a Close that encodes the whole stream of an Apply benchmark, building
	// them took a third of resolve's time, on the critical path). hashes, kinds, dropped and distinct are not
	// changed after this point.
	r.sets = make(chan struct{})
	keyed := b.In.Keyed
	go func() {
		defer close(r.sets)
		if keyed {
			r.keyed = make(map[uint64]struct{}, len(distinct))
			for _, ord := range distinct {
				r.keyed[hashes[ord]] = struct{}{}
			}
		}
		r.written = make(map[uint64]struct{}, min(total, len(r.keyed)+total-keyedRows))
		for row, kind := range kinds {
			if kind != opDelete && !dropped[row] {
				r.written[hashes[row]] = struct{}{}
			}
		}
	}()
	return r, nil
}

// distinctKeys takes each key of a batch's key-only records once (deletes: one per keyed record of b, in
// order; distinct: the ordinal among all of b's rows of one row per key, descending) into one record. A key
// upserted or deleted several times in a batch (a change stream's updates) needs one equality delete or one
// index lookup, not one per change: in BenchmarkApply a batch upserts or deletes each key four times.
func distinctKeys(ctx context.Context, mem memory.Allocator, ks *keySpec, deletes []arrow.RecordBatch, b *batch, distinct []int32) (arrow.RecordBatch, error) {
	// pos maps the ordinals to positions in the concatenation of deletes, walking the records of b in order.
	pos := make([]int32, len(distinct))
	rows := make([]int32, len(b.In.Recs)) // each record's rows, read once: the walk below asks once per key
	for i := range rows {
		rows[i] = int32(b.RecRows(i))
	}
	var ord, at int32 // the first ordinal of b's record i, and of its keys in deletes
	i := 0
	for j := range pos {
		o := distinct[len(distinct)-1-j]
		for ; o >= ord+rows[i]; i++ {
			ord += rows[i]
			if b.In.Kinds[i] != opInsert {
				at += rows[i]
			}
		}
		pos[j] = at + o - ord
	}
	idx := arrowx.Int32Array(mem, pos)
	defer idx.Release()
	cctx := compute.WithAllocator(ctx, mem)
	cols := make([]arrow.Array, len(ks.names))
	defer arrowx.ReleaseArrays(cols)
	chunks := make([]arrow.Array, len(deletes))
	for c := range cols {
		for j, rec := range deletes {
			chunks[j] = rec.Column(c)
		}
		col, err := conform.TakeChunked(cctx, chunks[0].DataType(), chunks, idx)
		if err != nil {
			return nil, fmt.Errorf("iceberg: take the distinct keys of column %q: %w", ks.names[c], err)
		}
		cols[c] = col
	}
	return array.NewRecordBatch(ks.arraysSchema(cols), cols, int64(len(pos))), nil
}

// sourcesShareKeys reports whether rows of two source partitions in b have one key (by its hash: keys that
// only share a hash count as shared). The memory limit seals a keyed buffer no checkpoint covers as a batch per
// partition only when they do not (pipeline's bySource): the order of changes to one key must not depend on how
// the buffer was cut. A key the encoder cannot read counts as shared too.
func (k *keyStage) sourcesShareKeys(b *batch) bool {
	if k.spec == nil {
		return false
	}
	owner := map[uint64]string{}
	var buf []byte
	for i, rec := range b.In.Recs {
		n, sel, src := int(b.RecRows(i)), b.Sel(i), b.In.Sources[i]
		seen := func(h uint64) bool {
			if o, ok := owner[h]; ok {
				return o != src
			}
			owner[h] = src
			return false
		}
		if i < len(b.In.Hashes) && len(b.In.Hashes[i]) == n {
			for _, h := range b.In.Hashes[i] {
				if seen(h) {
					return true
				}
			}
			continue
		}
		enc, err := keyenc.NewEncoder(keyColumns(rec, k.spec, b.In.Kinds[i] == opDelete))
		if err != nil {
			return true
		}
		for j := range n {
			row := j
			if sel != nil {
				row = int(sel[j])
			}
			buf = enc.AppendKey(buf[:0], row)
			if seen(resolveHash(buf)) {
				return true
			}
		}
	}
	return false
}

// intKeys returns the key of each row of b, in order, when the key is one integer column (keyenc.IntValues) without a
// null in b; else nil. resolve then compares keys as integers: encoding every row's key as bytes and comparing
// those took a third of its time on an id key.
func intKeys(b *batch, ks *keySpec, total int) []int64 {
	if len(ks.idx) != 1 {
		return nil
	}
	out := make([]int64, 0, total)
	for i, rec := range b.In.Recs {
		col := keyColumns(rec, ks, b.In.Kinds[i] == opDelete)[0]
		sel := b.Sel(i)
		if sel == nil {
			vs, ok := keyenc.IntValues(col)
			if !ok {
				return nil
			}
			out = append(out, vs...)
			continue
		}
		// The selected rows are upserts, whose keys Apply checked are not null; the others' may be.
		vs, ok := keyenc.IntValuesOf(col)
		if !ok {
			return nil
		}
		for _, row := range sel {
			out = append(out, vs[row])
		}
	}
	return out
}
