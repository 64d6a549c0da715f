package store

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"iter"
	"math/bits"
	"os"
	"slices"
	"sort"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/icewriter/iceberg/internal/encode"
)

// Store is the key index's storage: the in-memory Table, which takes every add, plus the runs it spilled
// to local disk when the index passed its memory budget (see docs/keyindex-spill.md). A spilled key costs the
// index about 1.4 bytes of memory (its share of a bloom filter, a fence per spillBlock records, a deleted bit)
// instead of ~50 bytes, so an
// index over its budget keeps placing keys instead of turning off (the writer then fell back to equality
// deletes). Runs live on local disk, not in the table: the index is a per-writer cache rebuilt at every open,
// and a lookup on the commit path must cost a pread, not a GET.
//
// Lookups consult the table, then the runs newest first; a key held by several rows (a Write of a key already
// written) may have rows in several parts. An I/O error of a run is kept (Err, the first one): from then on
// the index cannot tell which rows it misses, and the key index turns itself off or fails the run.
type Store struct {
	Table
	// Dir is where runs are created ("": os.TempDir()).
	Dir  string
	runs []*run // oldest first
	err  error
	// spilledBytes is the size of the runs' files.
	spilledBytes int64
	// merged counts the records merges wrote (their write amplification, for tests and benchmarks).
	merged int64
}

// run is an immutable, sorted spill of the Table: n records of spillRecBytes sorted by hash, then the key
// area (the keys longer than spillInline, in record order, so a merge reads both areas sequentially). In memory
// it keeps the hash of every spillBlock-th record (fences), a deleted bit per record and a bloom filter of its
// hashes (Parquet's split-block filter, about 1.2 bytes a key at encode.BloomFPP), so that a key the run does not hold
// (most keys of an upsert stream are new) costs no read.
type run struct {
	f       *os.File
	name    string // the file's name while it still has one (not unlinked: removed at close)
	n       int
	keysOff int64
	size    int64
	fences  []uint64
	deleted []uint64
	ndel    int
	bloom   metadata.BloomFilterBuilder
}

const (
	// spillRecBytes is a record: hash (8), file (4), pos (4), key length (4) and the key inline when it is at most
	// spillInline bytes (an int64 key is 9), else its offset in the key area.
	spillRecBytes = 32
	spillInline   = 12
	// spillBlock is the records a lookup reads with one pread (4 KiB) and a fence covers.
	spillBlock = 128
	// spillTierRuns is the runs of one size tier (runTier) the store keeps before merging them into one: a run
	// costs a lookup a bloom filter probe, and a pread when the filter says maybe.
	spillTierRuns = 4
)

// errKeyStore marks an I/O failure of the key index's spilled runs.
var errKeyStore = errors.New("iceberg: key index spill")

// CheckDir reports a spill directory the store cannot create its runs in (missing, not a directory, not
// writable), so that the writer fails at its start instead of at the first spill, which would turn the index off
// in the middle of a stream. "" (os.TempDir()) is not checked.
func CheckDir(dir string) error {
	if dir == "" {
		return nil
	}
	f, err := os.CreateTemp(dir, "icewriter-keys-*")
	if err != nil {
		return fmt.Errorf("cannot create the key index's spill files in %q: %w", dir, err)
	}
	if err := errors.Join(f.Close(), os.Remove(f.Name())); err != nil {
		return fmt.Errorf("cannot remove a spill file from %q: %w", dir, err)
	}
	return nil
}

// New returns an empty store whose runs go to os.TempDir() (set Dir for another directory).
func New() Store { return Store{Table: NewTable()} }

// Size returns the memory the store holds: the table's, the runs' fences and deleted bitsets.
func (s *Store) Size() int64 {
	n := s.Table.Size()
	for _, r := range s.runs {
		n += int64(cap(r.fences))*8 + int64(cap(r.deleted))*8 + r.bloom.Size()
	}
	return n
}

