package conform

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/scalar"
	"github.com/icewriter/iceberg/internal/arrowx"
	"github.com/icewriter/iceberg/internal/encode"
)

// Conformer projects caller batches onto the table's Arrow schema: columns matched by name and reordered (struct
// fields too), missing optional columns filled with nulls, lossless casts applied, nullability checked, and the
// result copied into memory the writer owns. Every check happens before anything is kept, so an error accepts
// nothing.
type Conformer struct {
	target *arrow.Schema // the table's schema as Arrow, with field-id metadata
	// defaults are the write-defaults of target's fields (nested ones included), which fill a column or struct
	// field a batch lacks instead of nulls (Writer.AddColumn, ColumnDefault or another tool set them).
	defaults Defaults
	mem      memory.Allocator
	// hooks, when set, relax a required column that received nulls (WithSchemaEvolution) and receive the rows
	// that cannot be converted (WithDeadLetter). Without them every problem fails the call.
	hooks *Hooks
	// smallRows is the row count under which KeepRows declines a call (the pipeline gathers those).
	smallRows int64
	last      atomic.Pointer[layout] // the layout of the last batch schema seen
}

// Hooks is what a Conformer may ask beyond its own schema: both are optional.
type Hooks struct {
	// DeadLetter receives the rows that cannot be converted (WithDeadLetter).
	DeadLetter func(row any, err error)
	// Relax makes the required column at path optional, as schema evolution does when nulls arrive in it. It
	// returns the Conformer for the table schema then current and whether that differs from c's.
	Relax func(ctx context.Context, c *Conformer, path []string) (*Conformer, bool, error)
}

// New returns a Conformer for target, whose fields' write-defaults are defaults (nil: none), copying into mem. hooks may be nil (every problem fails the call). KeepRows declines calls
// under smallRows rows.
func New(target *arrow.Schema, defaults Defaults, mem memory.Allocator, hooks *Hooks, smallRows int64) *Conformer {
	return &Conformer{target: target, defaults: defaults, mem: mem, hooks: hooks, smallRows: smallRows}
}

// Target is the table's schema as Arrow, with field-id metadata.
func (c *Conformer) Target() *arrow.Schema { return c.target }

// Hooks are the hooks the Conformer was built with (nil: none).
func (c *Conformer) Hooks() *Hooks { return c.hooks }

// Mem is the allocator conformed records are copied into.
func (c *Conformer) Mem() memory.Allocator { return c.mem }

// Defaults are the write-defaults of Target's fields (nil: none).
func (c *Conformer) Defaults() Defaults { return c.defaults }

// MaxRetries bounds the schema changes (one relaxed column each) a single call may cause.
const MaxRetries = 64

// Conform returns a record in the target schema that owns its memory, its size in bytes and the rows of rec
// routed to the dead letter handler (ascending; they are not in the record).
func (c *Conformer) Conform(ctx context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, int64, []int64, error) {
	return c.ConformAs(ctx, rec, true)
}

// ConformView is Conform without the copy: the record may share the caller's buffers, so it must be consumed
// (gathered) before the call returns. Its size is what a copy of its rows holds.
func (c *Conformer) ConformView(ctx context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, int64, []int64, error) {
	return c.ConformAs(ctx, rec, false)
}

