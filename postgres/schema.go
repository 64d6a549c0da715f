package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/jackc/pgx/v5"

	"github.com/icewriter/iceberg"
)

// ErrNoPrimaryKey is wrapped by the error for what a table without a primary key cannot take. Such a table is
// append-only: copied, then its inserts appended (no identifier fields); an update, a delete or a truncate of
// it in the stream stops the pipeline with this error naming the table, and so does resuming its interrupted
// snapshot (a fresh snapshot's rows cannot be matched to those already copied without a key).
var ErrNoPrimaryKey = errors.New("postgres: table has no primary key")

// ErrAddedColumnDefault is wrapped by the error for a column added to a copied table with a default (ALTER
// TABLE ... ADD COLUMN c ... DEFAULT v) that the Iceberg table cannot show on the rows that existed. Postgres
// shows a constant v on those rows (pg_attribute.atthasmissing), but no change in the stream carries it: on a
// format v3 table Run adds the column with v as its initial-default, so they read v; on v2 (no
// initial-default) they would read NULL, so Run stops. A volatile default (clock_timestamp(), a serial) or an
// identity column fills the rows by rewriting the table, which the stream does not carry either: refused on
// every version (so is a column added without a default and given one before its first change, which Postgres
// does not tell apart from those). Run stops, naming the table and column, before the column reaches the
// Iceberg table; copy the table again (drop its Iceberg table and run again), or add such columns without a
// default, then UPDATE the rows and SET DEFAULT.
var ErrAddedColumnDefault = errors.New("postgres: column added with a default the existing rows do not carry in the stream")

// column is one source column and its mapping.
type column struct {
	name    string
	oid     uint32
	typmod  int32
	notNull bool
	typ     colType
}

// tableInfo is one source table: its columns (in attribute order), primary key and target identifier.
type tableInfo struct {
	oid       uint32
	schema    string
	name      string
	replIdent byte // pg_class.relreplident: 'd' default, 'f' full, 'i' index, 'n' nothing
	// partitioned is a partitioned table (declarative partitioning, relkind p): one Iceberg table holds its
	// partitions' rows, copied through the root, and the publication sends their changes as the root's
	// (publish_via_partition_root). leaves are its leaf partitions, quoted, with their replica identity.
	partitioned bool
	leaves      []leaf
	cols        []column
	key         []string
	ident       table.Identifier
	arrow       *arrow.Schema // the table's Arrow schema (NOT NULL columns required)
}

// leaf is a leaf partition of a partitioned table.
type leaf struct {
	qualified string
	replIdent byte
}

// qualified is the table's quoted name for SQL.
func (t *tableInfo) qualified() string {
	return pgx.Identifier{t.schema, t.name}.Sanitize()
}

// String names the table as schema.name.
func (t *tableInfo) String() string { return t.schema + "." + t.name }

// tableSchema builds the Arrow schema of cols (NOT NULL columns required).
func tableSchema(cols []column) *arrow.Schema {
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fields[i] = arrow.Field{Name: c.name, Type: c.typ.arrow, Nullable: !c.notNull}
	}
	return arrow.NewSchema(fields, nil)
}

// querier is what the catalog queries need of a connection.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// catalogLookup looks types up in pg_type, caching them; safe for concurrent use.
type catalogLookup struct {
	mu    sync.Mutex
	q     querier
	cache map[uint32]pgType
}

func (c *catalogLookup) lookup(ctx context.Context, oid uint32) (pgType, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.cache[oid]; ok {
		return t, nil
	}
	t := pgType{OID: oid}
	var kind, cat string
	err := c.q.QueryRow(ctx, `SELECT typname::text, typtype::text, typcategory::text, typelem, typbasetype, typtypmod
		FROM pg_type WHERE oid = $1`, oid).Scan(&t.Name, &kind, &cat, &t.Elem, &t.Base, &t.BaseMod)
	if err != nil {
		return pgType{}, fmt.Errorf("postgres: type oid %d: %w", oid, err)
	}
	t.Kind, t.Category = kind[0], cat[0]
	c.cache[oid] = t
	return t, nil
}

