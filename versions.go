package iceberg

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

// versionBytesPerKey is what one key's version costs in a versionMap: a Go map entry of a 128-bit hash and an
// int64 measured 35 to 56 bytes (Go 1.26, by load factor), with a margin for a map growing.
const versionBytesPerKey = 64

// versionMap holds the version of the last change Apply accepted per key, by a 128-bit hash of the key's
// encoding (keyenc.Encoder). It is bounded: two generations of at most genCap entries each; a key's new version
// goes into the newer one, and when that fills the older is dropped, so the keys changed least recently lose
// their versions first. It is the change stage's, used under its lock.
type versionMap struct {
	cur, old map[xxh3.Uint128]int64
	genCap   int
	pool     *memPool // a Router's versions budget, shared by its tables (nil: genCap bounds this map alone)
	column   string
	inTable  bool // the version column is a table column: load reads the committed rows' versions
	loaded   bool
}

// newVersionMap makes the versions of a version column, within budget bytes.
func newVersionMap(budget int64, column string, inTable bool) *versionMap {
	return &versionMap{
		cur: map[xxh3.Uint128]int64{}, old: map[xxh3.Uint128]int64{},
		genCap: int(max(1, budget/(2*versionBytesPerKey))), column: column, inTable: inTable,
	}
}

// get returns the version of the key whose keyenc.Encoder encoding hashes (xxh3.Hash128) to h; a nil map knows
// none.
func (m *versionMap) get(h xxh3.Uint128) (int64, bool) {
	if m == nil {
		return 0, false
	}
	if v, ok := m.cur[h]; ok {
		return v, true
	}
	v, ok := m.old[h]
	return v, ok
}

func (m *versionMap) set(h xxh3.Uint128, v int64) {
	n := len(m.cur)
	m.cur[h] = v
	m.pool.add(int64(len(m.cur)-n) * versionBytesPerKey)
	// With a router's pool, a table that adds a key while all tables' versions fill the pool drops its own
	// older generation, as a lone map does when its newer one fills.
	if len(m.cur) >= m.genCap || (m.pool != nil && m.pool.over()) {
		m.pool.add(-int64(len(m.old)) * versionBytesPerKey)
		m.old, m.cur = m.cur, make(map[xxh3.Uint128]int64, m.genCap/4)
	}
}

// release gives the map's entries back to the router's pool (its writer closed).
func (m *versionMap) release() {
	if m != nil {
		m.pool.add(-int64(m.size()) * versionBytesPerKey)
		m.cur, m.old = map[xxh3.Uint128]int64{}, map[xxh3.Uint128]int64{}
	}
}

// accepted records the versions of the keys an accepted call changed, but for keys whose last change upserts
// a row routed to the dead letter handler (dead, ascending): that change was not applied, so it must not make
// an older replayed change of the key look stale. With undo (a source partition's call) it notes what it
// replaced, for restore: a delete's key in undo.del, an upsert's in undo.ups (the call's two records).
func (m *versionMap) accepted(plan *changePlan, dead []int32, undo *callUndo) {
	for i, h := range plan.keys {
		if len(dead) > 0 && plan.upRows[i] >= 0 {
			if _, found := slices.BinarySearch(dead, plan.upRows[i]); found {
				continue
			}
		}
		if undo != nil {
			u := undo.del
			if plan.upRows[i] >= 0 {
				u = undo.ups
			}
			prev, had := m.get(h)
			u.entries = append(u.entries, versionChange{key: h, set: plan.vers[i], prev: prev, had: had})
		}
		m.set(h, plan.vers[i])
	}
}

// versionUndo is what one record of an Apply call of a source partition changed in the version map: restored
// when Source.Abort drops the record, so that the versions of changes never committed do not make the replay
// of the partition (from its committed position) skip its changes as older.
type versionUndo struct {
	entries []versionChange
}

// callUndo is an Apply call's versionUndo per record: the keys it deletes and the rows it upserts. The records
// are handed over together but may be sealed apart (a seal at the flush policy's row count between them).
type callUndo struct{ del, ups *versionUndo }

// versionChange is one key's version set by a call, and the one it replaced (had: there was one).
type versionChange struct {
	key       xxh3.Uint128
	set, prev int64
	had       bool
}

// restore undoes the calls (oldest first) newest first. A key whose version a later call that stays has set
// since keeps that version: only a key still at the version a dropped call set goes back to what it was.
func (m *versionMap) restore(undos []*versionUndo) {
	for i := len(undos) - 1; i >= 0; i-- {
		es := undos[i].entries
		for j := len(es) - 1; j >= 0; j-- {
			e := es[j]
			if v, ok := m.get(e.key); !ok || v != e.set {
				continue
			}
			if e.had {
				m.set(e.key, e.prev)
			} else {
				n := m.size()
				delete(m.cur, e.key)
				delete(m.old, e.key)
				m.pool.add(int64(m.size()-n) * versionBytesPerKey)
			}
		}
	}
}

// loadCap is how many keys a load may read: a generation, and no more than the router's pool has left.
func (m *versionMap) loadCap() int {
	if m.pool != nil {
		return int(max(1, min(int64(m.genCap), m.pool.free()/versionBytesPerKey)))
	}
	return m.genCap
}

// size is the number of versions held (both generations, a key in both counted twice).
func (m *versionMap) size() int { return len(m.cur) + len(m.old) }

// loadOnce fills the map, the first time it is called, with the versions of the keys the table holds on the
// branch's head (the highest of a key's rows), read with iceberg-go's scanner so that every kind of delete
// applies: up to genCap keys, as the older generation (the keys changed since go first). Without the version
// column in the table there is nothing to read: the map starts empty. An error leaves it unloaded.
func (m *versionMap) loadOnce(ctx context.Context, tbl *table.Table, branch string, ks *keySpec) error {
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
	scan := tbl.Scan(table.WithSnapshotID(*head), table.WithSelectedFields(append(slices.Clone(ks.names), m.column)...))
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
		full, err := loadVersions(loaded, rec, ks, m.column, m.loadCap(), buf)
		rec.Release()
		if err != nil {
			return fail(err)
		}
		if full {
			break
		}
	}
	m.pool.add(int64(len(loaded)) * versionBytesPerKey)
	m.old, m.loaded = loaded, true
	return nil
}

// loadVersions adds the versions of a scanned record's rows to loaded (rows without a version are skipped) and
// reports whether loaded holds limit keys.
func loadVersions(loaded map[xxh3.Uint128]int64, rec arrow.RecordBatch, ks *keySpec, column string, limit int, buf []byte) (bool, error) {
	sc := rec.Schema()
	cols := make([]arrow.Array, len(ks.names))
	for i, n := range ks.names {
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
		h, v := changeHash(buf), value(r)
		if old, ok := loaded[h]; !ok || v > old {
			loaded[h] = v
		}
		if len(loaded) >= limit {
			return true, nil
		}
	}
	return false, nil
}

// release gives the versions back to a router's pool once the writer closed (after the Apply holding the
// version lock, if any, has returned).
func (st *changeStage) release() {
	if st == nil || st.vers == nil || st.vers.pool == nil {
		return
	}
	st.sem <- struct{}{}
	defer func() { <-st.sem }()
	st.vers.release()
}
