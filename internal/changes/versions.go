// Package changes is Apply's change stage (Stage): where a change batch's op, version and before-image key
// columns are (Stage.Layout), reading them (Stage.Read), resolving a call's changes per key in order
// (Batch.Resolve) into the records Apply hands the pipeline (DeleteRecord, UpsertRecord), and the versions of
// keys of a version column (Versions), bounded and restorable when a source partition's records are dropped.
// It needs nothing of the Writer: the caller passes the table's conformer and key.
package changes

import (
	"context"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"
	"github.com/icewriter/iceberg/internal/keyindex/keyenc"
	"github.com/zeebo/xxh3"

	"github.com/icewriter/iceberg/internal/commit"
)

// BytesPerKey is what one key's version costs in a Versions: a Go map entry of a 128-bit hash and an int64,
// with a margin for a map growing.
const BytesPerKey = 64

// Hash hashes keys (their keyenc.Encoder encoding) for the versions (a variable so that a test can make keys
// collide).
var Hash = xxh3.Hash128

// Pool is a memory budget several tables' versions draw from (a Router's). Add counts n bytes taken (negative:
// freed), Over reports whether the pool holds more than its limit, Free returns the bytes left under it.
type Pool interface {
	Add(n int64)
	Over() bool
	Free() int64
}

// Versions holds the version of the last change Apply accepted per key, by a 128-bit hash of the key's encoding
// (Hash of a keyenc.Encoder encoding). It is bounded: two generations of at most genCap entries each; a key's new
// version goes into the newer one, and when that fills the older is dropped, so the keys changed least recently
// lose their versions first. It is the change stage's, used under its lock.
type Versions struct {
	cur, old map[xxh3.Uint128]int64
	genCap   int
	pool     Pool // a Router's versions budget, shared by its tables (nil: genCap bounds this map alone)
	column   string
	inTable  bool // the version column is a table column: load reads the committed rows' versions
	loaded   bool
}

// NewVersions makes the versions of a version column, within budget bytes.
func NewVersions(budget int64, column string, inTable bool) *Versions {
	return &Versions{
		cur: map[xxh3.Uint128]int64{}, old: map[xxh3.Uint128]int64{},
		genCap: genCap(budget), column: column, inTable: inTable,
	}
}

// genCap is the keys a generation holds within budget bytes (two generations).
func genCap(budget int64) int { return int(max(1, budget/(2*BytesPerKey))) }

// UsePool makes the map draw from a Router's pool of limit bytes instead of its own budget.
func (m *Versions) UsePool(p Pool, limit int64) {
	m.pool, m.genCap = p, genCap(limit)
}

// Pooled reports whether the map draws from a Router's pool.
func (m *Versions) Pooled() bool { return m.pool != nil }

// add counts n bytes with the pool, if any.
func (m *Versions) add(n int64) {
	if m.pool != nil {
		m.pool.Add(n)
	}
}

// Get returns the version of the key whose keyenc.Encoder encoding hashes (Hash) to h; a nil map knows none.
func (m *Versions) Get(h xxh3.Uint128) (int64, bool) {
	if m == nil {
		return 0, false
	}
	if v, ok := m.cur[h]; ok {
		return v, true
	}
	v, ok := m.old[h]
	return v, ok
}

// Set records v as the version of the key hashing to h.
func (m *Versions) Set(h xxh3.Uint128, v int64) {
	n := len(m.cur)
	m.cur[h] = v
	m.add(int64(len(m.cur)-n) * BytesPerKey)
	// With a router's pool, a table that adds a key while all tables' versions fill the pool drops its own
	// older generation, as a lone map does when its newer one fills.
	if len(m.cur) >= m.genCap || (m.pool != nil && m.pool.Over()) {
		m.add(-int64(len(m.old)) * BytesPerKey)
		m.old, m.cur = m.cur, make(map[xxh3.Uint128]int64, m.genCap/4)
	}
}

// Release gives the map's entries back to the router's pool (its writer closed).
func (m *Versions) Release() {
	if m != nil {
		m.add(-int64(m.Size()) * BytesPerKey)
		m.cur, m.old = map[xxh3.Uint128]int64{}, map[xxh3.Uint128]int64{}
	}
}

// Accepted records the versions (vers) of the keys (keys, by Hash) an accepted call changed, but for keys whose
// last change upserts a row (upRows[i] >= 0; -1: a delete) routed to the dead letter handler (dead, ascending):
// that change was not applied, so it must not make an older replayed change of the key look stale. With undo (a
// source partition's call) it notes what it replaced, for Restore: a delete's key in undo.Del, an upsert's in
// undo.Ups (the call's two records).
func (m *Versions) Accepted(keys []xxh3.Uint128, upRows []int32, vers []int64, dead []int32, undo *CallUndo) {
	for i, h := range keys {
		if len(dead) > 0 && upRows[i] >= 0 {
			if _, found := slices.BinarySearch(dead, upRows[i]); found {
				continue
			}
		}
		if undo != nil {
			u := undo.Del
			if upRows[i] >= 0 {
				u = undo.Ups
			}
			prev, had := m.Get(h)
			u.entries = append(u.entries, change{key: h, set: vers[i], prev: prev, had: had})
		}
		m.Set(h, vers[i])
	}
}

