package store

import (
	"bytes"
	"iter"
	"math/bits"
	"unsafe"

	"github.com/icewriter/iceberg/internal/keyindex/keyenc"
)

// Table is the key index's map from a key (keyenc's encoding) to the rows that hold it, built so that
// indexing a row allocates nothing of its own (a map[string][]Loc takes a string and a slice per row, a large
// share of an upsert stream's CPU and over 100 bytes per key: docs/benchmarks.md). Here every
// key's bytes are appended to one arena, every row is a slot in one slice, and the slots whose hashes share a
// bucket form a chain through next; a lookup walks one chain and compares the full hash, then the key's bytes,
// so keys whose hashes collide stay apart. A key held by several rows (a Write of a key already written) has
// one slot per row.
//
// Removing a row frees its slot for the next row (a free list through next) and leaves its key's bytes in the
// arena: once more than half the arena is such bytes, the next add copies the live keys into a new arena
// (compact), so an upsert stream that replaces the same keys keeps the arena within twice its live keys.
// Each bucket also holds a summary of its chain's hashes (bucket.tags), so that looking up a key the table does
// not hold, as most keys of an upsert stream are new, mostly stops at the bucket without reading a slot.
//
// The slots live in pages of slotPage, so that a growing table adds pages: growing one slice by doubling copied
// every slot written so far and zeroed twice the memory it kept, a sixth of the key index's upkeep in an upsert
// stream whose table grows. Only the last page may be shorter, doubling as it fills, so that a table of a few
// keys holds a few slots.
//
// Nothing shrinks the slots or the buckets; Size counts what they hold, capacity included.
type Table struct {
	hash    func([]byte) uint64 // keyenc.Hash; a test makes keys collide
	arena   []byte
	pages   [][]keySlot // the slots, slotPage to a page but the last, which may hold fewer
	used    int32       // slots handed out, free ones included: slot used is the next new one
	buckets []bucket    // a power of two long
	free    int32       // the first free slot, plus one (0: none)
	live    int         // slots in use
	dead    int         // arena bytes of removed keys
}

// Loc is where an indexed row is: a file the key index numbers and the row's position in it.
type Loc struct{ File, Pos int32 }

// bucket is the head of a chain of slots and a summary of their hashes: tagBit of each slot's hash is set in
// tags. A key whose bit is clear is not in the chain; an unlink recomputes the bits from the slots left.
type bucket struct {
	head int32 // the first slot, plus one (0: empty)
	tags uint32
}

// tagBit is the bit of tags a hash sets: one of 32 by its top five bits (the bucket is chosen by its low bits).
func tagBit(h uint64) uint32 { return 1 << (h >> 59) }

// bucketBytes is the size of a bucket.
const bucketBytes = int64(unsafe.Sizeof(bucket{}))

// keySlot is one indexed row: its key's hash and bytes (arena[off:off+klen]) and where the row is. A free slot
// has loc.File -1.
type keySlot struct {
	hash uint64
	off  int64
	klen uint32
	loc  Loc
	next int32 // the next slot of the chain (or of the free list), plus one; 0: none
}

// SlotBytes is the size of a slot; with the bucket it hangs from (at most one per slot) and the key's bytes,
// it is what the index holds per key.
const SlotBytes = int64(unsafe.Sizeof(keySlot{}))

// slotPageBits sets the slots of a page, slotPage (32 KiB of slots): small enough for a table of a few keys,
// large enough that the page list of a table of millions stays in the cache.
const (
	slotPageBits = 10
	slotPage     = 1 << slotPageBits
)

// slot returns slot s.
func (t *Table) slot(s int32) *keySlot { return &t.pages[s>>slotPageBits][s&(slotPage-1)] }

// capacity returns the slots the pages hold.
func (t *Table) capacity() int {
	if len(t.pages) == 0 {
		return 0
	}
	return (len(t.pages)-1)*slotPage + len(t.pages[len(t.pages)-1])
}

// grow makes room for want slots: the last page doubles (at least 16 slots) until it holds slotPage, then pages
// are added.
func (t *Table) grow(want int) {
	for t.capacity() < want {
		last := len(t.pages) - 1
		if last < 0 || len(t.pages[last]) == slotPage {
			t.pages = append(t.pages, nil)
			last++
		}
		n := min(slotPage, max(16, 2*len(t.pages[last]), want-last*slotPage))
		p := make([]keySlot, n)
		copy(p, t.pages[last])
		t.pages[last] = p
	}
}

// NewTable returns an empty table hashing keys with keyenc.Hash.
func NewTable() Table { return Table{hash: keyenc.Hash} }

// SetHash replaces the hash of an empty table's keys: a test makes keys collide.
func (t *Table) SetHash(h func([]byte) uint64) { t.hash = h }

// Size returns the bytes the table holds: its arena, slots and buckets, capacity included.
func (t *Table) Size() int64 {
	return int64(cap(t.arena)) + int64(t.capacity())*SlotBytes + int64(cap(t.buckets))*bucketBytes
}

// Len returns the rows indexed.
func (t *Table) Len() int { return t.live }

// Reserve makes room for n more rows without growing slot by slot.
func (t *Table) Reserve(n, keyBytes int) {
	if t.dead > len(t.arena)/2 && t.dead >= 1<<10 {
		t.compact(keyBytes)
	}
	// The free slots (used - live of them) take what they can, new ones after used the rest.
	t.grow(int(t.used) + max(t.live+n-int(t.used), 0))
	if len(t.arena)+keyBytes > cap(t.arena) {
		t.arena = growCap(t.arena, keyBytes)
	}
	if t.live+n > len(t.buckets) {
		t.rehash(t.live + n)
	}
}

