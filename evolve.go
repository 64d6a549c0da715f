package iceberg

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/icewriter/iceberg/internal/commit"
	"github.com/icewriter/iceberg/internal/conform"
)

// WithSchemaEvolution lets Write, Upsert, WriteStructs and UpsertStructs change the table's schema to take their
// rows: a column (or nested struct field) the table lacks is added as an optional column; a column whose type
// is narrower than the batch's is promoted as the Iceberg spec allows (int to long, float to double, decimal
// precision widening); a required column that receives nulls becomes optional, unless it is a key column.
//
// The schema change is committed before the rows that need it are accepted, so every data file carries field
// ids the table has; a change made by another writer or tool is picked up at the next batch that needs it.
// Default: off, and a column the table lacks is a *ColumnError wrapping ErrUnknownColumn.
func WithSchemaEvolution() Option { return func(o *options) { o.schema.evolve = true } }

// WithDeadLetter routes rows that cannot be converted to fn, with the reason, instead of failing the whole call;
// the other rows are accepted. Default: none, and a bad row fails the call (nothing of it is accepted).
//
// For WriteStructs and UpsertStructs, row is the offending Go value (of the slice's element type) and err a
// *ColumnError; they are routed once the rest of the call has been accepted. For Write and Upsert, row is a
// one-row arrow.RecordBatch (a slice of the caller's batch, released when fn returns: call Retain to keep it)
// and err a *ColumnError; rows are routed while the call validates, before the rest is accepted. Row-level
// problems are routed: a null in a required column (that schema evolution does not relax), a value that does
// not fit the column's type. Schema-level problems (an unknown column, a column of the wrong type, a missing
// required column) still fail the whole call.
//
// fn runs on the caller's goroutine and must not call back into the Writer.
func WithDeadLetter(fn func(row any, err error)) Option {
	return func(o *options) { o.schema.deadLetter = fn }
}

// evolveAttempts bounds the catalog commits of one schema change (each after a reload and a fresh look).
const evolveAttempts = 10

// maxSeenSchemas bounds the cache of input schemas known to fit the table: past it the cache starts over.
const maxSeenSchemas = 1024

// evoState caches which input schemas need no schema change.
type evoState struct {
	seen    sync.Map // *arrow.Schema -> *seenEntry
	byPrint sync.Map // fingerprint -> *seenEntry
	nSeen   atomic.Int64
	nPrint  atomic.Int64
}

// seenEntry records that an input schema fits target as it is: conf is the conformer to use.
type seenEntry struct {
	target *arrow.Schema
	conf   *conformer
}

// evolveFor makes the table's schema able to take a batch of schema in (adding columns, widening types) when
// schema evolution is on, and returns the conformer for the resulting table schema.
//
// A schema already seen against the current table schema costs two map lookups.
func (w *Writer) evolveFor(ctx context.Context, in *arrow.Schema) (*conformer, error) {
	st := &w.view.evo
	target := w.view.conformer().target
	if v, ok := st.seen.Load(in); ok {
		if e := v.(*seenEntry); e.target == target {
			return e.conf, nil
		}
	}
	fp := in.Fingerprint()
	if fp != "" {
		if v, ok := st.byPrint.Load(fp); ok {
			if e := v.(*seenEntry); e.target == target {
				st.remember(in, "", e)
				return e.conf, nil
			}
		}
	}
	plan := func(sc *ice.Schema) ([]schemaChange, error) { return w.planFor(in, sc) }
	changes, err := plan(w.Table().Schema())
	if err != nil {
		return nil, err
	}
	if len(changes) > 0 {
		if err := w.evolveSchema(ctx, plan); err != nil {
			return nil, err
		}
	}
	conf := w.view.conformer()
	// Remember only what fits the table as it is now: a concurrent change simply misses the cache next time.
	if left, err := plan(w.Table().Schema()); err == nil && len(left) == 0 {
		st.remember(in, fp, &seenEntry{target: conf.target, conf: conf})
	}
	return conf, nil
}

// remember caches e for the schema pointer in and, when fp is set, its fingerprint. Each map starts over when
// full (callers that build a new *arrow.Schema per batch fill the pointer map; the fingerprints stay).
func (st *evoState) remember(in *arrow.Schema, fp string, e *seenEntry) {
	if st.nSeen.Add(1) > maxSeenSchemas {
		st.seen.Clear()
		st.nSeen.Store(1)
	}
	st.seen.Store(in, e)
	if fp == "" {
		return
	}
	if st.nPrint.Add(1) > maxSeenSchemas {
		st.byPrint.Clear()
		st.nPrint.Store(1)
	}
	st.byPrint.Store(fp, e)
}

