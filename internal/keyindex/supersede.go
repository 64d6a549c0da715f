package keyindex

import (
	"bytes"

	"github.com/icewriter/iceberg/internal/keyindex/keyenc"
)

// Resolution inside one batch: which rows a later change of their key supersedes, and whether two batches'
// key sets meet.

// RowKeys are the keys of a batch's rows, by ordinal: each row's integer when the key is one integer column
// (Ints), else its encoded key (keyenc's encoding), row ord's at Bytes[Offs[ord]:Offs[ord+1]].
type RowKeys struct {
	Ints  []int64
	Bytes []byte
	Offs  []int
}

// Same reports whether rows a and b have one key.
func (k *RowKeys) Same(a, b int) bool {
	if k.Ints != nil {
		return k.Ints[a] == k.Ints[b]
	}
	return bytes.Equal(k.Bytes[k.Offs[a]:k.Offs[a+1]], k.Bytes[k.Offs[b]:k.Offs[b+1]])
}

// Supersede marks in dropped the rows of a batch that a later upsert or delete of their key supersedes, and
// returns the last row that upserts or deletes each key, from the last row to the first. Row ord's key hashes
// to hashes[ord] and its operation is kinds[ord] (insert: a row that adds itself without replacing its key's);
// keys are the rows' keys, compared when hashes are equal; changed is how many rows upsert or delete.
//
// One pass from the last row to the first looks each row up once in an open-addressing table of the last row
// that upserts or deletes each key (slot: row+1, 0 empty), probed from the key's hash and checked against the
// hash, then the key: keys sharing a hash only probe further; cheaper per row than a Go map keyed by the hash.
func Supersede[K comparable](hashes []uint64, kinds []K, insert K, changed int, keys *RowKeys, dropped []bool) []int32 {
	lasts := make([]int32, keyenc.TableSize(changed))
	mask := uint64(len(lasts) - 1)
	distinct := make([]int32, 0, min(changed, 1<<16))
	for ord := len(hashes) - 1; ord >= 0; ord-- {
		h := hashes[ord]
		s := h & mask
		for ; lasts[s] != 0; s = (s + 1) & mask {
			if last := int(lasts[s] - 1); hashes[last] == h && keys.Same(last, ord) {
				dropped[ord] = true
				break
			}
		}
		if !dropped[ord] && kinds[ord] != insert {
			lasts[s] = int32(ord + 1)
			distinct = append(distinct, int32(ord))
		}
	}
	return distinct
}

// Intersects reports whether two key sets (key hashes) share a key: run formation starts a new segment when a
// batch upserts or deletes a key written earlier in the segment.
func Intersects[A, B any](a map[uint64]A, b map[uint64]B) bool {
	if len(a) <= len(b) {
		for k := range a {
			if _, ok := b[k]; ok {
				return true
			}
		}
		return false
	}
	for k := range b {
		if _, ok := a[k]; ok {
			return true
		}
	}
	return false
}

// IntersectsAny reports whether a shares a key with any of sets.
func IntersectsAny[A, B any](a map[uint64]A, sets []map[uint64]B) bool {
	for _, b := range sets {
		if Intersects(a, b) {
			return true
		}
	}
	return false
}
