package iceberg

import (
	"context"
	"fmt"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/icewriter/iceberg/internal/commit"
	"github.com/icewriter/iceberg/internal/redact"
)

// Source positions.
//
// A connector records a position per source partition (a Kafka topic-partition's offset, a replication slot's
// LSN, a Kinesis shard's sequence number): any string key, any string value. Positions commit atomically with
// the rows they cover (Run.Positions) and belong to the table, not to a writer ID: a partition's new owner reads
// where the old one stopped (Positions), whichever writer committed it.
//
// Where they live. The merged map of every position on the table (all writer IDs, the newest value per
// partition) is one side file, gzipped JSON in the one blob of a Puffin file, under the table's metadata
// location (icewriter-positions-<uuid>.puffin, written through the table's FileIO; stores that take only the
// Iceberg layout in a table's folder refuse other names; older .json.gz side files are still read). A commit
// that changes positions writes a new file holding the whole merged map and names it in its snapshot's summary (icewriter.positions);
// snapshots that change no position name none. So table metadata grows per positions commit by one path, never
// by the partitions: 10,000 partitions cost it what one does (bench_positions_test.go). The same transaction
// sets the table property icewriter.positions.<branch> to the file, its snapshot id and sequence number: a
// mirror that survives snapshot expiry. Summaries were not used for the positions themselves because Iceberg
// keeps every retained snapshot's summary in the metadata file, which would then grow by every partition's
// position at every commit.
//
// Which file holds a branch's positions (commit.FindPositions): the one named by the newest snapshot on the branch
// head's ancestry that names one, so a rollback to a snapshot before a positions commit shows the positions
// from before it; when no retained ancestor names one (expired), the mirror, trusted only when its snapshot is
// gone and older than every retained ancestor (commit.MirrorTrusted). The writer's expiry re-derives the mirror from
// the ancestry first (commit.RefreshPositionsMirror) and deletes the side files only expired snapshots named.
//
// A run's positions go on the snapshot that carries the run's marker, its last: a rollback to a snapshot
// inside a commit of several segments shows the positions from before the commit (a replay then re-sends rows,
// it never skips any).
//
// Retries. Every commit attempt reads the positions of the head it builds on, merges the run's into them (the
// run's win) and writes a file of its own: a retry after a conflict re-merges on the new head, so positions
// another writer committed in between are kept. Files of attempts that never reached the catalog are deleted;
// once an attempt commits, so are those of the earlier attempts (a retry is only built once a reload proved
// them not applied), and once a proof finds which attempt applied, those of the others; a file whose attempt's
// outcome is unknown is kept (best effort: a file left behind is an orphan, never a missing reference).
//
// Side files are not referenced by Iceberg's own metadata: an orphan-file cleanup that walks the metadata
// folder (Spark's remove_orphan_files, iceberg-go's DeleteOrphanFiles) deletes them once old enough. Reading
// positions then fails, naming the file; it never returns an empty map for a missing file.

// decimalPositionOrder is WithPositionOrder's default: two decimal integers (digits only: Kafka offsets,
// Postgres LSNs as numbers) by value; any other pair is not compared.
func decimalPositionOrder(_, a, b string) (int, bool) {
	if !isDigits(a) || !isDigits(b) {
		return 0, false
	}
	return ComparePositions(a, b), true
}

// Positions returns the source positions committed to the table (partition -> position, the newest per
// partition, whichever writer ID committed it) as of the head of its main branch: after a rollback, those of
// the snapshot restored. A table without positions gives an empty map. It needs no writer, and so fences none.
// A side file that cannot be read is an error naming it, never an empty map. Errors are masked as NewWriter's
// are.
func Positions(ctx context.Context, cat catalog.Catalog, ident table.Identifier) (map[string]string, error) {
	cat = redact.WrapCatalog(cat, nil)
	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		return nil, fmt.Errorf("iceberg: load table %v: %w", ident, err)
	}
	m, err := commit.TablePositions(ctx, tbl, table.MainBranch, nil)
	return m, redact.RedactorOf(cat).Error(err)
}

// Positions returns the source positions committed to the table as of the head of the writer's branch, by any
// writer ID, as the package-level Positions does: committed ones only, freshly loaded from the catalog.
func (w *Writer) Positions(ctx context.Context) (map[string]string, error) {
	tbl, err := w.env.loadTable(ctx)
	if err != nil {
		return nil, err
	}
	m, err := commit.TablePositions(ctx, tbl, w.env.branch, w.runs.sideFiles())
	return m, w.env.red.Error(err)
}