// growCap returns s with room for n more elements, at least doubling its capacity (append's amortized growth
// without appending zero values).
func growCap[T any](s []T, n int) []T {
	if len(s)+n <= cap(s) {
		return s
	}
	out := make([]T, len(s), max(len(s)+n, 2*cap(s)))
	copy(out, s)
	return out
}

// Add indexes the row at loc under key (its bytes are copied).
func (t *Table) Add(key []byte, loc Loc) {
	if t.live+1 > len(t.buckets) || (t.dead > len(t.arena)/2 && t.dead >= 1<<10) {
		t.Reserve(1, len(key))
	}
	h := t.hash(key)
	off := int64(len(t.arena))
	t.arena = append(t.arena, key...)
	var s int32
	if t.free != 0 {
		s = t.free - 1
		t.free = t.slot(s).next
	} else {
		s = t.used
		t.used++
		t.grow(int(t.used))
	}
	bk := &t.buckets[h&uint64(len(t.buckets)-1)]
	*t.slot(s) = keySlot{hash: h, off: off, klen: uint32(len(key)), loc: loc, next: bk.head}
	bk.head = s + 1
	bk.tags |= tagBit(h)
	t.live++
}

// key returns a slot's key bytes (valid until the next add).
func (t *Table) key(s *keySlot) []byte { return t.arena[s.off : s.off+int64(s.klen)] }

// unlinkMatching removes from key's chain the slots that hold key and whose location match accepts (match nil:
// every one), passing each removed location to f; with one set it stops after the first.
func (t *Table) unlinkMatching(key []byte, match func(Loc) bool, one bool, f func(Loc)) {
	if t.live == 0 {
		return
	}
	h := t.hash(key)
	bk := &t.buckets[h&uint64(len(t.buckets)-1)]
	if bk.tags&tagBit(h) == 0 {
		return
	}
	unlinked := false
	for prev := &bk.head; *prev != 0; {
		s := *prev - 1
		sl := t.slot(s)
		if sl.hash != h || !bytes.Equal(t.key(sl), key) || (match != nil && !match(sl.loc)) {
			prev = &sl.next
			continue
		}
		*prev = sl.next
		f(sl.loc)
		t.release(s)
		unlinked = true
		if one {
			break
		}
	}
	if unlinked {
		bk.tags = 0
		for n := bk.head; n != 0; n = t.slot(n - 1).next {
			bk.tags |= tagBit(t.slot(n - 1).hash)
		}
	}
}

// release puts an unlinked slot on the free list; its key's bytes become dead.
func (t *Table) release(s int32) {
	sl := t.slot(s)
	t.dead += int(sl.klen)
	*sl = keySlot{loc: Loc{File: -1}, next: t.free}
	t.free = s + 1
	t.live--
}

// Remove deletes every row of key and appends their locations to dst.
func (t *Table) Remove(dst []Loc, key []byte) []Loc {
	t.unlinkMatching(key, nil, false, func(l Loc) { dst = append(dst, l) })
	return dst
}

// RemoveLoc deletes the row of key at loc, if the table holds it.
func (t *Table) RemoveLoc(key []byte, loc Loc) bool {
	found := false
	t.unlinkMatching(key, func(l Loc) bool { return l == loc }, true, func(Loc) { found = true })
	return found
}

// Lookup appends the locations of key's rows to dst.
func (t *Table) Lookup(dst []Loc, key []byte) []Loc {
	if t.live == 0 {
		return dst
	}
	h := t.hash(key)
	bk := t.buckets[h&uint64(len(t.buckets)-1)]
	if bk.tags&tagBit(h) == 0 {
		return dst
	}
	for n := bk.head; n != 0; n = t.slot(n - 1).next {
		if sl := t.slot(n - 1); sl.hash == h && bytes.Equal(t.key(sl), key) {
			dst = append(dst, sl.loc)
		}
	}
	return dst
}

// Forget removes every row of the files gone reports, and returns how many.
func (t *Table) Forget(gone func(file int32) bool) int {
	n := 0
	for b := range t.buckets {
		bk := &t.buckets[b]
		bk.tags = 0
		for prev := &bk.head; *prev != 0; {
			s := *prev - 1
			sl := t.slot(s)
			if gone(sl.loc.File) {
				*prev = sl.next
				t.release(s)
				n++
				continue
			}
			bk.tags |= tagBit(sl.hash)
			prev = &sl.next
		}
	}
	return n
}

// All yields every indexed row: its key (valid until the next add) and location.
func (t *Table) All() iter.Seq2[[]byte, Loc] {
	return func(yield func([]byte, Loc) bool) {
		for i := range t.used {
			if sl := t.slot(i); sl.loc.File >= 0 && !yield(t.key(sl), sl.loc) {
				return
			}
		}
	}
}

// rehash makes the buckets a power of two of at least n (one slot per bucket on average at most) and relinks
// every slot in use.
func (t *Table) rehash(n int) {
	size := max(16, 1<<bits.Len(uint(n-1)))
	if size <= len(t.buckets) {
		return
	}
	t.buckets = make([]bucket, size)
	mask := uint64(size - 1)
	for i := range t.used {
		sl := t.slot(i)
		if sl.loc.File < 0 {
			continue
		}
		bk := &t.buckets[sl.hash&mask]
		sl.next = bk.head
		bk.head = i + 1
		bk.tags |= tagBit(sl.hash)
	}
}

// compact copies the live keys into a new arena with room for extra bytes more, dropping the removed ones.
func (t *Table) compact(extra int) {
	arena := make([]byte, 0, len(t.arena)-t.dead+extra)
	for i := range t.used {
		sl := t.slot(i)
		if sl.loc.File < 0 {
			continue
		}
		off := int64(len(arena))
		arena = append(arena, t.key(sl)...)
		sl.off = off
	}
	t.arena, t.dead = arena, 0
}
