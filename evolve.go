package iceberg

import (
	"context"
	"fmt"
	"maps"

	"github.com/apache/arrow-go/v18/arrow"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/icewriter/iceberg/internal/commit"
	"github.com/icewriter/iceberg/internal/conform"
	"github.com/icewriter/iceberg/internal/conform/evolve"
)

// WithSchemaEvolution lets Write, Upsert, WriteStructs and UpsertStructs change the table's schema to take their
// rows: a column (or nested struct field) the table lacks is added as an optional column; a column whose type
// is narrower than the batch's is promoted as the Iceberg spec allows (int to long, float to double, decimal
// precision widening); a required column that receives nulls becomes optional, unless it is a key column. On a
// format version 3 table a variant column is added as variant and a nanosecond timestamp as timestamp_ns
// (timestamptz_ns with a UTC zone); below version 3 a nanosecond timestamp is added as a microsecond one (a
// value that is not a whole microsecond is then refused, as in any microsecond column: a *ColumnError) and a
// variant column is refused (a *ColumnError wrapping ErrNotSupported). An added column gets no default unless
// WithColumnDefaults names it.
//
// The schema change is committed before the rows that need it are accepted, so every data file carries field
// ids the table has; a change made by another writer or tool is picked up at the next batch that needs it.
// Default: off, and a column the table lacks is a *ColumnError wrapping ErrUnknownColumn.
func WithSchemaEvolution() Option { return func(o *options) { o.schema.evolve = true } }

// WithColumnDefaults gives the columns and nested fields that schema evolution (WithSchemaEvolution) adds a
// default. A key is a column's path: its name at the top level, names joined by dots for a field inside
// structs ("address.country"), as *ColumnError names columns. When a batch brings the field at that path and
// the table lacks it, the field is added with defaults[path] as its initial-default, which rows written before
// read, and its write-default, which fills the field in rows written without it (a struct without the field).
// A struct added whole carries the defaults of its fields; the struct itself has none, so rows written before
// it existed read it as null. Defaults need format version 3: NewWriter refuses them on an older table with a
// *ColumnError wrapping ErrNotSupported. A default the added field's type cannot hold (it converts as
// AddColumn converts initial; a list, map, struct, variant or nanosecond timestamp takes none) fails the call
// that brought the field with a *ColumnError naming its path wrapping ErrTypeMismatch, and nothing is added;
// so does a default for a field inside a list or map, wrapping ErrNotSupported. A column or field the table
// has already keeps its defaults. Default: none.
func WithColumnDefaults(defaults map[string]ice.Literal) Option {
	return func(o *options) { o.schema.defaults = maps.Clone(defaults) }
}

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

// evolveFor makes the table's schema able to take a batch of schema in (adding columns, widening types) when
// schema evolution is on, and returns the conformer for the resulting table schema.
//
// A schema already seen against the current table schema costs a map lookup or two (evolve.Seen).
func (w *Writer) evolveFor(ctx context.Context, in *arrow.Schema) (*conformer, error) {
	target := w.view.conformer().target
	conf, fp, ok := w.view.evo.Lookup(in, target)
	if ok {
		return conf, nil
	}
	opts := evolve.Options{Keys: w.keys.names(), Version: w.Table().Metadata().Version(), Defaults: w.view.defaults}
	plan := func(sc *ice.Schema) ([]evolve.Change, error) { return evolve.For(in, sc, opts) }
	changes, err := plan(w.Table().Schema())
	if err != nil {
		return nil, err
	}
	if len(changes) > 0 {
		if err := w.evolveSchema(ctx, plan); err != nil {
			return nil, err
		}
	}
	conf = w.view.conformer()
	// Remember only what fits the table as it is now: a concurrent change simply misses the cache next time.
	if left, err := plan(w.Table().Schema()); err == nil && len(left) == 0 {
		w.view.evo.Remember(in, fp, conf.target, conf)
	}
	return conf, nil
}

