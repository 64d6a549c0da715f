// Package sqltx commits changes to several tables of iceberg-go's SQL catalog in one database transaction: the
// multi-table commit (catalog.TransactionalCatalog) that iceberg-go's SQL catalog lacks. Its CommitTable runs a
// transaction of its own on a database handle it keeps private, so a caller cannot put two tables' commits in one;
// the catalog packages of this module own that handle (they opened it), and commit through it here.
//
// Each table's new metadata is staged as iceberg-go's CommitTable stages it (requirements validated on the
// current metadata, updates applied, the next metadata file written beside the current one), then one database
// transaction moves every table's metadata pointer with the same compare-and-swap CommitTable uses (the row must
// still point at the metadata the commit was built on): all tables move, or none does and the call returns an
// error wrapping table.ErrCommitFailed. Metadata files of a commit that did not apply are deleted.
package sqltx

import (
	"compress/gzip"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"

	icecatalog "github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/klauspost/compress/zstd"
)

// staged is one table's commit, staged: the metadata location it was built on and the one it moves to.
type staged struct {
	ident    table.Identifier
	from, to string
	fs       icebergio.WriteFileIO
}

// Commit applies commits atomically through cat (for loading and naming) and db (the handle cat was opened
// on). Postgres takes $n placeholders, SQLite and MySQL ?.
func Commit(ctx context.Context, cat *sqlcat.Catalog, db *sql.DB, dialect sqlcat.SupportedDialect, commits []table.TableCommit) (err error) {
	if len(commits) == 0 {
		return icecatalog.ErrEmptyCommitList
	}
	seen := map[string]bool{}
	var done []staged
	defer func() {
		if err != nil {
			for _, s := range done {
				_ = s.fs.Remove(s.to) // never referenced: the pointers did not move
			}
		}
	}()
	for _, c := range commits {
		key := strings.Join(c.Identifier, "\x00")
		if seen[key] {
			return fmt.Errorf("sqltx: table %v twice in one transaction", c.Identifier)
		}
		seen[key] = true
		if len(c.Updates) == 0 {
			continue
		}
		s, err := stage(ctx, cat, c)
		if err != nil {
			return err
		}
		if s != nil {
			done = append(done, *s)
		}
	}
	if len(done) == 0 {
		return nil
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqltx: begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	q := "UPDATE iceberg_tables SET metadata_location = ?, previous_metadata_location = ? " +
		"WHERE catalog_name = ? AND table_name = ? AND metadata_location = ?"
	if dialect == sqlcat.Postgres {
		for i := 1; strings.Contains(q, "?"); i++ {
			q = strings.Replace(q, "?", "$"+strconv.Itoa(i), 1)
		}
	}
	for _, s := range done {
		res, err := tx.ExecContext(ctx, q, s.to, s.from, cat.Name(), icecatalog.TableNameFromIdent(s.ident), s.from)
		if err != nil {
			return fmt.Errorf("sqltx: update table %v: %w", s.ident, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("sqltx: update table %v: %w", s.ident, err)
		}
		if n != 1 {
			return fmt.Errorf("%w: table %v: metadata location moved underneath us", table.ErrCommitFailed, s.ident)
		}
	}
	if err := tx.Commit(); err != nil {
		// A failed COMMIT may still have applied (the reply lost): keep the metadata files, which the caller's
		// reload may find referenced.
		done = nil
		return fmt.Errorf("sqltx: commit: %w", err)
	}
	return nil
}

// stage validates a table's requirements on its current metadata, applies the updates and writes the next
// metadata file. It returns nil when the updates change nothing.
func stage(ctx context.Context, cat *sqlcat.Catalog, c table.TableCommit) (*staged, error) {
	cur, err := cat.LoadTable(ctx, c.Identifier)
	if err != nil {
		return nil, err
	}
	for _, r := range c.Requirements {
		if err := r.Validate(cur.Metadata()); err != nil {
			return nil, fmt.Errorf("%w: table %v: %w", table.ErrCommitFailed, c.Identifier, err)
		}
	}
	next, err := table.UpdateTableMetadata(cur.Metadata(), c.Updates, cur.MetadataLocation())
	if err != nil {
		return nil, fmt.Errorf("sqltx: table %v: %w", c.Identifier, err)
	}
	if next.Equals(cur.Metadata()) {
		return nil, nil
	}
	version := metadataVersion(cur.MetadataLocation())
	if version < 0 {
		return nil, fmt.Errorf("sqltx: table %v: invalid metadata location %s", c.Identifier, cur.MetadataLocation())
	}
	prov, err := table.LoadLocationProvider(next.Location(), next.Properties())
	if err != nil {
		return nil, err
	}
	loc, err := prov.NewTableMetadataFileLocation(version + 1)
	if err != nil {
		return nil, err
	}
	fsys, err := cur.FS(ctx)
	if err != nil {
		return nil, err
	}
	wfs, ok := fsys.(icebergio.WriteFileIO)
	if !ok {
		return nil, fmt.Errorf("sqltx: table %v: file system does not support writing", c.Identifier)
	}
	codec := next.Properties().Get(table.MetadataCompressionKey, table.MetadataCompressionDefault)
	if err := writeMetadata(next, wfs, loc, codec); err != nil {
		return nil, fmt.Errorf("sqltx: table %v: write metadata: %w", c.Identifier, err)
	}
	return &staged{ident: c.Identifier, from: cur.MetadataLocation(), to: loc, fs: wfs}, nil
}

// writeMetadata writes a metadata file as iceberg-go's catalogs write it (JSON, compressed by the table's
// write.metadata.compression-codec).
func writeMetadata(meta table.Metadata, fs icebergio.WriteFileIO, loc, codec string) (err error) {
	out, err := fs.Create(loc)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, out.Close()) }()
	var w io.Writer = out
	switch codec {
	case table.MetadataCompressionCodecNone:
	case table.MetadataCompressionCodecGzip:
		gz := gzip.NewWriter(out)
		defer func() { err = errors.Join(err, gz.Close()) }()
		w = gz
	case table.MetadataCompressionCodecZstd:
		enc, err := zstd.NewWriter(out)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, enc.Close()) }()
		w = enc
	default:
		return fmt.Errorf("unsupported metadata compression codec %q", codec)
	}
	return json.NewEncoder(w).Encode(meta)
}

// metadataVersion parses the version of a metadata file name (00012-<uuid>.metadata.json, or the legacy
// v12.metadata.json), -1 when it has none.
func metadataVersion(loc string) int {
	name := path.Base(loc)
	digits := strings.TrimPrefix(name, "v")
	end := strings.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' })
	if end <= 0 {
		return -1
	}
	v, err := strconv.Atoi(digits[:end])
	if err != nil {
		return -1
	}
	return v
}