// Len returns the rows indexed.
func (s *Store) Len() int {
	n := s.live
	for _, r := range s.runs {
		n += r.n - r.ndel
	}
	return n
}

// Err returns the first I/O error of a run, wrapped: from then on the store cannot tell which rows it misses.
func (s *Store) Err() error { return s.err }

// SpilledBytes returns the size of the runs' files.
func (s *Store) SpilledBytes() int64 { return s.spilledBytes }

func (s *Store) fail(err error) {
	if s.err == nil {
		s.err = fmt.Errorf("%w: %w", errKeyStore, err)
	}
}

// Remove deletes every row of key and appends their locations to dst.
func (s *Store) Remove(dst []Loc, key []byte) []Loc {
	dst = s.Table.Remove(dst, key)
	if len(s.runs) == 0 {
		return dst
	}
	h := s.hash(key)
	for i := len(s.runs) - 1; i >= 0; i-- {
		err := s.runs[i].match(h, key, func(rec int, loc Loc) bool {
			s.runs[i].markDeleted(rec)
			dst = append(dst, loc)
			return true
		})
		if err != nil {
			s.fail(err)
		}
	}
	return dst
}

// RemoveLoc deletes the row of key at loc, if the store holds it.
func (s *Store) RemoveLoc(key []byte, loc Loc) bool {
	if s.Table.RemoveLoc(key, loc) {
		return true
	}
	h := s.hash(key)
	found := false
	for i := len(s.runs) - 1; i >= 0 && !found; i-- {
		err := s.runs[i].match(h, key, func(rec int, l Loc) bool {
			if l != loc {
				return true
			}
			s.runs[i].markDeleted(rec)
			found = true
			return false
		})
		if err != nil {
			s.fail(err)
		}
	}
	return found
}

// Lookup appends the locations of key's rows to dst. A run's read error is returned, not kept (Err): a lookup
// changes nothing, and leaves the failure to the next change of the store to report.
func (s *Store) Lookup(dst []Loc, key []byte) ([]Loc, error) {
	dst = s.Table.Lookup(dst, key)
	if len(s.runs) == 0 {
		return dst, nil
	}
	h := s.hash(key)
	for i := len(s.runs) - 1; i >= 0; i-- {
		if err := s.runs[i].match(h, key, func(_ int, l Loc) bool { dst = append(dst, l); return true }); err != nil {
			return dst, err
		}
	}
	return dst, nil
}

// Forget removes every row of the files gone reports, and returns how many: the runs are scanned whole (a
// compaction's rebase, rare).
func (s *Store) Forget(gone func(file int32) bool) int {
	n := s.Table.Forget(gone)
	for _, r := range s.runs {
		for rec, err := range r.records() {
			if err != nil {
				s.fail(err)
				break
			}
			if !r.isDeleted(rec.i) && gone(rec.loc.File) {
				r.markDeleted(rec.i)
				n++
			}
		}
	}
	return n
}

// All yields every indexed row: its key (valid until the next call) and location.
func (s *Store) All() iter.Seq2[[]byte, Loc] {
	return func(yield func([]byte, Loc) bool) {
		for k, l := range s.Table.All() {
			if !yield(k, l) {
				return
			}
		}
		for _, r := range s.runs {
			for rec, err := range r.records() {
				if err != nil {
					s.fail(err)
					return
				}
				if !r.isDeleted(rec.i) && !yield(rec.key, rec.loc) {
					return
				}
			}
		}
	}
}