// Undo is what one record of an Apply call of a source partition changed in the versions: restored when
// Source.Abort drops the record, so that the versions of changes never committed do not make the replay of the
// partition (from its committed position) skip its changes as older.
type Undo struct {
	entries []change
}

// CallUndo is an Apply call's Undo per record: the keys it deletes and the rows it upserts. The records are
// handed over together but may be sealed apart (a seal at the flush policy's row count between them).
type CallUndo struct{ Del, Ups *Undo }

// NewCallUndo returns an empty CallUndo.
func NewCallUndo() *CallUndo { return &CallUndo{&Undo{}, &Undo{}} }

// change is one key's version set by a call, and the one it replaced (had: there was one).
type change struct {
	key       xxh3.Uint128
	set, prev int64
	had       bool
}

// Restore undoes the calls (oldest first) newest first. A key whose version a later call that stays has set
// since keeps that version: only a key still at the version a dropped call set goes back to what it was.
func (m *Versions) Restore(undos []*Undo) {
	for i := len(undos) - 1; i >= 0; i-- {
		es := undos[i].entries
		for j := len(es) - 1; j >= 0; j-- {
			e := es[j]
			if v, ok := m.Get(e.key); !ok || v != e.set {
				continue
			}
			if e.had {
				m.Set(e.key, e.prev)
			} else {
				n := m.Size()
				delete(m.cur, e.key)
				delete(m.old, e.key)
				m.add(int64(m.Size()-n) * BytesPerKey)
			}
		}
	}
}

// loadCap is how many keys a load may read: a generation, and no more than the router's pool has left.
func (m *Versions) loadCap() int {
	if m.pool != nil {
		return int(max(1, min(int64(m.genCap), m.pool.Free()/BytesPerKey)))
	}
	return m.genCap
}

// Size is the number of versions held (both generations, a key in both counted twice).
func (m *Versions) Size() int { return len(m.cur) + len(m.old) }

// LoadOnce fills the map, the first time it is called, with the versions of the keys (columns keyNames) the
// table holds on the branch's head (the highest of a key's rows), read with iceberg-go's scanner so that every
// kind of delete applies: up to genCap keys, as the older generation (the keys changed since go first). Without
// the version column in the table there is nothing to read: the map starts empty. An error leaves it unloaded.
func (m *Versions) LoadOnce(ctx context.Context, tbl *table.Table, branch string, keyNames []string) error {
	if m.loaded {
		return nil
	}
	if !m.inTable {
		m.loaded = true
		return nil
	}
	head := commit.HeadID(tbl.Metadata(), branch)
	if head == nil {
		m.loaded = true
		return nil
	}
	fail := func(err error) error { return fmt.Errorf("iceberg: Apply: read the versions of keys: %w", err) }
	// The branch's head in the table's current schema: the version column may be newer than the head snapshot.
	scan, err := tbl.Scan(table.WithSelectedFields(append(slices.Clone(keyNames), m.column)...)).UseRef(branch)
	if err != nil {
		return fail(err)
	}
	_, recs, err := scan.ToArrowRecords(ctx)
	if err != nil {
		return fail(err)
	}
	loaded := map[xxh3.Uint128]int64{}
	var buf []byte
	for rec, err := range recs {
		if err != nil {
			return fail(err)
		}
		full, err := loadVersions(loaded, rec, keyNames, m.column, m.loadCap(), buf)
		rec.Release()
		if err != nil {
			return fail(err)
		}
		if full {
			break
		}
	}
	m.add(int64(len(loaded)) * BytesPerKey)
	m.old, m.loaded = loaded, true
	return nil
}

// loadVersions adds the versions of a scanned record's rows to loaded (rows without a version are skipped) and
// reports whether loaded holds limit keys.
func loadVersions(loaded map[xxh3.Uint128]int64, rec arrow.RecordBatch, keyNames []string, column string, limit int, buf []byte) (bool, error) {
	sc := rec.Schema()
	cols := make([]arrow.Array, len(keyNames))
	for i, n := range keyNames {
		idx := sc.FieldIndices(n)
		if len(idx) == 0 {
			return false, fmt.Errorf("the scan has no key column %q", n)
		}
		cols[i] = rec.Column(idx[0])
	}
	idx := sc.FieldIndices(column)
	if len(idx) == 0 {
		return false, fmt.Errorf("the scan has no version column %q", column)
	}
	enc, err := keyenc.NewEncoder(cols)
	if err != nil {
		return false, err
	}
	var value func(int) int64
	switch vc := rec.Column(idx[0]).(type) {
	case *array.Int64:
		value = func(r int) int64 { return vc.Value(r) }
	case *array.Int32:
		value = func(r int) int64 { return int64(vc.Value(r)) }
	default:
		return false, fmt.Errorf("version column %q is %s", column, vc.DataType())
	}
	vcol := rec.Column(idx[0])
	for r := 0; r < int(rec.NumRows()); r++ {
		if vcol.IsNull(r) {
			continue
		}
		buf = enc.AppendKey(buf[:0], r)
		h, v := Hash(buf), value(r)
		if old, ok := loaded[h]; !ok || v > old {
			loaded[h] = v
		}
		if len(loaded) >= limit {
			return true, nil
		}
	}
	return false, nil
}
