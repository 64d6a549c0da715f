package store

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/icewriter/iceberg/internal/keyindex/keyenc"
)

// keyTableModel is what a Table must hold: each key's locations, as a set.
type keyTableModel map[string][]Loc

func (m keyTableModel) add(key string, l Loc) { m[key] = append(m[key], l) }

// check compares every view of the table (all, lookup, len, the arena's live bytes) with the model.
func (m keyTableModel) check(t *testing.T, kt *Table, keys []string) {
	t.Helper()
	got := keyTableModel{}
	for k, l := range kt.All() {
		got.add(string(k), l)
	}
	want := keyTableModel{}
	live, liveBytes := 0, 0
	for k, locs := range m {
		if len(locs) > 0 {
			want[k] = sortedLocs(locs)
			live += len(locs)
			liveBytes += len(k) * len(locs)
		}
	}
	for k, locs := range got {
		got[k] = sortedLocs(locs)
	}
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("table holds %v, want %v", got, want)
	}
	for _, k := range keys {
		if got, want := sortedLocs(kt.Lookup(nil, []byte(k))), sortedLocs(m[k]); !slices.Equal(got, want) {
			t.Fatalf("lookup(%q) = %v, want %v", k, got, want)
		}
	}
	if kt.Len() != live || len(kt.arena)-kt.dead != liveBytes {
		t.Fatalf("%d rows and %d live arena bytes, want %d and %d", kt.Len(), len(kt.arena)-kt.dead, live, liveBytes)
	}
	if kt.Len() > len(kt.buckets) {
		t.Fatalf("%d rows in %d buckets", kt.Len(), len(kt.buckets))
	}
}

// keyRows is what Table and Store share: the operations the model drives.
type keyRows interface {
	Add(key []byte, l Loc)
	Remove(dst []Loc, key []byte) []Loc
	RemoveLoc(key []byte, l Loc) bool
	Forget(gone func(file int32) bool) int
}

// drive applies steps random operations on keys to rows and to the model, checking each answer: adds (adds in
// ten, files of 50 rows), removes (two in ten), removeLoc (one in ten) and forget of a random file (one in ten,
// thinned to forgetShare of those: a store's forget scans its runs). after runs after every step.
func (m keyTableModel) drive(t *testing.T, rows keyRows, rng *rand.Rand, keys []string, steps, adds, forgetShare int, after func(step int)) {
	t.Helper()
	file, pos := int32(0), int32(0)
	var dst []Loc
	for step := range steps {
		key := keys[rng.IntN(len(keys))]
		switch op := rng.IntN(10); {
		case op < adds:
			l := Loc{File: file, Pos: pos}
			rows.Add([]byte(key), l)
			m.add(key, l)
			if pos++; pos == 50 {
				file, pos = file+1, 0
			}
		case op < 8:
			dst = rows.Remove(dst[:0], []byte(key))
			if got, want := sortedLocs(dst), sortedLocs(m[key]); !slices.Equal(got, want) {
				t.Fatalf("step %d: remove(%q) = %v, want %v", step, key, got, want)
			}
			delete(m, key)
		case op < 9:
			locs := m[key]
			if len(locs) == 0 {
				if rows.RemoveLoc([]byte(key), Loc{File: file, Pos: pos}) {
					t.Fatalf("step %d: removeLoc of a key not held found one", step)
				}
				break
			}
			i := rng.IntN(len(locs))
			if !rows.RemoveLoc([]byte(key), locs[i]) {
				t.Fatalf("step %d: removeLoc(%q, %v) found nothing", step, key, locs[i])
			}
			m[key] = slices.Delete(slices.Clone(locs), i, i+1)
		default:
			if rng.IntN(forgetShare) != 0 {
				break
			}
			gone := rng.Int32N(file + 1)
			n := 0
			for k, locs := range m {
				kept := slices.DeleteFunc(slices.Clone(locs), func(l Loc) bool { return l.File == gone })
				n += len(locs) - len(kept)
				m[k] = kept
			}
			if got := rows.Forget(func(f int32) bool { return f == gone }); got != n {
				t.Fatalf("step %d: forget removed %d rows, want %d", step, got, n)
			}
		}
		after(step)
	}
}

func sortedLocs(locs []Loc) []Loc {
	out := slices.Clone(locs)
	slices.SortFunc(out, func(a, b Loc) int {
		if a.File != b.File {
			return int(a.File - b.File)
		}
		return int(a.Pos - b.Pos)
	})
	return out
}

