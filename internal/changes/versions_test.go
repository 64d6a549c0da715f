package changes

import (
	"testing"

	"github.com/icewriter/iceberg/internal/tabletest"
	"github.com/zeebo/xxh3"
)

// keyHash is the Hash of an int64 key's encoding, as Apply and the versions see it.
func keyHash(t *testing.T, id int64) xxh3.Uint128 { return Hash(tabletest.EncodedKey(t, id)) }

// TestVersionsBound: the versions of keys stay within two generations of genCap keys, and the keys changed last
// keep theirs.
func TestVersionsBound(t *testing.T) {
	m := NewVersions(2*BytesPerKey*100, "lsn", false)
	if m.genCap != 100 {
		t.Fatalf("genCap %d, want 100", m.genCap)
	}
	for i := int64(0); i < 10_000; i++ {
		m.Set(keyHash(t, i), i)
		if m.Size() > 2*m.genCap {
			t.Fatalf("after %d keys the map holds %d versions, more than 2x%d", i+1, m.Size(), m.genCap)
		}
	}
	for i := int64(10_000 - m.genCap); i < 10_000; i++ {
		if v, ok := m.Get(keyHash(t, i)); !ok || v != i {
			t.Fatalf("key %d, among the last changed: version %d, %v", i, v, ok)
		}
	}
	if _, ok := m.Get(keyHash(t, 0)); ok {
		t.Fatal("key 0, changed first, still has a version")
	}
}

// testPool is a Pool of limit bytes.
type testPool struct{ used, limit int64 }

func (p *testPool) Add(n int64) { p.used += n }
func (p *testPool) Over() bool  { return p.used > p.limit }
func (p *testPool) Free() int64 { return max(0, p.limit-p.used) }

// TestVersionsAcceptedRestore: Accepted skips the dead letter rows' keys and notes what it replaced; Restore
// puts back the versions of a dropped call but for keys a later call has set since, and the pool counts what
// the map holds throughout.
func TestVersionsAcceptedRestore(t *testing.T) {
	pool := &testPool{limit: 2 * BytesPerKey * 1000}
	m := NewVersions(0, "lsn", false)
	m.UsePool(pool, pool.limit)
	k := []xxh3.Uint128{keyHash(t, 1), keyHash(t, 2), keyHash(t, 3)}
	m.Set(k[0], 5)
	// Key 1 upserted by row 0 at 10, key 2 deleted at 11, key 3 upserted by row 1 (dead) at 12.
	undo := NewCallUndo()
	m.Accepted(k, []int32{0, -1, 1}, []int64{10, 11, 12}, []int32{1}, undo)
	if len(undo.Ups.entries) != 1 || len(undo.Del.entries) != 1 {
		t.Fatalf("undo: %d upserts, %d deletes, want 1 and 1", len(undo.Ups.entries), len(undo.Del.entries))
	}
	if _, ok := m.Get(k[2]); ok {
		t.Fatal("the dead letter row's key has a version")
	}
	m.Set(k[1], 20) // a later call that stays
	m.Restore([]*Undo{undo.Del, undo.Ups})
	if v, ok := m.Get(k[0]); !ok || v != 5 {
		t.Fatalf("key 1: version %d, %v, want 5 restored", v, ok)
	}
	if v, ok := m.Get(k[1]); !ok || v != 20 {
		t.Fatalf("key 2: version %d, %v, want the later call's 20", v, ok)
	}
	if pool.used != int64(m.Size())*BytesPerKey {
		t.Fatalf("pool counts %d bytes for %d versions", pool.used, m.Size())
	}
	m.Release()
	if pool.used != 0 || m.Size() != 0 {
		t.Fatalf("after Release: pool %d bytes, %d versions", pool.used, m.Size())
	}
}
