package changes

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/iceberg-go/table"
	"github.com/icewriter/iceberg/internal/arrowx"
	"github.com/icewriter/iceberg/internal/conform"
)

// Columns names the columns of Apply's change stream that are not (or not only) table columns: the root
// package's ChangeColumns, field for field (documented there).
type Columns struct {
	Op           string
	Version      string
	BeforePrefix string
	VersionBytes int64
}

// Defaults of Columns.
const (
	DefaultOp           = "op"
	DefaultBeforePrefix = "before_"
)

// WithDefaults fills the empty fields of c with their defaults.
func (c Columns) WithDefaults(memoryLimit int64) Columns {
	if c.Op == "" {
		c.Op = DefaultOp
	}
	if c.BeforePrefix == "" {
		c.BeforePrefix = DefaultBeforePrefix
	}
	if c.Version != "" && c.VersionBytes == 0 {
		c.VersionBytes = memoryLimit / 4
	}
	return c
}

// Validate checks what can be checked without the table (NewStage checks the rest). Its errors are about the
// option's value; the caller names the option.
func (c Columns) Validate(memoryLimit int64) error {
	switch {
	case c.Op == c.Version:
		return fmt.Errorf("the op and version columns are both %q", c.Op)
	case c.VersionBytes < 0:
		return fmt.Errorf("VersionBytes must not be negative, got %d", c.VersionBytes)
	case c.Version != "" && c.VersionBytes > memoryLimit/2:
		return fmt.Errorf("VersionBytes %d is more than half the memory limit %d (WithMemoryLimit)",
			c.VersionBytes, memoryLimit)
	}
	return nil
}

// VersionBudget is the memory set aside for the versions of keys.
func (c Columns) VersionBudget() int64 {
	if c.Version == "" {
		return 0
	}
	return c.VersionBytes
}

// Stage is Apply's stage: where a change batch's op, version and before-image key columns are (Layout),
// reading them (Read), resolving a call's changes per key in order (Batch.Resolve) and, with a version column,
// the versions of keys (Versions).
//
// Locking: the configuration is set by NewStage and never changes. With a version column, sem lets one Apply at
// a time go from its version check to its accept and the map's update (Lock), so that the versions follow the
// order in which calls are accepted; it is taken after the call's validation and never while the pipeline's or
// another stage's lock is held. Without one Apply calls share nothing here.
type Stage struct {
	cols Columns
	keys []string // the key's column names (nil: no key; Apply fails the key stage's check first)
	// inTable marks the change columns the table has: they are written like any column.
	inTable map[string]bool
	sem     chan struct{} // nil without a version column
	vers    *Versions     // nil without a version column
	last    atomic.Pointer[Layout]
	skipped atomic.Int64 // changes older than their key's version (Stats.ChangesSkipped)
}