// modelHashes are the hashes the key models run with: xxh3, folded onto four values (every chain or block holds
// different keys of one full hash), and one hash for all.
var modelHashes = []struct {
	name string
	hash func([]byte) uint64
}{
	{"xxh3", keyenc.Hash},
	{"four hashes", func(b []byte) uint64 { return keyenc.Hash(b) & 3 }},
	{"one hash", func([]byte) uint64 { return 42 }},
	// xxh3 without its low 16 bits: every key in one bucket's chain, with tags (bucket.tags) of every kind.
	{"one bucket", func(b []byte) uint64 { return keyenc.Hash(b) &^ 0xffff }},
}

// TestKeyTableModel drives a Table with random adds (duplicates included), removes, removeLoc, forget and
// lookups of keys of several widths, and compares it with a map after every step: with xxh3, with hashes
// folded onto four values (every chain holds different keys of one full hash), and with one hash for all.
func TestKeyTableModel(t *testing.T) {
	for _, c := range modelHashes {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(1, 2))
			kt := NewTable()
			kt.hash = c.hash
			m := keyTableModel{}
			var keys []string
			for i := range 200 {
				var b []byte
				b = binary.LittleEndian.AppendUint64(append(b, 1), uint64(i))
				if i%3 == 0 { // another width, and keys that are prefixes of others
					b = append(b, fmt.Sprint(i)...)
				}
				keys = append(keys, string(b), string(b[:len(b)-1]))
			}
			m.drive(t, &kt, rng, keys, 3000, 5, 1, func(step int) {
				if step%100 == 0 {
					m.check(t, &kt, keys)
				}
			})
			m.check(t, &kt, keys)
		})
	}
}

// TestKeyTableGrowsByPages indexes rows across several slot pages, removes every other key and indexes them
// again (into freed slots, then new ones), and compares the table with a map after each step; a table of a few
// keys holds a few slots.
func TestKeyTableGrowsByPages(t *testing.T) {
	kt := NewTable()
	m := keyTableModel{}
	var keys []string
	for i := range 5*slotPage + 7 {
		keys = append(keys, string(keyenc.AppendInt(nil, int64(i))))
	}
	add := func(from, step int, file int32) {
		for i := from; i < len(keys); i += step {
			l := Loc{File: file, Pos: int32(i)}
			kt.Add([]byte(keys[i]), l)
			m.add(keys[i], l)
		}
	}
	small := NewTable() // a table of a few keys holds a few slots, not a page
	for _, k := range keys[:10] {
		small.Add([]byte(k), Loc{})
	}
	if small.capacity() != 16 {
		t.Fatalf("10 rows in %d slots, want 16", small.capacity())
	}
	add(0, 1, 0)
	m.check(t, &kt, keys)
	if len(kt.pages) != 6 {
		t.Fatalf("%d rows in %d pages, want 6", len(keys), len(kt.pages))
	}
	var dst []Loc
	for i := 0; i < len(keys); i += 2 {
		if dst = kt.Remove(dst[:0], []byte(keys[i])); len(dst) != 1 {
			t.Fatalf("remove(%d) = %v, want one row", i, dst)
		}
		delete(m, keys[i])
	}
	m.check(t, &kt, keys)
	add(0, 2, 1) // the freed slots take them
	add(0, 3, 2) // and new pages the rest
	m.check(t, &kt, keys)
}

// TestKeyTableArenaStaysBounded: an upsert stream replaces the same keys over and over; the arena is compacted
// so that it holds at most about twice the live keys' bytes, and size counts what the table holds.
func TestKeyTableArenaStaysBounded(t *testing.T) {
	kt := NewTable()
	var dst []Loc
	key := func(i int) []byte { return binary.LittleEndian.AppendUint64([]byte{1}, uint64(i)) }
	for round := range 50 {
		for i := range 1000 {
			dst = kt.Remove(dst[:0], key(i))
			kt.Add(key(i), Loc{File: int32(round), Pos: int32(i)})
		}
	}
	if live := 1000 * 9; len(kt.arena) > 2*live+1<<10 || cap(kt.arena) > 4*live+1<<11 {
		t.Fatalf("arena of %d bytes (capacity %d) for %d live bytes", len(kt.arena), cap(kt.arena), live)
	}
	if got, want := kt.Size(), int64(cap(kt.arena))+int64(kt.capacity())*SlotBytes+int64(len(kt.buckets))*bucketBytes; got != want {
		t.Fatalf("size %d, want %d", got, want)
	}
	if kt.used > 2048 {
		t.Fatalf("%d slots for 1,000 keys: removed slots are not reused", kt.used)
	}
}

