package keyindex

import (
	"slices"
	"testing"
)

// Supersede drops every row of a key but its last upsert or delete (inserts after it stay), and names each
// changed key's last row once, from the last row to the first, whether keys share a hash or not.
func TestSupersede(t *testing.T) {
	const ins, ups, del = 0, 1, 2
	keys := &RowKeys{Ints: []int64{1, 2, 1, 3, 2, 1, 4}}
	kinds := []int{ins, ins, ups, ins, del, ins, ins}
	for name, hash := range map[string]func(k int64) uint64{
		"distinct hashes": func(k int64) uint64 { return uint64(k) * 0x9e3779b97f4a7c15 },
		"one hash":        func(int64) uint64 { return 7 },
	} {
		t.Run(name, func(t *testing.T) {
			hashes := make([]uint64, len(keys.Ints))
			for i, k := range keys.Ints {
				hashes[i] = hash(k)
			}
			dropped := make([]bool, len(hashes))
			distinct := Supersede(hashes, kinds, ins, 2, keys, dropped)
			if want := []bool{true, true, false, false, false, false, false}; !slices.Equal(dropped, want) {
				t.Errorf("dropped %v, want %v", dropped, want)
			}
			if want := []int32{4, 2}; !slices.Equal(distinct, want) {
				t.Errorf("distinct %v, want %v", distinct, want)
			}
		})
	}
}

func TestIntersects(t *testing.T) {
	a := map[uint64]struct{}{1: {}, 2: {}}
	b := map[uint64]bool{3: true, 4: true, 5: true}
	if Intersects(a, b) || IntersectsAny(a, []map[uint64]bool{b, {6: true}}) {
		t.Fatal("disjoint sets intersect")
	}
	if !Intersects(b, map[uint64]struct{}{5: {}}) || !IntersectsAny(a, []map[uint64]bool{b, {2: true}}) {
		t.Fatal("sets sharing a key do not intersect")
	}
}