// ConformAs is Conform when own is set, ConformView otherwise.
func (c *Conformer) ConformAs(ctx context.Context, rec arrow.RecordBatch, own bool) (arrow.RecordBatch, int64, []int64, error) {
	if rec == nil {
		return nil, 0, nil, fmt.Errorf("iceberg: nil record batch")
	}
	if _, err := c.layoutFor(rec.Schema()); err != nil {
		return nil, 0, nil, err
	}
	for range MaxRetries {
		out, size, err := c.conformOnce(ctx, rec, own)
		if err == nil || c.hooks == nil {
			return out, size, nil, err
		}
		next, retry, rerr := c.relaxFor(ctx, err)
		if rerr != nil {
			return nil, 0, nil, rerr
		}
		if retry {
			c = next
			continue
		}
		if c.hooks.DeadLetter == nil || !isRowLevel(err) {
			return nil, 0, nil, err
		}
		out, size, bad, next, err := c.bisect(ctx, rec)
		if next != nil {
			c = next // a column was relaxed on the way: start over with the new schema
			continue
		}
		if err != nil {
			return nil, 0, nil, err
		}
		dead := make([]int64, len(bad))
		for i, b := range bad {
			dead[i] = b.row
			row := rec.NewSlice(b.row, b.row+1)
			c.hooks.DeadLetter(row, b.err)
			row.Release()
		}
		return out, size, dead, nil
	}
	return nil, 0, nil, fmt.Errorf("%w: more than %d schema changes for one batch", ErrEvolve, MaxRetries)
}

// KeepRows returns rec in the target schema without a copy, for the rows at rows (ascending) to be taken from
// it later (an Apply call's upserts, batchRecord.sel), and the memory it holds: every buffer it shares with the
// caller, whole, so that the memory limit counts what the writer pins. The caller may release rec at once (the
// record holds references of its own); Arrow buffers are immutable, so what the writer later takes is what rec
// held when the call returned. ok is false when rec must be conformed into a copy instead: a small call (the
// pipeline's rules for those stay), a column that needs converting (a type differs, a nested or dictionary
// type), a null at rows in a required column (conform reports it or hands the row to the dead letter handler),
// or buffers more than keepSlack times what a copy of the rows would hold (a slice of a larger batch, a call
// that keeps few of its rows): a copy then frees the rest.
func (c *Conformer) KeepRows(rec arrow.RecordBatch, rows []int32) (arrow.RecordBatch, int64, bool) {
	n := rec.NumRows()
	if n < c.smallRows || len(rows) == 0 {
		return nil, 0, false
	}
	lay, err := c.layoutFor(rec.Schema())
	if err != nil {
		return nil, 0, false
	}
	var pinned, copied int64
	for i, tf := range c.target.Fields() {
		in := lay.idx[i]
		if in < 0 {
			if !tf.Nullable {
				return nil, 0, false
			}
			continue // a null column of the writer's own, made below
		}
		col := rec.Column(in)
		if !arrow.TypeEqual(col.DataType(), tf.Type) || len(col.Data().Children()) > 0 || !ChunkTakeableType(tf.Type) {
			return nil, 0, false
		}
		if !tf.Nullable && col.NullN() > 0 {
			for _, r := range rows {
				if col.IsNull(int(r)) {
					return nil, 0, false
				}
			}
		}
		for _, b := range col.Data().Buffers() {
			if b != nil {
				pinned += int64(b.Cap())
			}
		}
		copied += arrowx.ViewSize(col) * int64(len(rows)) / n
	}
	if pinned > keepSlack*copied {
		return nil, 0, false
	}
	cols := make([]arrow.Array, c.target.NumFields())
	defer arrowx.ReleaseArrays(cols)
	for i, tf := range c.target.Fields() {
		if in := lay.idx[i]; in >= 0 {
			cols[i] = rec.Column(in)
			cols[i].Retain()
			continue
		}
		if c.defaults.Of(tf) != nil {
			return nil, 0, false // a copy fills it
		}
		cols[i] = array.MakeArrayOfNull(c.mem, tf.Type, int(n))
		pinned += arrowx.ArraySize(cols[i].Data())
	}
	return array.NewRecordBatch(c.target, cols, n), pinned, true
}

// missing is the target field tf (at path) for n rows of a batch that lacks it: its write-default, or nulls.
func (c *Conformer) missing(path []string, tf arrow.Field, n int) (arrow.Array, error) {
	d := c.defaults.Of(tf)
	if d == nil {
		return array.MakeArrayOfNull(c.mem, tf.Type, n), nil
	}
	a, err := scalar.MakeArrayFromScalar(d, n, c.mem)
	if err == nil && !arrow.TypeEqual(a.DataType(), tf.Type) {
		a.Release()
		err = fmt.Errorf("its type %s is not the column's %s", a.DataType(), tf.Type)
	}
	if err != nil {
		return nil, ColumnErr(strings.Join(path, "."), ErrTypeMismatch, "filling the column with its write-default: %v", err)
	}
	return a, nil
}

