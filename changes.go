package iceberg

import (
	"bytes"
	"context"
	"slices"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/iceberg-go/table"
	"github.com/icewriter/iceberg/internal/arrowx"
	"github.com/icewriter/iceberg/internal/changes"
	"github.com/icewriter/iceberg/internal/keyindex/keyenc"
	"github.com/zeebo/xxh3"
)

// changeStage is Apply's stage: where a change batch's op, version and before-image key columns are
// (changeLayout), reading them (read), resolving a call's changes per key in order (changeBatch.resolve) and,
// with a version column, the versions of keys (changes.Versions).
//
// Locking: the configuration is set by newChangeStage and never changes. With a version column, sem lets one
// Apply at a time go from its version check to its accept and the map's update (lock), so that the versions
// follow the order in which calls are accepted; it is taken after the call's validation and never while the
// pipeline's or another stage's lock is held. Without one Apply calls share nothing here.
type changeStage struct {
	cols ChangeColumns
	// inTable marks the change columns the table has: they are written like any column.
	inTable map[string]bool
	sem     chan struct{}     // nil without a version column
	vers    *changes.Versions // nil without a version column
	last    atomic.Pointer[changeLayout]
	skipped atomic.Int64 // changes older than their key's version (Stats.ChangesSkipped)
}

// withDefaults fills the empty fields of c with their defaults.
func (c ChangeColumns) withDefaults(memoryLimit int64) ChangeColumns {
	if c.Op == "" {
		c.Op = DefaultOpColumn
	}
	if c.BeforePrefix == "" {
		c.BeforePrefix = DefaultBeforePrefix
	}
	if c.Version != "" && c.VersionBytes == 0 {
		c.VersionBytes = memoryLimit / 4
	}
	return c
}

// validate checks what can be checked without the table (newChangeStage checks the rest).
func (c ChangeColumns) validate(memoryLimit int64) error {
	switch {
	case c.Op == c.Version:
		return optionErr("WithChangeColumns", "the op and version columns are both %q", c.Op)
	case c.VersionBytes < 0:
		return optionErr("WithChangeColumns", "VersionBytes must not be negative, got %d", c.VersionBytes)
	case c.Version != "" && c.VersionBytes > memoryLimit/2:
		return optionErr("WithChangeColumns", "VersionBytes %d is more than half the memory limit %d (WithMemoryLimit)",
			c.VersionBytes, memoryLimit)
	}
	return nil
}

// versionBudget is the memory set aside for the versions of keys.
func (c ChangeColumns) versionBudget() int64 {
	if c.Version == "" {
		return 0
	}
	return c.VersionBytes
}

// newChangeStage checks the change columns against the table (target: its Arrow schema) and the key (nil: no
// key; Apply then fails the key stage's check).
func newChangeStage(o *options, target *arrow.Schema, ks *keySpec) (*changeStage, error) {
	c := o.keyed.changes
	st := &changeStage{cols: c, inTable: map[string]bool{}}
	field := func(name string) (arrow.Field, bool) {
		if idx := target.FieldIndices(name); len(idx) > 0 {
			return target.Field(idx[0]), true
		}
		return arrow.Field{}, false
	}
	for _, name := range []string{c.Op, c.Version} {
		if name != "" && ks != nil && slices.Contains(ks.names, name) {
			return nil, optionErr("WithChangeColumns", "%q is a key column", name)
		}
	}
	if f, ok := field(c.Op); ok {
		if !isStringType(f.Type) {
			return nil, optionErr("WithChangeColumns", "op column %q is a table column of type %s, not a string", c.Op, f.Type)
		}
		st.inTable[c.Op] = true
	}
	if c.Version != "" {
		inTable := false
		if f, ok := field(c.Version); ok {
			if f.Type.ID() != arrow.INT64 && f.Type.ID() != arrow.INT32 {
				return nil, optionErr("WithChangeColumns", "version column %q is a table column of type %s, not an integer", c.Version, f.Type)
			}
			st.inTable[c.Version], inTable = true, true
		}
		st.sem = make(chan struct{}, 1)
		st.vers = changes.NewVersions(c.VersionBytes, c.Version, inTable)
		if o.shared != nil && o.shared.versions != nil {
			st.vers.UsePool(versionPool{o.shared.versions}, o.shared.versions.limit)
		}
	}
	if ks != nil {
		for _, n := range ks.names {
			if _, ok := field(c.BeforePrefix + n); ok {
				st.inTable[c.BeforePrefix+n] = true
			}
		}
	}
	return st, nil
}

