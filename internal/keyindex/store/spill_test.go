package store

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/icewriter/iceberg/internal/keyindex/keyenc"
)

// checkStore compares every view of a Store (all, lookup, len) with the model.
func (m keyTableModel) checkStore(t *testing.T, s *Store, keys []string) {
	t.Helper()
	got := keyTableModel{}
	for k, l := range s.All() {
		got.add(string(k), l)
	}
	want := keyTableModel{}
	live := 0
	for k, locs := range m {
		if len(locs) > 0 {
			want[k] = sortedLocs(locs)
			live += len(locs)
		}
	}
	for k, locs := range got {
		got[k] = sortedLocs(locs)
	}
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("store holds %v, want %v", got, want)
	}
	for _, k := range keys {
		locs, err := s.Lookup(nil, []byte(k))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := sortedLocs(locs), sortedLocs(m[k]); !slices.Equal(got, want) {
			t.Fatalf("lookup(%q) = %v, want %v", k, got, want)
		}
	}
	if s.Len() != live {
		t.Fatalf("%d rows, want %d", s.Len(), live)
	}
	if s.err != nil {
		t.Fatal(s.err)
	}
}

// checkTiers fails the test unless the store's runs are as compactRuns leaves them: each holds live records, no
// size tier holds more than spillTierRuns runs, and spilledBytes is the runs' size.
func checkTiers(t *testing.T, s *Store) {
	t.Helper()
	tiers := map[int]int{}
	var size int64
	for _, r := range s.runs {
		if r.n == r.ndel {
			t.Fatalf("a run of %d records, all deleted, kept", r.n)
		}
		if tiers[runTier(r.n-r.ndel)]++; tiers[runTier(r.n-r.ndel)] > spillTierRuns {
			t.Fatalf("tier %d holds more than %d runs: %v", runTier(r.n-r.ndel), spillTierRuns, tiers)
		}
		size += r.size
	}
	if size != s.spilledBytes {
		t.Fatalf("runs of %d bytes, spilledBytes %d", size, s.spilledBytes)
	}
}

// TestKeyStoreSpillModel drives a Store whose table spills to a run whenever it holds more than 2 KiB, so
// that rows live in the table and in runs of several size tiers, merged by tier every few spills, with random
// adds (duplicates included), removes, removeLoc, forget and lookups of keys inline in a record and longer
// ones, and compares it with a map: with xxh3, with hashes folded onto four values and with one hash for all
// (a lookup then reads every block of a run). The run files are unlinked while open: the spill directory
// stays empty.
func TestKeyStoreSpillModel(t *testing.T) {
	for _, c := range modelHashes {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(3, 4))
			dir := t.TempDir()
			s := New()
			s.hash, s.Dir = c.hash, dir
			defer s.Close()
			m := keyTableModel{}
			var keys []string
			for i := range 300 {
				var b []byte
				b = binary.LittleEndian.AppendUint64(append(b, 1), uint64(i))
				switch i % 3 {
				case 0: // longer than a record holds inline, and keys that are prefixes of others
					b = append(b, fmt.Sprintf("-%d-a-longer-key", i)...)
				case 1:
					b = append(b, fmt.Sprint(i%100)...)
				}
				keys = append(keys, string(b), string(b[:len(b)-1]))
			}
			spills, merges, maxRuns := 0, 0, 0
			m.drive(t, &s, rng, keys, 4000, 6, 4, func(step int) {
				if s.Table.Size() > 2<<10 {
					runs := len(s.runs)
					if err := s.Spill(); err != nil {
						t.Fatal(err)
					}
					spills++
					if len(s.runs) <= runs {
						merges++
					}
					maxRuns = max(maxRuns, len(s.runs))
					if s.Table.Len() != 0 {
						t.Fatalf("after a spill: %d rows in the table", s.Table.Len())
					}
					checkTiers(t, &s)
				}
				if step%200 == 0 {
					m.checkStore(t, &s, keys)
				}
			})
			m.checkStore(t, &s, keys)
			t.Logf("%d spills, %d merges, up to %d runs", spills, merges, maxRuns)
			if spills < 20 || merges < 3 || maxRuns <= spillTierRuns {
				t.Fatalf("%d spills, %d merges, up to %d runs: the model did not exercise the runs' tiers", spills, merges, maxRuns)
			}
			if ents, err := os.ReadDir(dir); err != nil || (len(ents) > 0 && s.runs[0].name == "") {
				t.Fatalf("spill directory holds %d files (%v): runs were not unlinked", len(ents), err)
			}
		})
	}
}

