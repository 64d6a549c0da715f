package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	iceberg "github.com/icewriter/iceberg"
)

// Shared by the cow, cow-mem and mor tables: keyed tables of seed events, M files of fileRows rows.

const fileRows = 1000

// keyedTable creates a table with identifier field id through our Writer and loads it with files of fileRows
// rows whose ids are given in order (sequential or shuffled). props become table properties. It returns the
// writer, still open, for the mutations.
func (e *env) keyedTable(ctx context.Context, ident table.Identifier, ids []int64, infoLen int, props map[string]string, opts ...iceberg.Option) (*iceberg.Writer, error) {
	create := []iceberg.CreateOption{iceberg.IdentifierFields("id")}
	if len(props) > 0 {
		create = append(create, iceberg.TableProperties(props))
	}
	// The layout (M files of fileRows rows) is the experiment's control: no small-file compaction merges them.
	all := append([]iceberg.Option{iceberg.WithCreate(seedSchema, create...), iceberg.WithFlushRows(fileRows),
		iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompactionEvery(0)}, opts...)
	w, err := iceberg.NewWriter(ctx, e.cat, ident, all...)
	if err != nil {
		return nil, err
	}
	g := newGenerator(0, 11, infoLen)
	for i := 0; i < len(ids); i += fileRows {
		rec := g.batchIDs(ids[i:min(i+fileRows, len(ids))])
		err := w.Write(ctx, rec)
		rec.Release()
		if err != nil {
			_ = w.Abort(ctx)
			return nil, err
		}
	}
	if err := w.Flush(ctx); err != nil {
		_ = w.Abort(ctx)
		return nil, err
	}
	return w, nil
}

func sequentialIDs(n int) []int64 {
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i)
	}
	return ids
}

func shuffledIDs(n int, seed uint64) []int64 {
	ids := sequentialIDs(n)
	r := rand.New(rand.NewPCG(seed, 1))
	r.Shuffle(n, func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	return ids
}

// keysIn returns k keys of the layout: scattered (one per distinct file, files evenly spaced, while k <= files;
// random distinct rows beyond) or clustered (k rows of the first file).
func keysIn(ids []int64, k int, clustered bool, seed uint64) []int64 {
	r := rand.New(rand.NewPCG(seed, 2))
	files := (len(ids) + fileRows - 1) / fileRows
	var out []int64
	switch {
	case clustered:
		out = append(out, ids[:min(k, len(ids))]...)
	case k <= files:
		for i := 0; i < k; i++ {
			f := i * files / k
			out = append(out, ids[f*fileRows+r.IntN(fileRows)])
		}
	default:
		for _, p := range r.Perm(len(ids))[:min(k, len(ids))] {
			out = append(out, ids[p])
		}
	}
	return out
}

// snapshotsSince lists the snapshots from head back to (not including) base, oldest first.
func snapshotsSince(tbl *table.Table, base *int64) []*table.Snapshot {
	var out []*table.Snapshot
	for s := tbl.CurrentSnapshot(); s != nil; {
		if base != nil && s.SnapshotID == *base {
			break
		}
		out = append([]*table.Snapshot{s}, out...)
		if s.ParentSnapshotID == nil {
			break
		}
		s = tbl.SnapshotByID(*s.ParentSnapshotID)
	}
	return out
}

func headID(tbl *table.Table) *int64 {
	if s := tbl.CurrentSnapshot(); s != nil {
		id := s.SnapshotID
		return &id
	}
	return nil
}

// change sums what a mutation did over its snapshots: summary counters and the delete files it added (read
// from the manifests).
type change struct {
	snapshots     int
	removedFiles  int64 // data files removed (rewritten)
	removedBytes  int64
	removedRows   int64
	addedBytes    int64 // data and delete files added
	addedRows     int64
	deleteFiles   int64
	deleteBytes   int64
	deleteRecords int64
	totalBefore   int64 // total-files-size before the mutation
	dataFilesPrev int64
}

func measureChange(ctx context.Context, tbl *table.Table, base *int64) (change, error) {
	var c change
	if base != nil {
		if s := tbl.SnapshotByID(*base); s != nil && s.Summary != nil {
			c.totalBefore = atoi(s.Summary.Properties["total-files-size"])
			c.dataFilesPrev = atoi(s.Summary.Properties["total-data-files"])
		}
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return c, err
	}
	for _, s := range snapshotsSince(tbl, base) {
		c.snapshots++
		if s.Summary != nil {
			p := s.Summary.Properties
			c.removedFiles += atoi(p["deleted-data-files"])
			c.removedBytes += atoi(p["removed-files-size"])
			c.removedRows += atoi(p["deleted-records"])
			c.addedBytes += atoi(p["added-files-size"])
			c.addedRows += atoi(p["added-records"])
		}
		mans, err := s.Manifests(fs)
		if err != nil {
			return c, err
		}
		for _, m := range mans {
			if m.ManifestContent() != ice.ManifestContentDeletes {
				continue
			}
			entries, err := m.FetchEntries(fs, true)
			if err != nil {
				return c, err
			}
			for _, en := range entries {
				if en.Status() == ice.EntryStatusADDED && en.SnapshotID() == s.SnapshotID {
					c.deleteFiles++
					c.deleteBytes += en.DataFile().FileSizeBytes()
					c.deleteRecords += en.DataFile().Count()
				}
			}
		}
	}
	return c, nil
}

// idFilter is the predicate id IN (keys).
func idFilter(keys []int64) ice.BooleanExpression {
	return ice.IsIn(ice.Reference("id"), keys...)
}

// baselineUpsert is the naive upsert with iceberg-go alone: Table.Delete by key (its mode comes from the
// table's write.delete.mode) then Table.Append of the new rows, two commits. With rows nil it only deletes.
func (e *env) baselineUpsert(ctx context.Context, tbl *table.Table, keys []int64, rows arrow.RecordBatch) (*table.Table, error) {
	tbl, err := tbl.Delete(ctx, idFilter(keys), nil)
	if err != nil {
		return nil, fmt.Errorf("baseline delete: %w", err)
	}
	if rows == nil {
		return tbl, nil
	}
	rows.Retain()
	rdr, err := array.NewRecordReader(rows.Schema(), []arrow.RecordBatch{rows})
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	tbl, err = tbl.Append(ctx, rdr, nil)
	if err != nil {
		return nil, fmt.Errorf("baseline append: %w", err)
	}
	return tbl, nil
}

// copyOnWriteSupported probes whether our Writer implements Upsert in CopyOnWrite mode yet: it returns false
// (and the reason) when Upsert or Flush fails with iceberg.ErrNotSupported.
func (e *env) copyOnWriteSupported(ctx context.Context) (bool, string, error) {
	ident := e.newIdent("cow_probe")
	defer e.dropTable(ctx, ident)
	w, err := e.keyedTable(ctx, ident, sequentialIDs(10), seedInfoLen, nil, iceberg.WithMode(iceberg.CopyOnWrite))
	if err != nil {
		return false, "", err
	}
	defer w.Close(ctx)
	g := newGenerator(0, 3, seedInfoLen)
	rec := g.batchIDs([]int64{3})
	defer rec.Release()
	err = w.Upsert(ctx, rec)
	if err == nil {
		err = w.Flush(ctx)
	}
	if errors.Is(err, iceberg.ErrNotSupported) {
		return false, err.Error(), nil
	}
	return err == nil, "", err
}