func isStringType(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW:
		return true
	}
	return false
}

// release gives the versions back to a router's pool once the writer closed (after the Apply holding the
// version lock, if any, has returned).
func (st *changeStage) release() {
	if st == nil || st.vers == nil || !st.vers.Pooled() {
		return
	}
	st.sem <- struct{}{}
	defer func() { <-st.sem }()
	st.vers.Release()
}

// lock lets one Apply with versions at a time check them, accept and record them; it waits until ctx ends.
func (st *changeStage) lock(ctx context.Context) (unlock func(), err error) {
	if st.sem == nil {
		return func() {}, nil
	}
	select {
	case st.sem <- struct{}{}:
		return func() { <-st.sem }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// restore undoes the versions of Apply calls whose rows Source.Abort dropped (oldest first), waiting for an
// Apply under way to end whatever ctx says: versions left behind would make a replay skip changes.
func (st *changeStage) restore(ctx context.Context, undos []*changes.Undo) {
	if st.vers == nil || len(undos) == 0 {
		return
	}
	unlock, _ := st.lock(context.WithoutCancel(ctx))
	defer unlock()
	st.vers.Restore(undos)
}

// versionsFor returns the versions of keys (nil without a version column), loading them from the table on
// first use. Call it under lock.
func (st *changeStage) versionsFor(ctx context.Context, tbl *table.Table, branch string, ks *keySpec) (*changes.Versions, error) {
	if st.vers == nil {
		return nil, nil
	}
	if err := st.vers.LoadOnce(ctx, tbl, branch, ks.names); err != nil {
		return nil, err
	}
	return st.vers, nil
}

// changeLayout is where a change batch's columns are. It depends on the batch's schema only, so the stage
// keeps the last one it made.
type changeLayout struct {
	in      *arrow.Schema
	op      int
	version int   // -1: no version column
	keys    []int // per key column
	before  []int // per key column; nil: the batch has no before image
	data    []int // the columns the table takes: all but the change columns it does not have
	schema  *arrow.Schema
	opName  string
	verName string
	prefix  string
}

// layout finds the change columns of a batch of schema in.
func (st *changeStage) layout(in *arrow.Schema, ks *keySpec) (*changeLayout, error) {
	if l := st.last.Load(); l != nil && l.in == in {
		return l, nil
	}
	c := st.cols
	l := &changeLayout{in: in, version: -1, opName: c.Op, verName: c.Version, prefix: c.BeforePrefix}
	find := func(name string) int {
		if idx := in.FieldIndices(name); len(idx) > 0 {
			return idx[0]
		}
		return -1
	}
	if l.op = find(c.Op); l.op < 0 {
		return nil, columnErr(c.Op, ErrMissingColumn, "Apply needs the op column (WithChangeColumns)")
	}
	if c.Version != "" {
		if l.version = find(c.Version); l.version < 0 {
			return nil, columnErr(c.Version, ErrMissingColumn, "Apply needs the version column (WithChangeColumns)")
		}
	}
	change := map[int]bool{}
	if !st.inTable[c.Op] {
		change[l.op] = true
	}
	if l.version >= 0 && !st.inTable[c.Version] {
		change[l.version] = true
	}
	var missing string
	for _, n := range ks.names {
		k := find(n)
		if k < 0 {
			return nil, columnErr(n, ErrMissingColumn, "Apply needs every key column %v", ks.names)
		}
		l.keys = append(l.keys, k)
		b := find(c.BeforePrefix + n)
		if b < 0 {
			missing = c.BeforePrefix + n
			continue
		}
		l.before = append(l.before, b)
		if !st.inTable[c.BeforePrefix+n] {
			change[b] = true
		}
	}
	switch {
	case len(l.before) == 0:
		l.before = nil
	case missing != "":
		return nil, columnErr(missing, ErrMissingColumn, "the before-image key columns are all of the key's (%v, prefixed %q) or none",
			ks.names, c.BeforePrefix)
	}
	var fields []arrow.Field
	for i, f := range in.Fields() {
		if !change[i] {
			l.data = append(l.data, i)
			fields = append(fields, f)
		}
	}
	l.schema = in
	if len(change) > 0 {
		l.schema = arrow.NewSchema(fields, nil)
	}
	st.last.Store(l)
	return l, nil
}

// project returns the batch's columns the table takes.
func (l *changeLayout) project(rec arrow.RecordBatch) arrow.RecordBatch {
	if l.schema == l.in {
		rec.Retain()
		return rec
	}
	cols := make([]arrow.Array, len(l.data))
	for i, c := range l.data {
		cols[i] = rec.Column(c)
	}
	return array.NewRecordBatch(l.schema, cols, rec.NumRows())
}

// changeBatch is one Apply call's batch, read: each row's change and version, and its key and before-image key
// in the table's key types (nullable here: which rows need them is resolve's to check).
type changeBatch struct {
	n      int
	kinds  []opKind // opUpsert or opDelete
	vers   []int64  // nil without a version column
	keys   []arrow.Array
	before []arrow.Array // nil without a before image
}

func (cb *changeBatch) release() {
	arrowx.ReleaseArrays(cb.keys)
	arrowx.ReleaseArrays(cb.before)
}

// read parses the op and version columns and converts the key columns of rec.
func (st *changeStage) read(ctx context.Context, conf *conformer, ks *keySpec, l *changeLayout, rec arrow.RecordBatch) (*changeBatch, error) {
	cb := &changeBatch{n: int(rec.NumRows())}
	var err error
	if cb.kinds, err = changes.ParseOps(rec.Column(l.op), l.opName, columnErr); err != nil {
		return nil, err
	}
	if l.version >= 0 {
		if cb.vers, err = readVersions(ctx, rec.Column(l.version), l.verName); err != nil {
			return nil, err
		}
	}
	keys := ks.schemaFor(conf.target)
	convert := func(name string, i, col int) (arrow.Array, error) {
		f := keys.Field(i)
		f.Nullable = true
		return conf.convert(ctx, []string{name}, f, rec.Column(col), nil)
	}
	for i, n := range ks.names {
		k, err := convert(n, i, l.keys[i])
		if err != nil {
			cb.release()
			return nil, err
		}
		cb.keys = append(cb.keys, k)
	}
	for i, n := range ks.names {
		if l.before == nil {
			break
		}
		b, err := convert(l.prefix+n, i, l.before[i])
		if err != nil {
			cb.release()
			return nil, err
		}
		cb.before = append(cb.before, b)
	}
	return cb, nil
}

// readVersions reads the version column: integers, none null, as int64.
func readVersions(ctx context.Context, col arrow.Array, name string) ([]int64, error) {
	if !arrow.IsInteger(col.DataType().ID()) {
		return nil, columnErr(name, ErrTypeMismatch, "the version column must hold integers, got %s", col.DataType())
	}
	if col.NullN() > 0 {
		for i := 0; i < col.Len(); i++ {
			if col.IsNull(i) {
				return nil, columnErr(name, ErrNullInRequired, "row %d: a change needs a version", i)
			}
		}
	}
	if c, ok := col.(*array.Int64); ok {
		return slices.Clone(c.Int64Values()), nil
	}
	cast, err := compute.CastArray(ctx, col, compute.SafeCastOptions(arrow.PrimitiveTypes.Int64))
	if err != nil {
		return nil, columnErr(name, ErrTypeMismatch, "version does not fit an int64: %v", err)
	}
	defer cast.Release()
	return slices.Clone(cast.(*array.Int64).Int64Values()), nil
}

// changePlan is what one call's changes come to once resolved per key: the rows to upsert (ascending), the rows
// whose key, or whose before-image key, is deleted, and the version of each key changed.
type changePlan struct {
	upserts, delKeys, delBefore []int32
	// upHashes and delHashes are the resolveHash of each row's key, in the order of upserts and of delKeys then
	// delBefore (the rows of the records Apply hands on): the key stage's resolve takes them instead of hashing
	// every key a second time.
	upHashes, delHashes []uint64
	keys                []xxh3.Uint128 // the changes.Hash of each key changed, for the versions (with vers)
	vers                []int64        // the version of each key's last change (with a version column)
	upRows              []int32        // the row each key's last change upserts, -1 for a delete (with vers)
	skipped             int            // changes older than their key's version
}

// resolve applies the call's changes in row order, per key: an upsert row upserts its key (deleting its
// before-image key first when that differs), a delete row deletes its key (its before-image key when the key
// is null); with versions, a change older than its key's last one is skipped. The last change of each key is
// what the plan keeps. Every row is checked, the superseded ones included.
func (cb *changeBatch) resolve(ks *keySpec, l *changeLayout, vers *changes.Versions) (*changePlan, error) {
	keyEnc, err := keyenc.NewEncoder(cb.keys)
	if err != nil {
		return nil, err
	}
	var befEnc *keyenc.Encoder
	if cb.before != nil {
		if befEnc, err = keyenc.NewEncoder(cb.before); err != nil {
			return nil, err
		}
	}
	type entry struct {
		row         int32
		del, before bool
		ver         int64
		from, to    int32  // the key's bytes in keys
		hash        uint64 // the key's resolveHash
	}
	// At most two changes per row (a before-image delete and an upsert); without a before image, one.
	most := cb.n
	if cb.before != nil {
		most *= 2
	}
	plan := &changePlan{}
	if vers != nil {
		plan.keys = make([]xxh3.Uint128, 0, cb.n)
	}
	// The changes so far, one entry per key, found through an open-addressing table of entry ordinals (slot:
	// ordinal+1, 0 empty) probed from the key's hash and checked against the hash, then the key. A key is an
	// entry once, so keys sharing a hash only probe further. In BenchmarkApply (a call of mostly fresh keys, one
	// insert per row) this pass took half the time it took with a Go map keyed by the hash.
	// The hash is the key stage's (resolveHash), handed on with the rows so that the batch's resolve does not
	// hash them again; the version map keys on a 128-bit hash (changes.Hash, no key bytes to check against),
	// computed only with versions and once per key of the call.
	// A key of one integer column without nulls, with no before image (a stream keyed by an id), is compared as
	// the row's integer (ints) and its encoding built from it; keys then holds nothing.
	var ints []int64
	if len(cb.keys) == 1 && cb.before == nil {
		ints, _ = keyenc.IntValues(cb.keys[0])
	}
	var keys []byte
	if ints == nil {
		keys = make([]byte, 0, cb.n*(1+8*len(cb.keys)))
	}
	ents := make([]entry, 0, cb.n)
	same := func(i int32, key []byte, row int32) bool {
		if ints != nil {
			return ints[ents[i].row] == ints[row]
		}
		return bytes.Equal(keys[ents[i].from:ents[i].to], key)
	}
	slots := make([]int32, tableSize(most))
	mask := uint64(len(slots) - 1)
	change := func(key []byte, e entry) {
		h := resolveHash(key)
		s := h & mask
		for ; slots[s] != 0; s = (s + 1) & mask {
			i := slots[s] - 1
			if ents[i].hash != h || !same(i, key, e.row) {
				continue
			}
			if cb.vers != nil && e.ver < ents[i].ver {
				plan.skipped++
				return
			}
			e.from, e.to, e.hash = ents[i].from, ents[i].to, h
			ents[i] = e
			return
		}
		if vers != nil {
			vh := changes.Hash(key)
			if v, ok := vers.Get(vh); ok && e.ver < v {
				plan.skipped++
				return
			}
			plan.keys = append(plan.keys, vh)
		}
		if ints == nil {
			e.from = int32(len(keys))
			keys = append(keys, key...)
			e.to = int32(len(keys))
		}
		e.hash = h
		ents = append(ents, e)
		slots[s] = int32(len(ents))
	}
	appendKey := func(buf []byte, row int) []byte {
		if ints != nil {
			return keyenc.AppendInt(buf, ints[row])
		}
		return keyEnc.AppendKey(buf, row)
	}
	var kb, bb []byte
	for row := 0; row < cb.n; row++ {
		var ver int64
		if cb.vers != nil {
			ver = cb.vers[row]
		}
		keyNull := firstNull(cb.keys, row)
		hasBefore := false
		if cb.before != nil {
			switch n := firstNull(cb.before, row); {
			case n < 0:
				hasBefore = true
			case firstValid(cb.before, row) >= 0:
				return nil, columnErr(l.prefix+ks.names[n], ErrNullInRequired, "row %d: the before-image key is partly null", row)
			}
		}
		r := int32(row)
		if cb.kinds[row] == opDelete {
			switch {
			case keyNull < 0:
				kb = appendKey(kb[:0], row)
				change(kb, entry{row: r, del: true, ver: ver})
			case hasBefore:
				bb = befEnc.AppendKey(bb[:0], row)
				change(bb, entry{row: r, del: true, before: true, ver: ver})
			default:
				return nil, columnErr(ks.names[keyNull], ErrNullInRequired, "row %d: a delete's key is null and it has no before image", row)
			}
			continue
		}
		if keyNull >= 0 {
			return nil, columnErr(ks.names[keyNull], ErrNullInRequired, "row %d: an upsert's key is null", row)
		}
		kb = appendKey(kb[:0], row)
		if hasBefore {
			if bb = befEnc.AppendKey(bb[:0], row); !bytes.Equal(bb, kb) {
				change(bb, entry{row: r, del: true, before: true, ver: ver})
			}
		}
		change(kb, entry{row: r, ver: ver})
	}
	if cb.vers != nil {
		plan.vers = make([]int64, len(ents))
		plan.upRows = make([]int32, len(ents))
	}
	// The upserted rows in row order (ents are in the order keys first appeared): marked, then collected. A
	// row upserts one key at most, so its entry's ordinal marks it (0: not upserted).
	upserted := make([]int32, cb.n)
	ups := 0
	var befHashes []uint64
	for i, e := range ents {
		switch {
		case !e.del:
			upserted[e.row] = int32(i + 1)
			ups++
		case e.before:
			plan.delBefore = append(plan.delBefore, e.row)
			befHashes = append(befHashes, e.hash)
		default:
			plan.delKeys = append(plan.delKeys, e.row)
			plan.delHashes = append(plan.delHashes, e.hash)
		}
		if plan.vers != nil {
			plan.vers[i], plan.upRows[i] = e.ver, -1
			if !e.del {
				plan.upRows[i] = e.row
			}
		}
	}
	plan.delHashes = append(plan.delHashes, befHashes...)
	if ups > 0 {
		plan.upserts = make([]int32, 0, ups)
		plan.upHashes = make([]uint64, 0, ups)
		for row, ord := range upserted {
			if ord > 0 {
				plan.upserts = append(plan.upserts, int32(row))
				plan.upHashes = append(plan.upHashes, ents[ord-1].hash)
			}
		}
	}
	return plan, nil
}

// tableSize is the number of slots of an open-addressing table for up to n entries: a power of two at least
// twice n, so that probes stay short.
func tableSize(n int) int {
	size := 8
	for size < 2*n {
		size <<= 1
	}
	return size
}

// firstNull returns the first of cols that is null at row, or -1.
func firstNull(cols []arrow.Array, row int) int {
	for i, c := range cols {
		if c.IsNull(row) {
			return i
		}
	}
	return -1
}

// firstValid returns the first of cols that is not null at row, or -1.
func firstValid(cols []arrow.Array, row int) int {
	for i, c := range cols {
		if !c.IsNull(row) {
			return i
		}
	}
	return -1
}