// NewStage checks the change columns c against the table (target: its Arrow schema) and the key's column names
// (nil: no key). A version column's versions draw from pool (nil: none) of limit bytes. Its errors are about
// the option's value; the caller names the option.
func NewStage(c Columns, target *arrow.Schema, keys []string, pool Pool, limit int64) (*Stage, error) {
	st := &Stage{cols: c, keys: keys, inTable: map[string]bool{}}
	field := func(name string) (arrow.Field, bool) {
		if idx := target.FieldIndices(name); len(idx) > 0 {
			return target.Field(idx[0]), true
		}
		return arrow.Field{}, false
	}
	for _, name := range []string{c.Op, c.Version} {
		if name != "" && slices.Contains(keys, name) {
			return nil, fmt.Errorf("%q is a key column", name)
		}
	}
	if f, ok := field(c.Op); ok {
		if !isStringType(f.Type) {
			return nil, fmt.Errorf("op column %q is a table column of type %s, not a string", c.Op, f.Type)
		}
		st.inTable[c.Op] = true
	}
	if c.Version != "" {
		inTable := false
		if f, ok := field(c.Version); ok {
			if f.Type.ID() != arrow.INT64 && f.Type.ID() != arrow.INT32 {
				return nil, fmt.Errorf("version column %q is a table column of type %s, not an integer", c.Version, f.Type)
			}
			st.inTable[c.Version], inTable = true, true
		}
		st.sem = make(chan struct{}, 1)
		st.vers = NewVersions(c.VersionBytes, c.Version, inTable)
		if pool != nil {
			st.vers.UsePool(pool, limit)
		}
	}
	for _, n := range keys {
		if _, ok := field(c.BeforePrefix + n); ok {
			st.inTable[c.BeforePrefix+n] = true
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

// Release gives the versions back to a router's pool once the writer closed (after the Apply holding the
// version lock, if any, has returned).
func (st *Stage) Release() {
	if st == nil || st.vers == nil || !st.vers.Pooled() {
		return
	}
	st.sem <- struct{}{}
	defer func() { <-st.sem }()
	st.vers.Release()
}

// Lock lets one Apply with versions at a time check them, accept and record them; it waits until ctx ends.
func (st *Stage) Lock(ctx context.Context) (unlock func(), err error) {
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

// Restore undoes the versions of Apply calls whose rows Source.Abort dropped (oldest first), waiting for an
// Apply under way to end whatever ctx says: versions left behind would make a replay skip changes.
func (st *Stage) Restore(ctx context.Context, undos []*Undo) {
	if st.vers == nil || len(undos) == 0 {
		return
	}
	unlock, _ := st.Lock(context.WithoutCancel(ctx))
	defer unlock()
	st.vers.Restore(undos)
}

// VersionsFor returns the versions of keys (nil without a version column), loading them from the table on
// first use. Call it under Lock.
func (st *Stage) VersionsFor(ctx context.Context, tbl *table.Table, branch string) (*Versions, error) {
	if st.vers == nil {
		return nil, nil
	}
	if err := st.vers.LoadOnce(ctx, tbl, branch, st.keys); err != nil {
		return nil, err
	}
	return st.vers, nil
}

// Accepted records the versions of a call's changes once the pipeline accepted its records (vers: from
// VersionsFor; nil: none), but not those of the rows routed to the dead letter handler (dead, ascending), with
// their undo (nil: none). Call it under Lock.
func (st *Stage) Accepted(vers *Versions, plan *Plan, dead []int32, undo *CallUndo) {
	if vers == nil {
		return
	}
	vers.Accepted(plan.keys, plan.upRows, plan.vers, dead, undo)
	st.skipped.Add(int64(plan.skipped))
}

// Skipped is the number of changes skipped as older than their key's version (Stats.ChangesSkipped).
func (st *Stage) Skipped() int64 { return st.skipped.Load() }

// Layout is where a change batch's columns are. It depends on the batch's schema only, so the stage keeps the
// last one it made.
type Layout struct {
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

// Layout finds the change columns of a batch of schema in.
func (st *Stage) Layout(in *arrow.Schema) (*Layout, error) {
	if l := st.last.Load(); l != nil && l.in == in {
		return l, nil
	}
	c := st.cols
	l := &Layout{in: in, version: -1, opName: c.Op, verName: c.Version, prefix: c.BeforePrefix}
	find := func(name string) int {
		if idx := in.FieldIndices(name); len(idx) > 0 {
			return idx[0]
		}
		return -1
	}
	if l.op = find(c.Op); l.op < 0 {
		return nil, conform.ColumnErr(c.Op, conform.ErrMissingColumn, "Apply needs the op column (WithChangeColumns)")
	}
	if c.Version != "" {
		if l.version = find(c.Version); l.version < 0 {
			return nil, conform.ColumnErr(c.Version, conform.ErrMissingColumn, "Apply needs the version column (WithChangeColumns)")
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
	for _, n := range st.keys {
		k := find(n)
		if k < 0 {
			return nil, conform.ColumnErr(n, conform.ErrMissingColumn, "Apply needs every key column %v", st.keys)
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
		return nil, conform.ColumnErr(missing, conform.ErrMissingColumn, "the before-image key columns are all of the key's (%v, prefixed %q) or none",
			st.keys, c.BeforePrefix)
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

// Project returns the batch's columns the table takes.
func (l *Layout) Project(rec arrow.RecordBatch) arrow.RecordBatch {
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

// Batch is one Apply call's batch, read: each row's change and version, and its key and before-image key in
// the table's key types (nullable here: which rows need them is Resolve's to check).
type Batch struct {
	n         int
	kinds     []Kind  // Upsert or Delete
	vers      []int64 // nil without a version column
	keys      []arrow.Array
	before    []arrow.Array // nil without a before image
	keyNames  []string
	keySchema *arrow.Schema // the key columns as the table types them
	prefix    string        // of the before-image key columns
}

// Release releases the batch's key columns.
func (cb *Batch) Release() {
	arrowx.ReleaseArrays(cb.keys)
	arrowx.ReleaseArrays(cb.before)
}

// Read parses the op and version columns and converts the key columns of rec with conf, into keySchema (the
// key columns as conf's table schema types them).
func (st *Stage) Read(ctx context.Context, conf *conform.Conformer, keySchema *arrow.Schema, l *Layout, rec arrow.RecordBatch) (*Batch, error) {
	cb := &Batch{n: int(rec.NumRows()), keyNames: st.keys, keySchema: keySchema, prefix: l.prefix}
	var err error
	if cb.kinds, err = ParseOps(rec.Column(l.op), l.opName); err != nil {
		return nil, err
	}
	if l.version >= 0 {
		if cb.vers, err = readVersions(ctx, rec.Column(l.version), l.verName); err != nil {
			return nil, err
		}
	}
	convert := func(name string, i, col int) (arrow.Array, error) {
		f := keySchema.Field(i)
		f.Nullable = true
		return conf.Convert(ctx, []string{name}, f, rec.Column(col), nil)
	}
	for i, n := range st.keys {
		k, err := convert(n, i, l.keys[i])
		if err != nil {
			cb.Release()
			return nil, err
		}
		cb.keys = append(cb.keys, k)
	}
	for i, n := range st.keys {
		if l.before == nil {
			break
		}
		b, err := convert(l.prefix+n, i, l.before[i])
		if err != nil {
			cb.Release()
			return nil, err
		}
		cb.before = append(cb.before, b)
	}
	return cb, nil
}

// readVersions reads the version column: integers, none null, as int64.
func readVersions(ctx context.Context, col arrow.Array, name string) ([]int64, error) {
	if !arrow.IsInteger(col.DataType().ID()) {
		return nil, conform.ColumnErr(name, conform.ErrTypeMismatch, "the version column must hold integers, got %s", col.DataType())
	}
	if col.NullN() > 0 {
		for i := 0; i < col.Len(); i++ {
			if col.IsNull(i) {
				return nil, conform.ColumnErr(name, conform.ErrNullInRequired, "row %d: a change needs a version", i)
			}
		}
	}
	if c, ok := col.(*array.Int64); ok {
		return slices.Clone(c.Int64Values()), nil
	}
	cast, err := compute.CastArray(ctx, col, compute.SafeCastOptions(arrow.PrimitiveTypes.Int64))
	if err != nil {
		return nil, conform.ColumnErr(name, conform.ErrTypeMismatch, "version does not fit an int64: %v", err)
	}
	defer cast.Release()
	return slices.Clone(cast.(*array.Int64).Int64Values()), nil
}