// Spill writes the table's rows as a new run and empties the table (its memory goes back: the budget counts
// capacity), then merges runs of one size tier (compactRuns).
func (s *Store) Spill() error {
	if s.live == 0 {
		return nil
	}
	order := make([]int32, 0, s.live)
	for i := range s.used {
		if s.slot(i).loc.File >= 0 {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int32) int {
		sa, sb := s.slot(a), s.slot(b)
		if sa.hash != sb.hash {
			if sa.hash < sb.hash {
				return -1
			}
			return 1
		}
		return bytes.Compare(s.key(sa), s.key(sb))
	})
	w, err := newRunWriter(s.Dir, len(order))
	if err != nil {
		return err
	}
	for _, i := range order {
		sl := s.slot(i)
		if err := w.add(sl.hash, s.key(sl), sl.loc); err != nil {
			w.abort()
			return err
		}
	}
	r, err := w.finish()
	if err != nil {
		return err
	}
	s.runs = append(s.runs, r)
	s.spilledBytes += r.size
	s.Table = Table{hash: s.hash}
	return s.compactRuns()
}

// runTier is the size tier of a run of live records: runs within a factor of four of each other share a tier
// (tier t holds 4^t to 4^(t+1)-1 records); -1 for a run without live records.
func runTier(live int) int {
	if live <= 0 {
		return -1
	}
	return (bits.Len(uint(live)) - 1) / 2
}

// compactRuns drops the runs whose records are all deleted and merges the runs of any tier that holds more than
// spillTierRuns, until none does. Merging by size tier (as LSM trees' size-tiered compaction does) rewrites a
// record about once per tier it climbs, log4 of the spilled records over a spill's, where merging every run
// whenever there were too many rewrote the whole spilled index every few spills (quadratic in spills). Tiers
// count live records, so a run that upserts and deletes thinned out sinks to a lower tier and is merged with
// the smaller runs there. Runs of every tier stay: at most spillTierRuns per tier.
func (s *Store) compactRuns() error {
	for {
		kept := s.runs[:0]
		for _, r := range s.runs {
			if r.n == r.ndel {
				s.spilledBytes -= r.size
				r.close()
				continue
			}
			kept = append(kept, r)
		}
		clear(s.runs[len(kept):])
		s.runs = kept
		byTier := map[int][]int{}
		var pick []int
		for i, r := range s.runs {
			t := runTier(r.n - r.ndel)
			byTier[t] = append(byTier[t], i)
			if len(byTier[t]) > spillTierRuns {
				pick = byTier[t]
				break
			}
		}
		if pick == nil {
			return nil
		}
		if err := s.merge(pick); err != nil {
			return err
		}
	}
}

// merge replaces the runs at the positions pick (ascending) by one in the place of the first, dropping their
// deleted records: a k-way merge by hash reading each run sequentially. On error the runs stay as they were.
func (s *Store) merge(pick []int) error {
	runs := make([]*run, len(pick))
	live := 0
	for i, p := range pick {
		runs[i] = s.runs[p]
		live += runs[i].n - runs[i].ndel
	}
	w, err := newRunWriter(s.Dir, live)
	if err != nil {
		return err
	}
	type cursor struct {
		r    *run
		next func() (spillRecord, error, bool)
		stop func()
		cur  spillRecord
		ok   bool
	}
	cs := make([]*cursor, len(runs))
	defer func() {
		for _, c := range cs {
			if c != nil { // nil: a run before it failed to start
				c.stop()
			}
		}
	}()
	advance := func(c *cursor) error {
		for {
			rec, err, ok := c.next()
			if err != nil {
				return err
			}
			if !ok || !c.r.isDeleted(rec.i) {
				c.cur, c.ok = rec, ok
				return nil
			}
		}
	}
	for i, r := range runs {
		next, stop := iter.Pull2(r.records())
		cs[i] = &cursor{r: r, next: next, stop: stop}
		if err := advance(cs[i]); err != nil {
			w.abort()
			return err
		}
	}
	for {
		var min *cursor
		for _, c := range cs {
			if c.ok && (min == nil || c.cur.hash < min.cur.hash) {
				min = c
			}
		}
		if min == nil {
			break
		}
		if err := w.add(min.cur.hash, min.cur.key, min.cur.loc); err != nil {
			w.abort()
			return err
		}
		if err := advance(min); err != nil {
			w.abort()
			return err
		}
	}
	r, err := w.finish()
	if err != nil {
		return err
	}
	s.merged += int64(r.n)
	s.spilledBytes += r.size
	for _, old := range runs {
		s.spilledBytes -= old.size
		old.close()
	}
	s.runs[pick[0]] = r
	for _, p := range slices.Backward(pick[1:]) {
		s.runs = slices.Delete(s.runs, p, p+1)
	}
	return nil
}