// discover reads the tables' columns and primary keys from the catalog and maps every column. names are
// "schema.table" or "table" (schema public); none means every ordinary table outside the system schemas. Any
// column without a mapping, or a table without a primary key, is an error naming the table (and column).
func discover(ctx context.Context, q querier, m *typeMapper, names []string, namespace []string) ([]*tableInfo, error) {
	rows, err := q.Query(ctx, `SELECT c.oid, n.nspname::text, c.relname::text, c.relreplident::text, c.relkind = 'p',
		  COALESCE((SELECT pn.nspname || '.' || pc.relname FROM pg_inherits i JOIN pg_class pc ON pc.oid = i.inhparent
		    JOIN pg_namespace pn ON pn.oid = pc.relnamespace WHERE i.inhrelid = c.oid AND c.relispartition), '')
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
		  AND n.nspname NOT LIKE 'pg\_toast%' AND n.nspname NOT LIKE 'pg\_temp%'
		ORDER BY 2, 3`)
	if err != nil {
		return nil, fmt.Errorf("postgres: listing tables: %w", err)
	}
	var all []*tableInfo
	parentOf := map[*tableInfo]string{} // partitions: their parent, schema.name
	for rows.Next() {
		t := &tableInfo{}
		var ri, parent string
		if err := rows.Scan(&t.oid, &t.schema, &t.name, &ri, &t.partitioned, &parent); err != nil {
			return nil, err
		}
		t.replIdent = ri[0]
		if parent != "" {
			parentOf[t] = parent
		}
		all = append(all, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: listing tables: %w", err)
	}
	var picked []*tableInfo
	if len(names) == 0 {
		for _, t := range all {
			if _, part := parentOf[t]; !part { // a partition's rows go with its partitioned table
				picked = append(picked, t)
			}
		}
	} else {
		for _, n := range names {
			schema, name, ok := strings.Cut(n, ".")
			if !ok {
				schema, name = "public", n
			}
			var found *tableInfo
			for _, t := range all {
				if t.schema == schema && t.name == name {
					found = t
				}
			}
			if found == nil {
				return nil, fmt.Errorf("postgres: table %s.%s not found", schema, name)
			}
			if parent, part := parentOf[found]; part {
				return nil, fmt.Errorf("postgres: table %s is a partition of %s: list the partitioned table (its partitions' rows go to one Iceberg table)",
					found, parent)
			}
			picked = append(picked, found)
		}
	}
	for _, t := range picked {
		ns := namespace
		if len(ns) == 0 {
			ns = []string{t.schema}
		}
		t.ident = append(append(table.Identifier{}, ns...), t.name)
		if err := describe(ctx, q, m, t); err != nil {
			return nil, err
		}
	}
	return picked, nil
}

// describe reads a table's columns (generated ones excluded: pgoutput does not send them) and primary key.
func describe(ctx context.Context, q querier, m *typeMapper, t *tableInfo) error {
	rows, err := q.Query(ctx, `SELECT attname::text, atttypid, atttypmod, attnotnull FROM pg_attribute
		WHERE attrelid = $1 AND attnum > 0 AND NOT attisdropped AND attgenerated = '' ORDER BY attnum`, t.oid)
	if err != nil {
		return fmt.Errorf("postgres: columns of %s: %w", t, err)
	}
	t.cols = t.cols[:0]
	for rows.Next() {
		var c column
		if err := rows.Scan(&c.name, &c.oid, &c.typmod, &c.notNull); err != nil {
			return err
		}
		t.cols = append(t.cols, c)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("postgres: columns of %s: %w", t, err)
	}
	for i := range t.cols {
		c := &t.cols[i]
		if c.typ, err = m.mapColumn(ctx, t.ident, c.name, c.oid, c.typmod); err != nil {
			return fmt.Errorf("postgres: table %s column %q: %w", t, c.name, err)
		}
	}
	rows, err = q.Query(ctx, `SELECT a.attname::text FROM pg_index i
		JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
		WHERE i.indrelid = $1 AND i.indisprimary ORDER BY array_position(i.indkey::int2[], a.attnum)`, t.oid)
	if err != nil {
		return fmt.Errorf("postgres: primary key of %s: %w", t, err)
	}
	t.key, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("postgres: primary key of %s: %w", t, err)
	}
	t.arrow = tableSchema(t.cols)
	if t.partitioned {
		rows, err = q.Query(ctx, `SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname), c.relreplident::text
			FROM pg_partition_tree($1::oid::regclass) p JOIN pg_class c ON c.oid = p.relid
			JOIN pg_namespace n ON n.oid = c.relnamespace WHERE p.isleaf ORDER BY 1`, t.oid)
		if err != nil {
			return fmt.Errorf("postgres: partitions of %s: %w", t, err)
		}
		t.leaves = t.leaves[:0]
		for rows.Next() {
			var l leaf
			var ri string
			if err := rows.Scan(&l.qualified, &ri); err != nil {
				return err
			}
			l.replIdent = ri[0]
			t.leaves = append(t.leaves, l)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("postgres: partitions of %s: %w", t, err)
		}
	}
	return nil
}

