package keyindex

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	ice "github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/dv"
	"github.com/icewriter/iceberg/internal/keyindex/keyenc"
	"github.com/icewriter/iceberg/internal/keyindex/posdelete"
)

// Resolver finds, by position, the rows of a table's data files that its delete files remove: the rows
// an equality delete matches (read from the data file's equality columns), a deletion vector's positions, and
// the positions a position delete file names for the file. It turns deletes this writer did not place into
// positions: the maintainer's conversion of equality deletes and compaction, and the index's Load, CatchUp and
// Rebase over a table that holds deletes.
//
// Scan planning (iceberg-go's PlanFiles) decides which delete files apply to which data file: an equality delete
// only to data of a strictly lower data sequence number, of the same spec and partition unless it is global.
// The resolver only matches values. Each delete file is read once per resolver (a plan lists a global equality
// delete on every task); the resolver is safe for concurrent use.
type Resolver struct {
	tbl *table.Table
	fs  iceio.IO

	mu  sync.Mutex
	eq  map[string]*eqDeleteKeys       // equality delete file path -> its keys
	pos map[string]map[string][]uint64 // position delete file path -> data file path -> positions
}

// KnownKeys are a data file's rows read as keys on Columns, in row order.
type KnownKeys struct {
	Columns Columns
	Keys    *keyenc.List
}

// eqDeleteKeys are the rows of one equality delete file, encoded as keys on its equality columns.
type eqDeleteKeys struct {
	once sync.Once
	keys map[string]struct{}
	err  error
}

// NewResolver returns a resolver of tbl's deletes.
func NewResolver(ctx context.Context, tbl *table.Table) (*Resolver, error) {
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	return &Resolver{tbl: tbl, fs: fs, eq: map[string]*eqDeleteKeys{}, pos: map[string]map[string][]uint64{}}, nil
}

// equalityColumns are the columns an equality delete file matches (its equality field ids), named by the
// table's current schema.
func equalityColumns(sc *ice.Schema, ids []int) (Columns, error) {
	ks := Columns{FieldIDs: slices.Clone(ids)}
	for _, id := range ids {
		n, ok := sc.FindColumnName(id)
		if !ok {
			return Columns{}, fmt.Errorf("iceberg: equality delete on field id %d, which the table's schema does not have", id)
		}
		ks.Names = append(ks.Names, n)
	}
	return ks, nil
}

// EqualityDeleted returns the positions of task's data file that the task's equality delete files remove (nil:
// none). Delete files are grouped by their equality columns; the data file's columns are read once per group.
// known, when not nil, are the data file's rows already read as keys on known.Columns (the key index's
// load has them): a group on the same columns uses them instead of reading the file again.
func (r *Resolver) EqualityDeleted(ctx context.Context, task table.FileScanTask, known *KnownKeys) (*dv.RoaringPositionBitmap, error) {
	if len(task.EqualityDeleteFiles) == 0 {
		return nil, nil
	}
	groups := map[string][]ice.DataFile{}
	var order []string
	for _, f := range task.EqualityDeleteFiles {
		g := idsKey(f.EqualityFieldIDs())
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], f)
	}
	var out *dv.RoaringPositionBitmap
	for _, g := range order {
		files := groups[g]
		ks, err := equalityColumns(r.tbl.Schema(), files[0].EqualityFieldIDs())
		if err != nil {
			return nil, err
		}
		sets := make([]map[string]struct{}, 0, len(files))
		for _, f := range files {
			keys, err := r.equalityKeys(ctx, f, ks)
			if err != nil {
				return nil, err
			}
			if len(keys) > 0 {
				sets = append(sets, keys)
			}
		}
		if len(sets) == 0 {
			continue
		}
		rows := new(keyenc.List)
		if known != nil && slices.Equal(known.Columns.FieldIDs, ks.FieldIDs) {
			rows = known.Keys
		} else if *rows, err = ReadFileKeys(ctx, r.tbl, task.File, ks); err != nil {
			return nil, fmt.Errorf("iceberg: match equality deletes against %s: %w", task.File.FilePath(), err)
		}
		for pos, k := range rows.All() {
			for _, s := range sets {
				if _, ok := s[string(k)]; ok {
					if out == nil {
						out = dv.NewRoaringPositionBitmap()
					}
					out.Set(uint64(pos))
					break
				}
			}
		}
	}
	return out, nil
}

// equalityKeys reads an equality delete file's rows as keys (once per resolver).
func (r *Resolver) equalityKeys(ctx context.Context, f ice.DataFile, ks Columns) (map[string]struct{}, error) {
	r.mu.Lock()
	e, ok := r.eq[f.FilePath()]
	if !ok {
		e = &eqDeleteKeys{}
		r.eq[f.FilePath()] = e
	}
	r.mu.Unlock()
	e.once.Do(func() {
		rows, err := ReadFileKeys(ctx, r.tbl, f, ks)
		if err != nil {
			e.err = fmt.Errorf("iceberg: read equality delete file %s: %w", f.FilePath(), err)
			return
		}
		e.keys = make(map[string]struct{}, rows.Len())
		for _, k := range rows.All() {
			e.keys[string(k)] = struct{}{}
		}
	})
	return e.keys, e.err
}

// PositionDeleted returns the positions of task's data file that its deletion vector, else its position delete
// files, remove (nil: none). Scan planning lists position delete files only for a file without a vector: a
// vector holds every earlier position of its file.
func (r *Resolver) PositionDeleted(task table.FileScanTask) (*dv.RoaringPositionBitmap, error) {
	if len(task.DeletionVectorFiles) > 0 {
		bm, err := dv.ReadDV(r.fs, task.DeletionVectorFiles[0])
		if err != nil {
			return nil, fmt.Errorf("iceberg: deletion vector of %s: %w", task.File.FilePath(), err)
		}
		return bm, nil
	}
	var out *dv.RoaringPositionBitmap
	for _, f := range task.DeleteFiles {
		byFile, err := r.positionFile(f)
		if err != nil {
			return nil, err
		}
		for _, p := range byFile[task.File.FilePath()] {
			if out == nil {
				out = dv.NewRoaringPositionBitmap()
			}
			out.Set(p)
		}
	}
	return out, nil
}

// positionFile reads a position delete file (once per resolver): the positions it names, by data file.
func (r *Resolver) positionFile(f ice.DataFile) (map[string][]uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock() // position delete files are small and read rarely: one at a time is enough
	if m, ok := r.pos[f.FilePath()]; ok {
		return m, nil
	}
	m, err := posdelete.Read(r.fs, f)
	if err != nil {
		return nil, fmt.Errorf("iceberg: read position delete file %s: %w", f.FilePath(), err)
	}
	r.pos[f.FilePath()] = m
	return m, nil
}

// idsKey names a set of equality field ids (in the file's order).
func idsKey(ids []int) string {
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(id))
	}
	return b.String()
}

// Deleted returns the positions of task's data file that its deletes remove, whatever their kind (nil: none):
// PositionDeleted's and EqualityDeleted's.
func (r *Resolver) Deleted(ctx context.Context, task table.FileScanTask, known *KnownKeys) (*dv.RoaringPositionBitmap, error) {
	dead, err := r.PositionDeleted(task)
	if err != nil {
		return nil, err
	}
	eq, err := r.EqualityDeleted(ctx, task, known)
	if err != nil {
		return nil, err
	}
	switch {
	case dead == nil:
		return eq, nil
	case eq != nil:
		dead.Or(eq)
	}
	return dead, nil
}