// keepSlack bounds what KeepRows pins: at most this many times what a copy of the rows kept would hold.
const keepSlack = 2

// layout maps a batch schema's columns onto the target's: idx[i] is the batch column of target field i (-1:
// none). A source sends batches of one schema over and over: the last one's layout is kept.
type layout struct {
	in  *arrow.Schema
	idx []int
}

// layoutFor checks a batch schema's names (no column twice, none unknown) and maps its columns.
func (c *Conformer) layoutFor(in *arrow.Schema) (*layout, error) {
	if l := c.last.Load(); l != nil && l.in == in {
		return l, nil
	}
	if err := CheckNames(in); err != nil {
		return nil, err
	}
	for i := range in.NumFields() {
		if name := in.Field(i).Name; len(c.target.FieldIndices(name)) == 0 {
			return nil, ColumnErr(name, ErrUnknownColumn, "table columns are %s", FieldNames(c.target))
		}
	}
	l := &layout{in: in, idx: make([]int, c.target.NumFields())}
	for i := range l.idx {
		l.idx[i] = -1
		if idx := in.FieldIndices(c.target.Field(i).Name); len(idx) > 0 {
			l.idx[i] = idx[0]
		}
	}
	c.last.Store(l)
	return l, nil
}

// CheckNames rejects a batch that has a column twice.
func CheckNames(in *arrow.Schema) error {
	if in.NumFields() < 2 {
		return nil
	}
	seen := make(map[string]struct{}, in.NumFields())
	for _, f := range in.Fields() {
		if _, dup := seen[f.Name]; dup {
			return ColumnErr(f.Name, ErrTypeMismatch, "the batch has this column twice")
		}
		seen[f.Name] = struct{}{}
	}
	return nil
}

// relaxFor makes a required column optional when err is a null in it and schema evolution is on; retry is
// true when the table schema changed (or had changed since c was built) and the call should start over.
func (c *Conformer) relaxFor(ctx context.Context, err error) (next *Conformer, retry bool, _ error) {
	var re *rowLevelError
	if c.hooks.Relax == nil || !errors.As(err, &re) || !re.null {
		return nil, false, nil
	}
	return c.hooks.Relax(ctx, c, re.path)
}

// badRow is a row routed to the dead-letter function.
type badRow struct {
	row int64
	err error
}

// bisect conforms the rows that can be conformed and lists the others: a slice that fails is split in halves
// until the failing rows are single, so k bad rows cost O(k log n) conversions. next is set when a column was
// relaxed on the way (the caller starts over).
func (c *Conformer) bisect(ctx context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, int64, []badRow, *Conformer, error) {
	var good []arrow.RecordBatch
	var bad []badRow
	release := func() {
		for _, g := range good {
			g.Release()
		}
	}
	var walk func(lo, hi int64) (*Conformer, error)
	walk = func(lo, hi int64) (*Conformer, error) {
		part := rec.NewSlice(lo, hi)
		out, _, err := c.conformOnce(ctx, part, true)
		part.Release()
		if err == nil {
			good = append(good, out)
			return nil, nil
		}
		if next, retry, rerr := c.relaxFor(ctx, err); rerr != nil || retry {
			return next, rerr
		}
		if !isRowLevel(err) {
			return nil, err
		}
		if hi-lo == 1 {
			bad = append(bad, badRow{row: lo, err: err})
			return nil, nil
		}
		mid := lo + (hi-lo)/2
		if next, err := walk(lo, mid); next != nil || err != nil {
			return next, err
		}
		return walk(mid, hi)
	}
	if next, err := walk(0, rec.NumRows()); next != nil || err != nil {
		release()
		return nil, 0, nil, next, err
	}
	var out arrow.RecordBatch
	switch len(good) {
	case 0:
		empty := rec.NewSlice(0, 0)
		var err error
		out, _, err = c.conformOnce(ctx, empty, true)
		empty.Release()
		if err != nil {
			return nil, 0, nil, nil, err
		}
	case 1:
		out = good[0]
		good = nil
	default:
		var err error
		out, err = encode.ConcatRecords(c.mem, c.target, good)
		release()
		if err != nil {
			return nil, 0, nil, nil, err
		}
	}
	var size int64
	for _, col := range out.Columns() {
		size += arrowx.ArraySize(col.Data())
	}
	return out, size, bad, nil, nil
}