// TestKeyStoreTieredMerge: 64 spills of 100 new keys each (6,400 in all, none removed) are merged by size tier:
// merges write each record about once per tier it climbs (from a spill's tier to the tier of all the keys:
// three here; 11,000 records measured), where merging every run whenever there were more than four wrote 49,500
// (each merge rewrote every key spilled so far). Every key is still found where it was added.
func TestKeyStoreTieredMerge(t *testing.T) {
	const spills, perSpill = 64, 100
	s := New()
	s.Dir = t.TempDir()
	defer s.Close()
	m := keyTableModel{}
	var keys []string
	for i := range spills * perSpill {
		k := string(keyenc.AppendInt(nil, int64(i)))
		l := Loc{File: int32(i / perSpill), Pos: int32(i % perSpill)}
		s.Add([]byte(k), l)
		m.add(k, l)
		keys = append(keys, k)
		if (i+1)%perSpill == 0 {
			if err := s.Spill(); err != nil {
				t.Fatal(err)
			}
			checkTiers(t, &s)
		}
	}
	m.checkStore(t, &s, keys)
	n := int64(spills * perSpill)
	climbed := int64(runTier(spills*perSpill) - runTier(perSpill))
	t.Logf("%d runs, merges wrote %d records (%.1f per key)", len(s.runs), s.merged, float64(s.merged)/float64(n))
	if s.merged > climbed*n {
		t.Fatalf("merges wrote %d records for %d keys: more than once per tier climbed (%d)", s.merged, n, climbed)
	}
}

// BenchmarkKeyStoreSpilled removes the keys of an upsert stream with 10% updates (one key in ten held, nine new)
// from 100,000 int64 keys: held in memory (a Table) and spilled to four runs plus the table (a Store),
// alternately in the same iterations, and reports x-memory: the spilled store's time over the in-memory one's
// (the price of a lookup past the budget; lower is better).
func BenchmarkKeyStoreSpilled(b *testing.B) {
	const keys, lookups = 100_000, 20_000
	key := func(i int) []byte { return keyenc.AppendInt(nil, int64(i)) }
	fill := func(add func([]byte, Loc), spill func()) {
		for i := range keys {
			add(key(i), Loc{File: int32(i / 1000), Pos: int32(i % 1000)})
			if spill != nil && (i+1)%(keys/5) == 0 && i+1 < keys {
				spill()
			}
		}
	}
	probe := make([][]byte, lookups)
	for i := range probe {
		if i%10 == 0 {
			probe[i] = key(i * 5 % keys) // held
		} else {
			probe[i] = key(keys + i) // new
		}
	}
	var memTime, spillTime time.Duration
	var dst []Loc
	for b.Loop() {
		b.StopTimer()
		kt := NewTable()
		fill(kt.Add, nil)
		s := New()
		s.Dir = b.TempDir()
		fill(s.Add, func() {
			if err := s.Spill(); err != nil {
				b.Fatal(err)
			}
		})
		b.StartTimer()
		start := time.Now()
		for _, k := range probe {
			dst = kt.Remove(dst[:0], k)
		}
		memTime += time.Since(start)
		start = time.Now()
		for _, k := range probe {
			dst = s.Remove(dst[:0], k)
		}
		spillTime += time.Since(start)
		if s.err != nil || len(s.runs) != 4 {
			b.Fatalf("%d runs, %v", len(s.runs), s.err)
		}
		s.Close()
	}
	b.ReportMetric(float64(lookups)*float64(b.N)/spillTime.Seconds(), "spilled-lookups/s")
	b.ReportMetric(spillTime.Seconds()/memTime.Seconds(), "x-memory")
}