// relax makes the required field at path optional (nulls arrived in it), unless it is a key. It reports whether
// the writer's table schema is now different from the one conf was built for, so that the caller retries.
func (w *Writer) relax(ctx context.Context, conf *conformer, path []string) (*conformer, bool, error) {
	plan := func(sc *ice.Schema) ([]evolve.Change, error) { return evolve.Relax(sc, path, w.keys.names()), nil }
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
// than rounded. Decimals are stored as strings. (The spec's JSON form of a date, time or timestamp default is
// an ISO-8601 string; a reader that insists on it, as Java's SingleValueParser does, may refuse the number.)
// A timestamp_ns or timestamptz_ns column takes no default: iceberg-go v0.7.0 writes it as a JSON number of
// nanoseconds and reads it back through a float64, exact only within about 104 days of 1970 (details at
// internal/conform/evolve's errNanosDefault); add the column without one, or as a microsecond timestamp.
//
// Errors: a *ColumnError wrapping ErrTypeMismatch when f's type has no Iceberg mapping, or initial does not
// convert to the column's type (or is out of its range), or the column is a list, map, struct or variant
// (Iceberg has no default for those) or a nanosecond timestamp; a *ColumnError wrapping ErrNotSupported when the table's format version
// is below 3 and initial is set (no initial-default there: the rows written before would read null) or f is a
// variant (a nanosecond timestamp becomes a microsecond one there); ErrClosed once the writer is closed; the
// commit's error otherwise.
func (w *Writer) AddColumn(ctx context.Context, f arrow.Field, initial ice.Literal) error {
	if err := w.pipe.Usable(); err != nil {
		return err
	}
	version := w.Table().Metadata().Version()
	typ, err := evolve.ColumnType(f, version)
	if err != nil {
		return columnErr(f.Name, ErrTypeMismatch, "cannot add a column of type %s: %v", f.Type, err)
	}
	if err := evolve.CheckVersion(f.Name, typ, version); err != nil {
		return err
	}
	var value any
	if initial != nil {
		if version < 3 {
			return columnErr(f.Name, ErrNotSupported, "table %v is format version %d: an initial default needs version 3", w.env.ident, version)
		}
		if value, err = evolve.DefaultValue(typ, initial); err != nil {
			return columnErr(f.Name, ErrTypeMismatch, "default %s for a column of type %s: %v", initial, typ, err)
		}
	}
	plan := func(sc *ice.Schema) ([]evolve.Change, error) {
		if _, ok := evolve.TopField(sc, f.Name); ok {
			return nil, nil
		}
		return []evolve.Change{{Path: []string{f.Name}, Add: typ, Initial: value}}, nil
	}
	return w.evolveSchema(ctx, plan)
}

// errEvolve wraps the failure of a schema change.
var errEvolve = conform.ErrEvolve

// evolveSchema commits the changes plan asks for, synchronously and before any data that needs them is encoded,
// in the commit queue (pipeline.enterQueue) so that no commit of this writer interleaves. It goes through the writer's transaction
// helper: every attempt reloads the table (another writer or tool may have made the change already) and plans
// again, so a retry commits only the changes still missing, and a fenced writer changes nothing. Errors are
// never classified by their text.
func (w *Writer) evolveSchema(ctx context.Context, plan evolve.Plan) error {
	defer w.pipe.EnterQueue()()
	changes, err := plan(w.Table().Schema())
	if err != nil || len(changes) == 0 {
		return err // the commit loop installed a table that has them
	}
	var buildErr error
	op := &commit.Op{
		What: "evolve schema", Kind: KindSchema, MaxAttempts: evolveAttempts,
		Build: func(_ context.Context, tbl *table.Table, _ int) (*table.Transaction, error) {
			tx, err := evolve.Tx(tbl, w.env.branch, plan, &changes)
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

// install makes tbl the table the writer and its committer work from.
func (w *Writer) install(tbl *table.Table) error {
	if err := w.view.set(tbl); err != nil {
		return err
	}
	w.runs.installed(tbl)
	return nil
}