// conformOnce converts the batch in one go: any problem fails it. Unless own is set, columns that need no
// conversion are the caller's own (a view), and the size is what a copy of the rows holds.
func (c *Conformer) conformOnce(ctx context.Context, rec arrow.RecordBatch, own bool) (arrow.RecordBatch, int64, error) {
	lay, err := c.layoutFor(rec.Schema())
	if err != nil {
		return nil, 0, err
	}
	n := rec.NumRows()
	cols := make([]arrow.Array, c.target.NumFields())
	release := func() {
		for _, a := range cols {
			if a != nil {
				a.Release()
			}
		}
	}
	var size int64
	for i := range c.target.NumFields() {
		tf := c.target.Field(i)
		in := lay.idx[i]
		if in < 0 {
			if !tf.Nullable && c.defaults.Of(tf) == nil {
				release()
				return nil, 0, ColumnErr(tf.Name, ErrMissingColumn, "the batch has no such column")
			}
			if cols[i], err = c.missing([]string{tf.Name}, tf, int(n)); err != nil {
				release()
				return nil, 0, err
			}
			size += arrowx.ArraySize(cols[i].Data())
			continue
		}
		var col arrow.Array
		if own {
			col, err = c.Column(ctx, tf, rec.Schema().Field(in), rec.Column(in))
		} else {
			col, err = c.columnView(ctx, tf, rec.Column(in))
		}
		if err != nil {
			release()
			return nil, 0, err
		}
		cols[i] = col
		if own {
			size += arrowx.ArraySize(col.Data())
		} else {
			size += arrowx.ViewSize(col)
		}
	}
	out := array.NewRecordBatch(c.target, cols, n)
	release()
	return out, size, nil
}

// Column converts one caller column to the table field, returning an array the writer owns. The input field
// is not needed beyond its array's type; the parameter keeps the signature Delete uses.
func (c *Conformer) Column(ctx context.Context, tf, _ arrow.Field, col arrow.Array) (arrow.Array, error) {
	src, err := c.Convert(ctx, []string{tf.Name}, tf, col, nil)
	if err != nil {
		return nil, err
	}
	defer src.Release()
	// Copy into the writer's memory (a retained slice would pin the caller's buffers and make the memory limit
	// lie), then give the data the table's exact type: field ids and nullability of nested fields.
	copied, err := array.Concatenate([]arrow.Array{src}, c.mem)
	if err != nil {
		return nil, ColumnErr(tf.Name, err, "")
	}
	defer copied.Release()
	data := retype(copied.Data(), tf.Type)
	defer data.Release()
	return array.MakeFromData(data), nil
}

// columnView is Column without the copy.
func (c *Conformer) columnView(ctx context.Context, tf arrow.Field, col arrow.Array) (arrow.Array, error) {
	src, err := c.Convert(ctx, []string{tf.Name}, tf, col, nil)
	if err != nil {
		return nil, err
	}
	if len(src.Data().Children()) == 0 && arrow.TypeEqual(src.DataType(), tf.Type) {
		return src, nil // nothing nested to carry the table's field ids
	}
	defer src.Release()
	data := retype(src.Data(), tf.Type)
	defer data.Release()
	return array.MakeFromData(data), nil
}