// BenchmarkKeyTable indexes 100,000 int64 keys a file of 1,000 at a time and then removes a tenth of them, as
// a v2 upsert stream with 10% updates does, and reports x-map: the time of the same work on the index's former
// storage (a map from a string per key to a slice of locations), measured alternately in the same iterations,
// over the Table's. Goal: well above 1.
func BenchmarkKeyTable(b *testing.B) {
	const files, rows = 100, 1000
	lists := make([]keyenc.List, files)
	for f := range lists {
		for r := range rows {
			lists[f].Add(keyenc.AppendInt(nil, int64(f*rows+r)))
		}
	}
	var tableTime, mapTime time.Duration
	for b.Loop() {
		start := time.Now()
		kt := NewTable()
		var dst []Loc
		for f := range lists {
			kt.Reserve(rows, lists[f].Span(0, rows))
			for pos, k := range lists[f].All() {
				kt.Add(k, Loc{File: int32(f), Pos: int32(pos)})
			}
		}
		for f := range lists {
			for i := 0; i < rows; i += 10 {
				dst = kt.Remove(dst[:0], lists[f].Key(i))
			}
		}
		tableTime += time.Since(start)

		start = time.Now()
		m := map[string][]Loc{}
		for f := range lists {
			for pos, k := range lists[f].All() {
				m[string(k)] = append(m[string(k)], Loc{File: int32(f), Pos: int32(pos)})
			}
		}
		for f := range lists {
			for i := 0; i < rows; i += 10 {
				delete(m, string(lists[f].Key(i)))
			}
		}
		mapTime += time.Since(start)
	}
	b.ReportMetric(float64(files*rows)*float64(b.N)/tableTime.Seconds(), "rows/s")
	b.ReportMetric(mapTime.Seconds()/tableTime.Seconds(), "x-map")
}

// BenchmarkKeyTableRemove removes 20,000 keys, a tenth of them indexed, from a table of 1,000,000 int64 keys, as
// a commit of an upsert stream with 10% updates does on a grown table (most of its keys are new), and reports
// x-map: the time of the same removals from a map of the same keys (the index's former storage) over the
// Table's, alternately in the same iterations. Each pass removes other keys, so that what one pass read is
// not in the cache for the next, and the removed rows are put back after it. Goal: above 1.
func BenchmarkKeyTableRemove(b *testing.B) {
	const indexed, removed, rounds = 1_000_000, 20_000, 50
	kt, m := NewTable(), make(map[string][]Loc, indexed)
	kt.Reserve(indexed, indexed*8)
	for r := range indexed {
		loc := Loc{File: int32(r / 1000), Pos: int32(r % 1000)}
		k := keyenc.AppendInt(nil, int64(r))
		kt.Add(k, loc)
		m[string(k)] = append(m[string(k)], loc)
	}
	gones := make([]keyenc.List, rounds)
	rng := rand.New(rand.NewPCG(1, 2))
	for r := range gones {
		for i := range removed {
			k := int64(indexed + r*removed + i) // a new key
			if i%10 == 0 {
				k = rng.Int64N(indexed)
			}
			gones[r].Add(keyenc.AppendInt(nil, k))
		}
	}
	type row struct {
		key []byte
		loc Loc
	}
	var back []row
	var tableTime, mapTime time.Duration
	var dst []Loc
	round := 0
	for b.Loop() {
		gone := &gones[round%rounds]
		round++
		start := time.Now()
		for i := range gone.Len() {
			dst = kt.Remove(dst[:0], gone.Key(i))
			for _, l := range dst {
				back = append(back, row{gone.Key(i), l})
			}
		}
		tableTime += time.Since(start)
		n := len(back)
		for _, r := range back {
			kt.Add(r.key, r.loc)
		}
		back = back[:0]

		gone = &gones[round%rounds]
		round++
		start = time.Now()
		for i := range gone.Len() {
			k := gone.Key(i)
			if locs, ok := m[string(k)]; ok {
				delete(m, string(k))
				for _, l := range locs {
					back = append(back, row{k, l})
				}
			}
		}
		mapTime += time.Since(start)
		if n == 0 || len(back) == 0 {
			b.Fatalf("removed %d and %d rows, want some", n, len(back))
		}
		for _, r := range back {
			m[string(r.key)] = append(m[string(r.key)], r.loc)
		}
		back = back[:0]
	}
	b.ReportMetric(float64(removed)*float64(b.N)/tableTime.Seconds(), "keys/s")
	b.ReportMetric(mapTime.Seconds()/tableTime.Seconds(), "x-map")
}