// Close closes (and removes) the runs' files.
func (s *Store) Close() {
	for _, r := range s.runs {
		r.close()
	}
	s.runs, s.spilledBytes = nil, 0
}

// runWriter writes a run of a known number of records: records from offset 0, long keys after them.
type runWriter struct {
	f      *os.File
	name   string
	recs   *bufio.Writer
	keys   *bufio.Writer
	n, i   int
	keyLen int64
	fences []uint64
	bloom  metadata.BloomFilterBuilder
	buf    [spillRecBytes]byte
}

func newRunWriter(dir string, n int) (*runWriter, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	f, err := os.CreateTemp(dir, "icewriter-keys-*")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errKeyStore, err)
	}
	w := &runWriter{f: f, n: n, fences: make([]uint64, 0, (n+spillBlock-1)/spillBlock),
		bloom: metadata.NewBloomFilterFromNDVAndFPP(uint32(min(n, 1<<30)), encode.BloomFPP, 1<<30, memory.DefaultAllocator)}
	// Unlinked right away (Unix): the descriptor is the only reference, so a crash leaves nothing behind. Where
	// an open file cannot be removed, close removes it.
	if os.Remove(f.Name()) != nil {
		w.name = f.Name()
	}
	w.recs = bufio.NewWriterSize(io.NewOffsetWriter(f, 0), 64<<10)
	w.keys = bufio.NewWriterSize(io.NewOffsetWriter(f, int64(n)*spillRecBytes), 64<<10)
	return w, nil
}

func (w *runWriter) add(h uint64, key []byte, loc Loc) error {
	if w.i%spillBlock == 0 {
		w.fences = append(w.fences, h)
	}
	w.bloom.InsertHash(h)
	b := w.buf[:]
	clear(b)
	binary.LittleEndian.PutUint64(b[0:], h)
	binary.LittleEndian.PutUint32(b[8:], uint32(loc.File))
	binary.LittleEndian.PutUint32(b[12:], uint32(loc.Pos))
	binary.LittleEndian.PutUint32(b[16:], uint32(len(key)))
	if len(key) <= spillInline {
		copy(b[20:], key)
	} else {
		binary.LittleEndian.PutUint64(b[20:], uint64(w.keyLen))
		if _, err := w.keys.Write(key); err != nil {
			return fmt.Errorf("%w: %w", errKeyStore, err)
		}
		w.keyLen += int64(len(key))
	}
	w.i++
	if _, err := w.recs.Write(b); err != nil {
		return fmt.Errorf("%w: %w", errKeyStore, err)
	}
	return nil
}

func (w *runWriter) finish() (*run, error) {
	if w.i != w.n {
		w.abort()
		return nil, fmt.Errorf("%w: run of %d records got %d", errKeyStore, w.n, w.i)
	}
	if err := errors.Join(w.recs.Flush(), w.keys.Flush()); err != nil {
		w.abort()
		return nil, fmt.Errorf("%w: %w", errKeyStore, err)
	}
	return &run{f: w.f, name: w.name, n: w.n, keysOff: int64(w.n) * spillRecBytes,
		size: int64(w.n)*spillRecBytes + w.keyLen, fences: w.fences, deleted: make([]uint64, (w.n+63)/64),
		bloom: w.bloom}, nil
}

func (w *runWriter) abort() {
	w.bloom.Release()
	_ = w.f.Close()
	if w.name != "" {
		_ = os.Remove(w.name)
	}
}

func (r *run) close() {
	r.bloom.Release()
	_ = r.f.Close()
	if r.name != "" {
		_ = os.Remove(r.name)
	}
}