// rowLevelError marks a problem of some rows, not of the column as a whole: a null in a required field, a value
// that does not fit. It is wrapped by a *ColumnError.
type rowLevelError struct {
	path []string
	null bool // a null in a required field that schema evolution may relax (never a map key: always required)
	err  error
}

func (e *rowLevelError) Error() string { return e.err.Error() }
func (e *rowLevelError) Unwrap() error { return e.err }

func isRowLevel(err error) bool {
	var re *rowLevelError
	return errors.As(err, &re)
}

func rowErr(path []string, null bool, reason error, format string, args ...any) error {
	return &ColumnError{Column: strings.Join(path, "."), Err: &rowLevelError{path: path, null: null,
		err: fmt.Errorf("%w: "+format, append([]any{reason}, args...)...)}}
}

// castable lists the lossless conversions Write applies on its own; SafeCastOptions still rejects a value that
// does not fit (an int64 over the int32 range, a timestamp with sub-microsecond digits).
func castable(from, to arrow.DataType) bool {
	isInt := func(t arrow.DataType) bool {
		switch t.ID() {
		case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
			return true
		}
		return false
	}
	isString := func(t arrow.DataType) bool {
		return t.ID() == arrow.STRING || t.ID() == arrow.LARGE_STRING || t.ID() == arrow.STRING_VIEW
	}
	isBinary := func(t arrow.DataType) bool {
		return t.ID() == arrow.BINARY || t.ID() == arrow.LARGE_BINARY || t.ID() == arrow.BINARY_VIEW
	}
	switch {
	case isInt(from) && (to.ID() == arrow.INT32 || to.ID() == arrow.INT64):
		return true
	case (from.ID() == arrow.FLOAT16 || from.ID() == arrow.FLOAT32) && to.ID() == arrow.FLOAT64:
		return true
	case isString(from) && isString(to), isBinary(from) && isBinary(to):
		return true
	case from.ID() == arrow.TIMESTAMP && to.ID() == arrow.TIMESTAMP:
		ft, tt := from.(*arrow.TimestampType), to.(*arrow.TimestampType)
		return (ft.TimeZone == "") == (tt.TimeZone == "")
	case from.ID() == arrow.DATE64 && to.ID() == arrow.DATE32:
		return true
	case from.ID() == arrow.DECIMAL128 && to.ID() == arrow.DECIMAL128:
		ft, tt := from.(*arrow.Decimal128Type), to.(*arrow.Decimal128Type)
		return ft.Scale == tt.Scale && ft.Precision <= tt.Precision
	}
	return false
}

// retype rebuilds array data with the given type (same layout), recursively, so that nested fields carry the
// table's names, nullability and field-id metadata.
func retype(d arrow.ArrayData, t arrow.DataType) arrow.ArrayData {
	children := d.Children()
	var newChildren []arrow.ArrayData
	switch tt := t.(type) {
	case *arrow.StructType:
		for i, ch := range children {
			newChildren = append(newChildren, retype(ch, tt.Field(i).Type))
		}
	case *arrow.ListType:
		newChildren = []arrow.ArrayData{retype(children[0], tt.Elem())}
	case *arrow.LargeListType:
		newChildren = []arrow.ArrayData{retype(children[0], tt.Elem())}
	case *arrow.FixedSizeListType:
		newChildren = []arrow.ArrayData{retype(children[0], tt.Elem())}
	case *arrow.MapType:
		newChildren = []arrow.ArrayData{retype(children[0], tt.Elem())}
	default:
		for _, ch := range children {
			ch.Retain()
			newChildren = append(newChildren, ch)
		}
	}
	out := array.NewData(t, d.Len(), d.Buffers(), newChildren, d.NullN(), d.Offset())
	for _, ch := range newChildren {
		ch.Release()
	}
	return out
}

func FieldNames(s *arrow.Schema) string {
	names := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}