// addColumns adds to t's Iceberg table, through its writer w, the columns of cols that the table lacks and
// that Postgres shows on the rows that existed with a value of their own, before any row carrying them is
// written. A column added with a constant default (pg_attribute.atthasmissing: Postgres keeps the value in
// attmissingval and shows it on the older rows without rewriting them) is added with that value as its
// initial-default on a format v3 table (Writer.AddColumn), so those rows read it. On v2, a default of a list
// or variant column (json/jsonb on v3: the spec gives variants no default but null), or a column added with a
// volatile default or as an identity (Postgres rewrote the rows, which the stream does not carry), it stops
// with ErrAddedColumnDefault. Other columns are left to schema evolution.
func addColumns(ctx context.Context, q querier, t *tableInfo, w *iceberg.Writer, cols []column) error {
	sc := w.Table().Schema()
	var added []string
	for _, c := range cols {
		if _, ok := sc.FindFieldByName(c.name); !ok {
			added = append(added, c.name)
		}
	}
	if len(added) == 0 {
		return nil
	}
	rows, err := q.Query(ctx, `SELECT attname::text, atthasmissing, format_type(atttypid, atttypmod), attmissingval::text
		FROM pg_attribute WHERE attrelid = $1 AND attname = ANY($2) AND NOT attisdropped
		AND (atthasmissing OR atthasdef OR attidentity <> '') ORDER BY attnum`, t.oid, added)
	if err != nil {
		return fmt.Errorf("postgres: columns of %s: %w", t, err)
	}
	type withDefault struct {
		name, typ string
		missing   bool
		value     *string
	}
	found, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (withDefault, error) {
		var d withDefault
		return d, r.Scan(&d.name, &d.missing, &d.typ, &d.value)
	})
	if err != nil {
		return fmt.Errorf("postgres: columns of %s: %w", t, err)
	}
	version := w.Table().Metadata().Version()
	for _, d := range found {
		refuse := func(why string) error {
			return fmt.Errorf("%w: table %s column %q: %s: "+
				"drop the Iceberg table %v and run again to copy the table anew, or add the column without a default and UPDATE the rows",
				ErrAddedColumnDefault, t, d.name, why, t.ident)
		}
		switch {
		case !d.missing || d.value == nil:
			return refuse("Postgres filled the rows that existed by rewriting the table (a volatile default or an identity), which the stream does not carry")
		case version < 3:
			return refuse(fmt.Sprintf("Postgres shows its default on the rows that existed, Iceberg format version %d would read NULL there (version 3 keeps the default)", version))
		}
		c := cols[slices.IndexFunc(cols, func(c column) bool { return c.name == d.name })]
		lit, err := missingValue(ctx, q, c, d.typ, *d.value)
		if err != nil {
			return refuse(fmt.Sprintf("its default %s for the rows that existed: %v", *d.value, err))
		}
		f := arrow.Field{Name: c.name, Type: c.typ.arrow, Nullable: true}
		if err := w.AddColumn(ctx, f, lit); err != nil {
			return fmt.Errorf("postgres: table %s column %q with the default %s of the rows that existed: %w", t, c.name, lit, err)
		}
	}
	return nil
}

// missingValue is a column's attmissingval (text, a one-element array such as {7}) as an Iceberg literal: Postgres
// casts it to the column's type (typ, format_type) and sends it in binary, which the column's own decoder reads.
func missingValue(ctx context.Context, q querier, c column, typ, text string) (ice.Literal, error) {
	if _, list := c.typ.arrow.(*arrow.ListType); list {
		return nil, errors.New("a list column takes no default in Iceberg")
	}
	if _, variant := c.typ.arrow.(*extensions.VariantType); variant {
		return nil, errors.New("a variant column takes no default but null in Iceberg")
	}
	rows, err := q.Query(ctx, "SELECT ($1::text::"+typ+"[])[1]", pgx.QueryResultFormats{pgx.BinaryFormatCode}, text)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	b := array.NewBuilder(memory.DefaultAllocator, c.typ.arrow)
	defer b.Release()
	for rows.Next() {
		v := rows.RawValues()[0]
		if v == nil {
			return nil, errors.New("the value is NULL")
		}
		if err := c.typ.append(b, v); err != nil {
			return nil, err
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	a := b.NewArray()
	defer a.Release()
	if a.Len() != 1 {
		return nil, errors.New("no value")
	}
	switch a := a.(type) {
	case *array.Boolean:
		return ice.NewLiteral(a.Value(0)), nil
	case *array.Int32:
		return ice.NewLiteral(a.Value(0)), nil
	case *array.Int64:
		return ice.NewLiteral(a.Value(0)), nil
	case *array.Float32:
		return ice.NewLiteral(a.Value(0)), nil
	case *array.Float64:
		return ice.NewLiteral(a.Value(0)), nil
	case *array.String:
		return ice.NewLiteral(a.Value(0)), nil
	case *array.Binary:
		return ice.NewLiteral(slices.Clone(a.Value(0))), nil
	case *array.Date32:
		return ice.NewLiteral(ice.Date(a.Value(0))), nil
	case *array.Time64:
		return ice.NewLiteral(ice.Time(a.Value(0))), nil
	case *array.Timestamp:
		return ice.NewLiteral(ice.Timestamp(a.Value(0))), nil
	case *array.Decimal128:
		return ice.NewLiteral(ice.Decimal{Val: a.Value(0), Scale: int(a.DataType().(*arrow.Decimal128Type).Scale)}), nil
	case *extensions.UUIDArray:
		return ice.NewLiteral(a.Value(0)), nil
	}
	return nil, fmt.Errorf("no Iceberg default for type %s", a.DataType())
}