// schemaChange is one change to the table schema: exactly one of add, promote and relax is set.
type schemaChange struct {
	path    []string
	add     ice.Type // add an optional column of this type
	initial any      // with add: the column's initial-default and write-default (AddColumn), nil for none
	promote ice.Type // widen the column to this type
	relax   bool     // make the required column optional
}

func (c schemaChange) String() string {
	name := strings.Join(c.path, ".")
	switch {
	case c.add != nil && c.initial != nil:
		return fmt.Sprintf("add %s %s default %v", name, c.add, c.initial)
	case c.add != nil:
		return fmt.Sprintf("add %s %s", name, c.add)
	case c.promote != nil:
		return fmt.Sprintf("promote %s to %s", name, c.promote)
	}
	return fmt.Sprintf("make %s optional", name)
}

// planFor lists the changes the table schema sc needs to take batches of schema in. Type differences that are
// not promotions are left to the conformer, which casts what it can and reports the rest.
func (w *Writer) planFor(in *arrow.Schema, sc *ice.Schema) ([]schemaChange, error) {
	var out []schemaChange
	for _, f := range in.Fields() {
		tf, ok := topField(sc, f.Name)
		if !ok {
			t, err := newColumnType(f)
			if err != nil {
				return nil, columnErr(f.Name, ErrTypeMismatch, "cannot add a column of type %s: %v", f.Type, err)
			}
			out = append(out, schemaChange{path: []string{f.Name}, add: t})
			continue
		}
		key := w.isKey(sc, f.Name, tf.ID)
		if err := planField(&out, []string{f.Name}, f.Type, tf, key); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func topField(sc *ice.Schema, name string) (ice.NestedField, bool) {
	for _, f := range sc.Fields() {
		if f.Name == name {
			return f, true
		}
	}
	return ice.NestedField{}, false
}

// isKey reports whether a column is a key column (WithKeys or identifier field): keys are never relaxed. They
// may be promoted (int to long, float to double, a wider decimal): a key encodes the same before and after
// (keyenc.Encoder), so the key index holds, and the key columns' types follow the batch's (keySpec.schemaOf).
func (w *Writer) isKey(sc *ice.Schema, top string, id int) bool {
	if slices.Contains(w.keys.names(), top) {
		return true
	}
	return slices.Contains(sc.IdentifierFieldIDs, id)
}

// planField compares one input type with the table field at path, recursively.
func planField(out *[]schemaChange, path []string, in arrow.DataType, tf ice.NestedField, key bool) error {
	child := func(name string) []string { return append(slices.Clone(path), name) }
	switch tt := tf.Type.(type) {
	case *ice.StructType:
		st, ok := in.(*arrow.StructType)
		if !ok {
			return nil
		}
		for _, f := range st.Fields() {
			idx := slices.IndexFunc(tt.FieldList, func(n ice.NestedField) bool { return n.Name == f.Name })
			if idx < 0 {
				t, err := newColumnType(f)
				if err != nil {
					return columnErr(strings.Join(child(f.Name), "."), ErrTypeMismatch,
						"cannot add a field of type %s: %v", f.Type, err)
				}
				*out = append(*out, schemaChange{path: child(f.Name), add: t})
				continue
			}
			if err := planField(out, child(f.Name), f.Type, tt.FieldList[idx], key); err != nil {
				return err
			}
		}
	case *ice.ListType:
		var elem arrow.DataType
		switch lt := in.(type) {
		case *arrow.ListType:
			elem = lt.Elem()
		case *arrow.LargeListType:
			elem = lt.Elem()
		case *arrow.FixedSizeListType:
			elem = lt.Elem()
		default:
			return nil
		}
		return planField(out, child("element"), elem, tt.ElementField(), key)
	case *ice.MapType:
		if mt, ok := in.(*arrow.MapType); ok {
			return planField(out, child("value"), mt.ItemType(), tt.ValueField(), key)
		}
	case ice.Int32Type:
		if in.ID() == arrow.INT64 || in.ID() == arrow.UINT32 || in.ID() == arrow.UINT64 {
			*out = append(*out, schemaChange{path: path, promote: ice.PrimitiveTypes.Int64})
		}
	case ice.Float32Type:
		if in.ID() == arrow.FLOAT64 {
			*out = append(*out, schemaChange{path: path, promote: ice.PrimitiveTypes.Float64})
		}
	case ice.DecimalType:
		if dt, ok := in.(arrow.DecimalType); ok && int(dt.GetScale()) == tt.Scale() &&
			int(dt.GetPrecision()) > tt.Precision() && dt.GetPrecision() <= 38 {
			*out = append(*out, schemaChange{path: path, promote: ice.DecimalTypeOf(int(dt.GetPrecision()), tt.Scale())})
		}
	}
	return nil
}

// newColumnType is the Iceberg type of a column added for an Arrow field: every nested field optional.
func newColumnType(f arrow.Field) (ice.Type, error) {
	f.Nullable = true
	sc, err := table.ArrowSchemaToIcebergWithFreshIDs(arrow.NewSchema([]arrow.Field{f}, nil), true)
	if err != nil {
		return nil, err
	}
	return optionalType(sc.Field(0).Type), nil
}

func optionalType(t ice.Type) ice.Type {
	switch tt := t.(type) {
	case *ice.StructType:
		fields := make([]ice.NestedField, len(tt.FieldList))
		for i, f := range tt.FieldList {
			f.Required = false
			f.Type = optionalType(f.Type)
			fields[i] = f
		}
		return &ice.StructType{FieldList: fields}
	case *ice.ListType:
		l := *tt
		l.ElementRequired = false
		l.Element = optionalType(l.Element)
		return &l
	case *ice.MapType:
		m := *tt
		m.ValueRequired = false
		m.ValueType = optionalType(m.ValueType)
		return &m
	}
	return t
}

// relax makes the required field at path optional (nulls arrived in it), unless it is a key. It reports whether
// the writer's table schema is now different from the one conf was built for, so that the caller retries.
func (w *Writer) relax(ctx context.Context, conf *conformer, path []string) (*conformer, bool, error) {
	plan := func(sc *ice.Schema) ([]schemaChange, error) {
		f, ok := sc.FindFieldByName(strings.Join(path, "."))
		if !ok || !f.Required || w.isKey(sc, path[0], f.ID) {
			return nil, nil
		}
		if top, ok := topField(sc, path[0]); ok && w.isKey(sc, path[0], top.ID) {
			return nil, nil
		}
		return []schemaChange{{path: path, relax: true}}, nil
	}
	if left, _ := plan(w.Table().Schema()); len(left) > 0 {
		if err := w.evolveSchema(ctx, plan); err != nil {
			return nil, false, err
		}
	}
	next := w.view.conformer()
	return next, next.target != conf.target, nil
}

// AddColumn adds the optional top-level column f to the table (its Iceberg type mapped from f.Type as schema
// evolution maps a new column), committed before it returns, so that the rows written before it read initial
// instead of null: Iceberg v3's initial-default, and the write-default, which fills the column in rows that
// lack it: those accepted before the call and still buffered, and those accepted after without the column (a
// source replaying changes from before the column existed). A source calls it before the first row that
// carries the column when the column has a value on the rows that existed (SQL's ADD COLUMN ... DEFAULT).
// initial nil adds the column without a default, as WithSchemaEvolution would. It works whether schema
// evolution is on or not, and commits like an evolution (a fenced writer changes nothing). A column the table
// already has is left as it is, whatever its default: a source resuming after a crash may call it again.
//
// initial is converted to the column's type (ice.Literal.To: an int32 literal for a long column is fine). The
// default is stored as iceberg-go stores defaults, as a JSON number for integers, dates, times and
// timestamps, which it reads back as a float64: a long or timestamp default beyond ±2^53 is refused rather
// than rounded. Decimals are stored as strings.
//
// Errors: a *ColumnError wrapping ErrTypeMismatch when f's type has no Iceberg mapping, or initial does not
// convert to the column's type, or the column is a list, map or struct (Iceberg has no default for those);
// ErrNotSupported when initial is set and the table's format version is below 3 (which has no initial-default:
// the rows written before would read null); ErrClosed once the writer is closed; the commit's error otherwise.
func (w *Writer) AddColumn(ctx context.Context, f arrow.Field, initial ice.Literal) error {
	if err := w.pipe.Usable(); err != nil {
		return err
	}
	typ, err := newColumnType(f)
	if err != nil {
		return columnErr(f.Name, ErrTypeMismatch, "cannot add a column of type %s: %v", f.Type, err)
	}
	var value any
	if initial != nil {
		if v := w.Table().Metadata().Version(); v < 3 {
			return columnErr(f.Name, ErrNotSupported, "table %v is format version %d: an initial default needs version 3", w.env.ident, v)
		}
		if value, err = defaultValue(typ, initial); err != nil {
			return columnErr(f.Name, ErrTypeMismatch, "default %s for a column of type %s: %v", initial, typ, err)
		}
	}
	plan := func(sc *ice.Schema) ([]schemaChange, error) {
		if _, ok := topField(sc, f.Name); ok {
			return nil, nil
		}
		return []schemaChange{{path: []string{f.Name}, add: typ, initial: value}}, nil
	}
	return w.evolveSchema(ctx, plan)
}

// maxExactDefault is the largest integer iceberg-go reads back exactly from a default's JSON number (float64).
const maxExactDefault = 1 << 53

// defaultValue is lit as the value of a default of a column of type typ, in the form iceberg-go both checks
// (UpdateSchema) and reads back from the table metadata (its scanner fills the default from that).
func defaultValue(typ ice.Type, lit ice.Literal) (any, error) {
	if _, ok := typ.(ice.PrimitiveType); !ok {
		return nil, errors.New("a nested column takes no default")
	}
	lit, err := lit.To(typ)
	if err != nil {
		return nil, err
	}
	exact := func(n int64) error {
		if n > maxExactDefault || n < -maxExactDefault {
			return fmt.Errorf("%d is beyond ±2^53, which iceberg-go's table metadata does not hold exactly", n)
		}
		return nil
	}
	switch v := lit.Any().(type) {
	case int64:
		return v, exact(v)
	case ice.Timestamp:
		if err := exact(int64(v)); err != nil {
			return nil, err
		}
		if _, tz := typ.(ice.TimestampTzType); tz {
			// iceberg-go's check takes a Timestamp value for a timestamp column only; a float64 passes
			// it, and is what its scanner reads back from the metadata anyway.
			return float64(v), nil
		}
		return v, nil
	case ice.Decimal:
		return v.Val.ToString(int32(v.Scale)), nil // iceberg-go reads a decimal default back from a string
	case ice.TimestampNano:
		return nil, errors.New("nanosecond timestamps take no default here")
	default:
		return v, nil
	}
}

// errEvolve wraps the failure of a schema change.
var errEvolve = conform.ErrEvolve

// evolveSchema commits the changes plan asks for, synchronously and before any data that needs them is encoded,
// in the commit queue (pipeline.enterQueue) so that no commit of this writer interleaves. It goes through the writer's transaction
// helper: every attempt reloads the table (another writer or tool may have made the change already) and plans
// again, so a retry commits only the changes still missing, and a fenced writer changes nothing. Errors are
// never classified by their text.
func (w *Writer) evolveSchema(ctx context.Context, plan func(*ice.Schema) ([]schemaChange, error)) error {
	defer w.pipe.EnterQueue()()
	changes, err := plan(w.Table().Schema())
	if err != nil || len(changes) == 0 {
		return err // the commit loop installed a table that has them
	}
	var buildErr error
	op := &commit.Op{
		What: "evolve schema", Kind: KindSchema, MaxAttempts: evolveAttempts,
		Build: func(_ context.Context, tbl *table.Table, _ int) (*table.Transaction, error) {
			tx, err := evolveTx(tbl, w.env.branch, plan, &changes)
			buildErr = err
			return tx, err
		},
	}
	res, err := w.commitTx(ctx, op)
	switch {
	case err != nil && err == buildErr:
		return err
	case err != nil:
		return fmt.Errorf("%w: %w", errEvolve, err)
	case res.How == commit.Committed:
		w.env.log.Info("iceberg: schema evolved", "table", w.env.ident, "writer", w.env.id, "changes", fmt.Sprint(changes))
	}
	return nil
}

// evolveTx stages the changes plan finds missing from tbl's schema (nil: none), and sets changes to them.
func evolveTx(tbl *table.Table, branch string, plan func(*ice.Schema) ([]schemaChange, error), changes *[]schemaChange) (*table.Transaction, error) {
	var err error
	if *changes, err = plan(tbl.Schema()); err != nil || len(*changes) == 0 {
		return nil, err
	}
	tx := tbl.NewTransactionOnBranch(branch)
	us := tx.UpdateSchema(true, false)
	for _, c := range *changes {
		switch {
		case c.add != nil && c.initial != nil:
			// UnionByNameWith, not AddColumn: AddColumn wants a literal of the column's exact type, which
			// iceberg-go has none of for timestamptz or a decimal of precision other than 9.
			us.UnionByNameWith(ice.NewSchema(0, ice.NestedField{Name: c.path[0], Type: c.add,
				InitialDefault: c.initial, WriteDefault: c.initial}))
		case c.add != nil:
			us.AddColumn(c.path, c.add, "", false, nil)
		case c.promote != nil:
			us.UpdateColumn(c.path, table.ColumnUpdate{FieldType: ice.Optional[ice.Type]{Valid: true, Val: c.promote}})
		case c.relax:
			us.UpdateColumn(c.path, table.ColumnUpdate{Required: ice.Optional[bool]{Valid: true, Val: false}})
		}
	}
	if err := us.Commit(); err != nil {
		return nil, fmt.Errorf("%w: %v: %w", errEvolve, *changes, err)
	}
	return tx, nil
}

// install makes tbl the table the writer and its committer work from.
func (w *Writer) install(tbl *table.Table) error {
	if err := w.view.set(tbl); err != nil {
		return err
	}
	w.runs.installed(tbl)
	return nil
}
