package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go/table"
	"github.com/jackc/pgx/v5"
)

// ErrNoPrimaryKey is wrapped by the error for what a table without a primary key cannot take. Such a table is
// append-only: copied, then its inserts appended (no identifier fields); an update, a delete or a truncate of
// it in the stream stops the pipeline with this error naming the table, and so does resuming its interrupted
// snapshot (a fresh snapshot's rows cannot be matched to those already copied without a key).
var ErrNoPrimaryKey = errors.New("postgres: table has no primary key")

// ErrAddedColumnDefault is wrapped by the error for a column added to a copied table with a default (ALTER
// TABLE ... ADD COLUMN c ... DEFAULT v): Postgres shows v on the rows that existed before
// (pg_attribute.atthasmissing), but no change in the stream carries it, so the Iceberg table would read NULL
// there. A volatile default (clock_timestamp(), a serial) or an identity column fills the rows by rewriting
// the table, which the stream does not carry either: any column that has a default or is an identity when it
// first reaches the Iceberg table is refused (a column added without one, given a default before its first
// change, is refused too). Run stops, naming the table and column, before the column reaches the Iceberg
// table; copy the table again (drop its Iceberg table and run again), or add such columns without a default,
// then UPDATE the rows and SET DEFAULT. On every format version: Iceberg v3's initial-default is not used.
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
		if err := describe(ctx, q, m, t); err != nil {
			return nil, err
		}
		ns := namespace
		if len(ns) == 0 {
			ns = []string{t.schema}
		}
		t.ident = append(append(table.Identifier{}, ns...), t.name)
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
		if c.typ, err = m.mapType(ctx, c.oid, c.typmod); err != nil {
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

// checkAdded refuses the columns of t that the Iceberg table tbl lacks and that Postgres shows on existing rows
// with a value of their own (added with a default or as an identity), see ErrAddedColumnDefault.
func checkAdded(ctx context.Context, q querier, t *tableInfo, tbl *table.Table, names []string) error {
	var added []string
	for _, n := range names {
		if _, ok := tbl.Schema().FindFieldByName(n); !ok {
			added = append(added, n)
		}
	}
	if len(added) == 0 {
		return nil
	}
	rows, err := q.Query(ctx, `SELECT attname::text FROM pg_attribute WHERE attrelid = $1 AND attname = ANY($2)
		AND NOT attisdropped AND (atthasmissing OR atthasdef OR attidentity <> '') ORDER BY attnum`, t.oid, added)
	if err != nil {
		return fmt.Errorf("postgres: columns of %s: %w", t, err)
	}
	withDefault, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("postgres: columns of %s: %w", t, err)
	}
	if len(withDefault) > 0 {
		return fmt.Errorf("%w: table %s column %q: Postgres shows its default on the rows that existed before, Iceberg would read NULL: "+
			"drop the Iceberg table %v and run again to copy the table anew, or add the column without a default and UPDATE the rows",
			ErrAddedColumnDefault, t, withDefault[0], t.ident)
	}
	return nil
}
