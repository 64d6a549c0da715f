package changes

import (
	"bytes"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/icewriter/iceberg/internal/conform"
	"github.com/icewriter/iceberg/internal/keyindex/keyenc"
	"github.com/zeebo/xxh3"
)

// Plan is what one call's changes come to once resolved per key: the rows to upsert (ascending), the rows
// whose key, or whose before-image key, is deleted, and the version of each key changed.
type Plan struct {
	upserts, delKeys, delBefore []int32
	// UpHashes and DelHashes are the key hash (Resolve's hash) of each row's key, in the order of upserts and
	// of delKeys then delBefore (the rows of the records Apply hands on): the key stage's resolve takes them
	// instead of hashing every key a second time.
	UpHashes, DelHashes []uint64
	keys                []xxh3.Uint128 // the Hash of each key changed, for the versions (with vers)
	vers                []int64        // the version of each key's last change (with a version column)
	upRows              []int32        // the row each key's last change upserts, -1 for a delete (with vers)
	skipped             int            // changes older than their key's version
}

// Resolve applies the call's changes in row order, per key: an upsert row upserts its key (deleting its
// before-image key first when that differs), a delete row deletes its key (its before-image key when the key
// is null); with versions, a change older than its key's last one is skipped. The last change of each key is
// what the plan keeps. Every row is checked, the superseded ones included. hash is the key stage's hash of a key's encoding (keyenc.Hash, unless a test makes keys collide).
func (cb *Batch) Resolve(vers *Versions, hash func([]byte) uint64) (*Plan, error) {
	keyEnc, err := keyenc.NewEncoder(cb.keys)
	if err != nil {
		return nil, err
	}
	var befEnc *keyenc.Encoder
	if cb.before != nil {
		if befEnc, err = keyenc.NewEncoder(cb.before); err != nil {
			return nil, err
		}
	}
	type entry struct {
		row         int32
		del, before bool
		ver         int64
		from, to    int32  // the key's bytes in keys
		hash        uint64 // the key's hash
	}
	// At most two changes per row (a before-image delete and an upsert); without a before image, one.
	most := cb.n
	if cb.before != nil {
		most *= 2
	}
	plan := &Plan{}
	if vers != nil {
		plan.keys = make([]xxh3.Uint128, 0, cb.n)
	}
	// The changes so far, one entry per key, found through an open-addressing table of entry ordinals (slot:
	// ordinal+1, 0 empty) probed from the key's hash and checked against the hash, then the key. A key is an
	// entry once, so keys sharing a hash only probe further (cheaper than a Go map keyed by the hash: BenchmarkApply).
	// The hash is the key stage's (hash), handed on with the rows so that the batch's resolve does not
	// hash them again; the version map keys on a 128-bit hash (Hash, no key bytes to check against),
	// computed only with versions and once per key of the call.
	// A key of one integer column without nulls, with no before image (a stream keyed by an id), is compared as
	// the row's integer (ints) and its encoding built from it; keys then holds nothing.
	var ints []int64
	if len(cb.keys) == 1 && cb.before == nil {
		ints, _ = keyenc.IntValues(cb.keys[0])
	}
	var keys []byte
	if ints == nil {
		keys = make([]byte, 0, cb.n*(1+8*len(cb.keys)))
	}
	ents := make([]entry, 0, cb.n)
	same := func(i int32, key []byte, row int32) bool {
		if ints != nil {
			return ints[ents[i].row] == ints[row]
		}
		return bytes.Equal(keys[ents[i].from:ents[i].to], key)
	}
	slots := make([]int32, keyenc.TableSize(most))
	mask := uint64(len(slots) - 1)
	change := func(key []byte, e entry) {
		h := hash(key)
		s := h & mask
		for ; slots[s] != 0; s = (s + 1) & mask {
			i := slots[s] - 1
			if ents[i].hash != h || !same(i, key, e.row) {
				continue
			}
			if cb.vers != nil && e.ver < ents[i].ver {
				plan.skipped++
				return
			}
			e.from, e.to, e.hash = ents[i].from, ents[i].to, h
			ents[i] = e
			return
		}
		if vers != nil {
			vh := Hash(key)
			if v, ok := vers.Get(vh); ok && e.ver < v {
				plan.skipped++
				return
			}
			plan.keys = append(plan.keys, vh)
		}
		if ints == nil {
			e.from = int32(len(keys))
			keys = append(keys, key...)
			e.to = int32(len(keys))
		}
		e.hash = h
		ents = append(ents, e)
		slots[s] = int32(len(ents))
	}
	appendKey := func(buf []byte, row int) []byte {
		if ints != nil {
			return keyenc.AppendInt(buf, ints[row])
		}
		return keyEnc.AppendKey(buf, row)
	}
	var kb, bb []byte
	for row := 0; row < cb.n; row++ {
		var ver int64
		if cb.vers != nil {
			ver = cb.vers[row]
		}
		keyNull := firstNull(cb.keys, row)
		hasBefore := false
		if cb.before != nil {
			switch n := firstNull(cb.before, row); {
			case n < 0:
				hasBefore = true
			case firstValid(cb.before, row) >= 0:
				return nil, conform.ColumnErr(cb.prefix+cb.keyNames[n], conform.ErrNullInRequired, "row %d: the before-image key is partly null", row)
			}
		}
		r := int32(row)
		if cb.kinds[row] == Delete {
			switch {
			case keyNull < 0:
				kb = appendKey(kb[:0], row)
				change(kb, entry{row: r, del: true, ver: ver})
			case hasBefore:
				bb = befEnc.AppendKey(bb[:0], row)
				change(bb, entry{row: r, del: true, before: true, ver: ver})
			default:
				return nil, conform.ColumnErr(cb.keyNames[keyNull], conform.ErrNullInRequired, "row %d: a delete's key is null and it has no before image", row)
			}
			continue
		}
		if keyNull >= 0 {
			return nil, conform.ColumnErr(cb.keyNames[keyNull], conform.ErrNullInRequired, "row %d: an upsert's key is null", row)
		}
		kb = appendKey(kb[:0], row)
		if hasBefore {
			if bb = befEnc.AppendKey(bb[:0], row); !bytes.Equal(bb, kb) {
				change(bb, entry{row: r, del: true, before: true, ver: ver})
			}
		}
		change(kb, entry{row: r, ver: ver})
	}
	if cb.vers != nil {
		plan.vers = make([]int64, len(ents))
		plan.upRows = make([]int32, len(ents))
	}
	// The upserted rows in row order (ents are in the order keys first appeared): marked, then collected. A
	// row upserts one key at most, so its entry's ordinal marks it (0: not upserted).
	upserted := make([]int32, cb.n)
	ups := 0
	var befHashes []uint64
	for i, e := range ents {
		switch {
		case !e.del:
			upserted[e.row] = int32(i + 1)
			ups++
		case e.before:
			plan.delBefore = append(plan.delBefore, e.row)
			befHashes = append(befHashes, e.hash)
		default:
			plan.delKeys = append(plan.delKeys, e.row)
			plan.DelHashes = append(plan.DelHashes, e.hash)
		}
		if plan.vers != nil {
			plan.vers[i], plan.upRows[i] = e.ver, -1
			if !e.del {
				plan.upRows[i] = e.row
			}
		}
	}
	plan.DelHashes = append(plan.DelHashes, befHashes...)
	if ups > 0 {
		plan.upserts = make([]int32, 0, ups)
		plan.UpHashes = make([]uint64, 0, ups)
		for row, ord := range upserted {
			if ord > 0 {
				plan.upserts = append(plan.upserts, int32(row))
				plan.UpHashes = append(plan.UpHashes, ents[ord-1].hash)
			}
		}
	}
	return plan, nil
}

// firstNull returns the first of cols that is null at row, or -1.
func firstNull(cols []arrow.Array, row int) int {
	for i, c := range cols {
		if c.IsNull(row) {
			return i
		}
	}
	return -1
}

// firstValid returns the first of cols that is not null at row, or -1.
func firstValid(cols []arrow.Array, row int) int {
	for i, c := range cols {
		if !c.IsNull(row) {
			return i
		}
	}
	return -1
}
