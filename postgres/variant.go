package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/shred"
)

// jsonPolicy decides, per Iceberg table, where json and jsonb columns go: a column the table already has keeps
// its type (a string column made before variant mapping stays one), a new one is a variant on a format v3
// table and a string below (v2 has no variant). A table that does not exist yet has the format version Run
// creates it with (Config.CreateOptions). What it learns of a table is kept for the Run attempt: the columns
// it adds are the ones it decided.
type jsonPolicy struct {
	cat     catalog.Catalog
	version int // of the tables Run creates

	mu     sync.Mutex
	tables map[string]jsonTable // by identString
}

// jsonTable is what jsonPolicy knows of one Iceberg table.
type jsonTable struct {
	version int
	variant map[string]bool // the table's columns: whether each is a variant
}

func newJSONPolicy(cat catalog.Catalog, create []iceberg.CreateOption) *jsonPolicy {
	return &jsonPolicy{cat: cat, version: iceberg.CreateFormatVersion(create...), tables: map[string]jsonTable{}}
}

// variant reports whether the json or jsonb column named column of the Iceberg table ident is a variant.
func (p *jsonPolicy) variant(ctx context.Context, ident table.Identifier, column string) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := identString(ident)
	t, ok := p.tables[key]
	if !ok {
		t = jsonTable{version: p.version}
		tbl, err := p.cat.LoadTable(ctx, ident)
		switch {
		case errors.Is(err, catalog.ErrNoSuchTable):
		case err != nil:
			return false, fmt.Errorf("postgres: loading the Iceberg table %v: %w", ident, err)
		default:
			t.version = tbl.Metadata().Version()
			t.variant = map[string]bool{}
			for _, f := range tbl.Schema().Fields() {
				_, t.variant[f.Name] = f.Type.(ice.VariantType)
			}
		}
		p.tables[key] = t
	}
	if isVariant, exists := t.variant[column]; exists {
		return isVariant, nil
	}
	return t.version >= 3, nil
}

// variantColType is the mapping of a json (oidJSON) or jsonb (oidJSONB) column to a variant.
func variantColType(oid uint32) colType {
	ct := colType{arrow: extensions.NewDefaultVariantType(), append: appendJSONVariant, json: oid}
	if oid == oidJSONB {
		ct.append = appendJSONBVariant
	}
	return ct
}

// variantJSON are the rules of a json or jsonb value put into a variant: a key given twice keeps its last value,
// as Postgres's json functions and jsonb do; a number no variant holds exactly (jsonb keeps numerics of any
// precision) stops the source rather than be rounded.
var variantJSON = shred.VariantJSONOptions{LastKeyWins: true, ExactNumbers: true}

// appendJSONVariant appends a json value (binary format: its text) as a variant.
func appendJSONVariant(b array.Builder, v []byte) error {
	// Postgres checked the JSON: what is left is a number no variant holds exactly (1e400, 42 digits) or more
	// than 1000 levels of nesting.
	if err := shred.AppendVariantJSONWithOptions(b.(*extensions.VariantBuilder), v, variantJSON); err != nil {
		return fmt.Errorf("%w: %w: %s", ErrOutOfRange, err, fixValue)
	}
	return nil
}

// appendJSONBVariant appends a jsonb value (binary format: a version byte, then its text) as a variant.
func appendJSONBVariant(b array.Builder, v []byte) error {
	text, err := jsonbText(v)
	if err != nil {
		return err
	}
	return appendJSONVariant(b, text)
}