func (r *run) isDeleted(i int) bool { return r.deleted[i/64]&(1<<(i%64)) != 0 }

func (r *run) markDeleted(i int) {
	if !r.isDeleted(i) {
		r.deleted[i/64] |= 1 << (i % 64)
		r.ndel++
	}
}

// spillRecord is a decoded record: its ordinal, hash, location and key (valid until the next record).
type spillRecord struct {
	i    int
	hash uint64
	loc  Loc
	key  []byte
}

// match calls f with each live record of key (hash h) until f returns false: the fences name the first block
// that can hold h, and records are read a block per pread until their hash passes h.
func (r *run) match(h uint64, key []byte, f func(rec int, loc Loc) bool) error {
	if r.n == r.ndel || !r.bloom.(metadata.BloomFilter).CheckHash(h) {
		return nil
	}
	// The first block whose first hash is at least h; h's records may start in the block before it.
	b := sort.Search(len(r.fences), func(i int) bool { return r.fences[i] >= h })
	if b > 0 {
		b--
	}
	var block [spillBlock * spillRecBytes]byte
	var kbuf []byte
	for i := b * spillBlock; i < r.n; {
		cnt := min(spillBlock, r.n-i)
		if _, err := r.f.ReadAt(block[:cnt*spillRecBytes], int64(i)*spillRecBytes); err != nil {
			return err
		}
		for j := range cnt {
			rec := block[j*spillRecBytes : (j+1)*spillRecBytes]
			rh := binary.LittleEndian.Uint64(rec)
			if rh > h {
				return nil
			}
			if rh < h || r.isDeleted(i+j) {
				continue
			}
			klen := int(binary.LittleEndian.Uint32(rec[16:]))
			if klen != len(key) {
				continue
			}
			k := rec[20 : 20+min(klen, spillInline)]
			if klen > spillInline {
				kbuf = slices.Grow(kbuf[:0], klen)[:klen]
				if _, err := r.f.ReadAt(kbuf, r.keysOff+int64(binary.LittleEndian.Uint64(rec[20:]))); err != nil {
					return err
				}
				k = kbuf
			}
			if !bytes.Equal(k, key) {
				continue
			}
			loc := Loc{File: int32(binary.LittleEndian.Uint32(rec[8:])), Pos: int32(binary.LittleEndian.Uint32(rec[12:]))}
			if !f(i+j, loc) {
				return nil
			}
		}
		i += cnt
	}
	return nil
}

// records yields every record in order (deleted ones too), reading both areas sequentially.
func (r *run) records() iter.Seq2[spillRecord, error] {
	return func(yield func(spillRecord, error) bool) {
		recs := bufio.NewReaderSize(io.NewSectionReader(r.f, 0, r.keysOff), 64<<10)
		keys := bufio.NewReaderSize(io.NewSectionReader(r.f, r.keysOff, r.size-r.keysOff), 64<<10)
		var b [spillRecBytes]byte
		var kbuf []byte
		for i := range r.n {
			if _, err := io.ReadFull(recs, b[:]); err != nil {
				yield(spillRecord{}, fmt.Errorf("%w: %w", errKeyStore, err))
				return
			}
			klen := int(binary.LittleEndian.Uint32(b[16:]))
			var key []byte
			if klen <= spillInline {
				key = append(kbuf[:0], b[20:20+klen]...)
			} else {
				key = slices.Grow(kbuf[:0], klen)[:klen]
				if _, err := io.ReadFull(keys, key); err != nil {
					yield(spillRecord{}, fmt.Errorf("%w: %w", errKeyStore, err))
					return
				}
			}
			kbuf = key
			rec := spillRecord{i: i, hash: binary.LittleEndian.Uint64(b[:]), key: key,
				loc: Loc{File: int32(binary.LittleEndian.Uint32(b[8:])), Pos: int32(binary.LittleEndian.Uint32(b[12:]))}}
			if !yield(rec, nil) {
				return
			}
		}
	}
}
