package iceberg

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"unicode/utf8"

	"github.com/icewriter/iceberg/internal/pipeline"

	ice "github.com/apache/iceberg-go"
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

// Size caps of one position: a partition key and a position are at most this many bytes.
const (
	maxPositionPartitionBytes = 1 << 10
	maxPositionBytes          = 1 << 10
)

// checkPosition validates one partition's position before it is accepted: both at most 1 KiB (every commit
// that changes a position rewrites the table's whole map) and valid UTF-8 (the side file is JSON, which would
// silently replace invalid bytes). The error names the partition and wraps ErrInvalidPosition.
func checkPosition(partition, position string) error {
	switch {
	case len(partition) > maxPositionPartitionBytes:
		return fmt.Errorf("%w: partition %s: key of %d bytes, at most %d", ErrInvalidPosition, pipeline.Quote(partition),
			len(partition), maxPositionPartitionBytes)
	case len(position) > maxPositionBytes:
		return fmt.Errorf("%w: partition %s: position of %d bytes, at most %d", ErrInvalidPosition, pipeline.Quote(partition),
			len(position), maxPositionBytes)
	case !utf8.ValidString(partition):
		return fmt.Errorf("%w: partition %s: key is not valid UTF-8", ErrInvalidPosition, pipeline.Quote(partition))
	case !utf8.ValidString(position):
		return fmt.Errorf("%w: partition %s: position is not valid UTF-8", ErrInvalidPosition, pipeline.Quote(partition))
	}
	return nil
}

// decimalPositionOrder is WithPositionOrder's default: two decimal integers (digits only: Kafka offsets,
// Postgres LSNs as numbers) by value; any other pair is not compared.
func decimalPositionOrder(_, a, b string) (int, bool) {
	if !isDigits(a) || !isDigits(b) {
		return 0, false
	}
	return ComparePositions(a, b), true
}

// stagePositions is an attempt's share of a run's positions: it merges the run's positions into those of the
// head the attempt builds on and, when that changes any, writes the merged map as a new side file for the
// attempt's snapshot to name (call.positions). A side file that cannot be read fails the build: committing on
// an empty map would drop every other partition's position.
func (c *catalogCommitter) stagePositions(ctx context.Context, call *commitCall, tbl *table.Table, run *Run) error {
	call.positions = ""
	if len(run.Positions) == 0 {
		return nil
	}
	base := map[string]string{}
	if ref, ok := commit.FindPositions(tbl.Metadata(), run.Branch); ok {
		var err error
		if base, err = c.sideFiles.Read(ctx, tbl, ref.Path); err != nil {
			return err
		}
	}
	if err := checkPositionBases(run, base); err != nil {
		return err
	}
	changed := false
	for p, v := range run.Positions {
		if cur, ok := base[p]; !ok || cur != v {
			changed = true
			break
		}
	}
	if !changed {
		return nil
	}
	merged := maps.Clone(base)
	maps.Copy(merged, run.Positions)
	path, err := commit.WritePositionsFile(ctx, tbl, merged)
	if path != "" {
		call.positions, call.positionsTable = path, tbl
	}
	if err != nil {
		return err
	}
	c.sideFiles.Put(path, merged)
	return nil
}

// checkPositionBases refuses a run whose partitions moved on the table (head, the positions of the head the
// attempt builds on) since the writer resumed or last committed them: another writer committed them, and this
// run's rows of them are already on the table or were skipped by it. The error names the partition (the first
// in name order, so that retries report the same one) and wraps ErrPositionMoved.
func checkPositionBases(run *Run, head map[string]string) error {
	for _, p := range slices.Sorted(maps.Keys(run.PositionBases)) {
		if want, got := run.PositionBases[p], head[p]; got != want {
			return fmt.Errorf("%w: partition %s is at %s on the table, this writer (%s) resumed or last committed "+
				"it at %s", ErrPositionMoved, pipeline.Quote(p), quotePosition(got), run.WriterID, quotePosition(want))
		}
	}
	return nil
}

// quotePosition quotes a position for an error message; the empty one is "no position".
func quotePosition(p string) string {
	if p == "" {
		return "no position"
	}
	return pipeline.Quote(p)
}

// positionsMirrorProp is the mirror property the attempt sets beside its snapshot (pending, the branch head
// it commits), when it wrote a side file.
func positionsMirrorProp(call *commitCall, branch string, pending *table.Snapshot) ice.Properties {
	if call.positions == "" {
		return nil
	}
	m := commit.PositionsMirror{Path: call.positions}
	if pending != nil {
		m.SnapshotID, m.SeqNumber = pending.SnapshotID, pending.SequenceNumber
	}
	return ice.Properties{propPositionsPrefix + branch: commit.MustJSON(m)}
}

// positionsAttemptFailed files the side file of an attempt that failed: one never sent is provably not
// committed; a sent one waits for the call's outcome.
func (call *commitCall) positionsAttemptFailed(sent bool) {
	if call.positions == "" {
		return
	}
	if sent {
		call.sentPositions = append(call.sentPositions, call.positions)
	} else {
		call.unsentPositions = append(call.unsentPositions, call.positions)
	}
	call.positions = ""
}

// settlePositions deletes the side files of the call's attempts that provably did not commit, once the call
// ended: those never sent; after a commit, those of the earlier attempts; after a proof that an attempt
// applied, those its snapshot (applied, when still in the table) does not name. Otherwise sent files are kept.
func (c *catalogCommitter) settlePositions(ctx context.Context, call *commitCall, res *commit.Result, applied int64, err error) {
	drop := call.unsentPositions
	if err == nil && res.How == commit.Committed {
		drop = append(drop, call.sentPositions...)
	} else if err == nil && res.How == commit.Proven {
		if s := res.Table.Metadata().SnapshotByID(applied); s != nil {
			keep, _ := commit.SummaryProp(s, summaryPositions)
			for _, p := range call.sentPositions {
				if p != keep {
					drop = append(drop, p)
				}
			}
		}
	}
	if len(drop) > 0 && call.positionsTable != nil {
		removePaths(ctx, c.Log, call.positionsTable, drop)
	}
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
