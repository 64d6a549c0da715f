package iceberg

import (
	"maps"
	"slices"
	"strings"

	ice "github.com/apache/iceberg-go"
)

// What the key index holds besides its key store, and how its budget counts it.

// fileRef is what the key index keeps of a data file: what a position delete file or deletion vector for it
// names. An iceberg-go DataFile also holds every column's statistics (fileMetaBytes: 3.2 KiB on 2 columns, 27
// KiB on 64), which put a table of a few thousand wide files past the index's budget before any key.
type fileRef struct {
	path      string
	specID    int32
	partition map[int]any
}

// newFileRef keeps what the index needs of df, copied, so that nothing of df stays reachable through it.
func newFileRef(df ice.DataFile) fileRef {
	return fileRef{path: strings.Clone(df.FilePath()), specID: df.SpecID(), partition: maps.Clone(df.Partition())}
}

func (r fileRef) FilePath() string       { return r.path }
func (r fileRef) SpecID() int32          { return r.specID }
func (r fileRef) Partition() map[int]any { return r.partition }

// bytes estimates the memory a fileRef holds: the struct and its path, and a small map of the partition's
// values (TestFileRefMemory measures it).
func (r fileRef) bytes() int64 {
	n := int64(64 + len(r.path))
	if len(r.partition) > 0 {
		n += 256 + 48*int64(len(r.partition))
	}
	return n
}

// deleteFileBytes estimates what a delete file's metadata holds: iceberg-go's DataFile without column
// statistics (a deletion vector's) is about 1 KiB with its path; a position delete file's bounds hold the data
// file's path twice more.
func deleteFileBytes(d ice.DataFile) int64 { return 1<<10 + 3*int64(len(d.FilePath())) }

// memBytes estimates the memory the index holds for a data file besides its keys: what it keeps of the file's
// metadata (fileRef) and byPath's copy of its path, its deletion vector (about 2 bytes a
// deleted position: roaring's array containers, and its bitmap containers once denser), the delete files it
// replaces and those it applied, and the row ids it carries (12 bytes each). The vector and the ids grow with
// the keys upserts and deletes remove and the rows upserts carry, not only with files: the budget counts them
// so that an index cannot outgrow it by them.
func (f *indexedFile) memBytes() int64 {
	n := f.df.bytes() + int64(len(f.df.FilePath()))
	if f.dv != nil {
		n += 64 + 2*f.dv.Cardinality()
	}
	if f.dvFile != nil {
		n += deleteFileBytes(f.dvFile)
	}
	for _, d := range f.inherited {
		n += deleteFileBytes(d)
	}
	for p := range f.applied {
		n += 48 + int64(len(p))
	}
	return n + f.ids.bytes()
}

// recount counts the change of what a file's metadata holds (memBytes) since it was last counted.
func (idx *keyIndex) recount(f *indexedFile) {
	n := f.memBytes()
	idx.grow(n - f.mem)
	f.mem = n
}

// rowIDList is the explicit _row_id of some rows of a data file (the rows an upsert carried an id to): their
// positions, sorted, and ids. 12 bytes a row, exactly what the budget counts; a map[int32]int64 takes a 16-byte
// slot a row plus its control bytes and the slack of its load factor and growth.
type rowIDList struct {
	pos []int32
	id  []int64
}

func newRowIDList(m map[int32]int64) rowIDList {
	l := rowIDList{pos: make([]int32, 0, len(m)), id: make([]int64, len(m))}
	for p := range m {
		l.pos = append(l.pos, p)
	}
	slices.Sort(l.pos)
	for i, p := range l.pos {
		l.id[i] = m[p]
	}
	return l
}

func (l *rowIDList) get(pos int32) (int64, bool) {
	if i, ok := slices.BinarySearch(l.pos, pos); ok {
		return l.id[i], true
	}
	return 0, false
}

// drop forgets the ids of the rows at the positions dead reports (rows the index no longer holds: their ids
// are never asked for again).
func (l *rowIDList) drop(dead func(pos int32) bool) {
	j := 0
	for i, p := range l.pos {
		if !dead(p) {
			l.pos[j], l.id[j] = p, l.id[i]
			j++
		}
	}
	if j == len(l.pos) {
		return
	}
	if j == 0 {
		*l = rowIDList{}
		return
	}
	// Shrink once at most half is left: the budget counts capacity.
	if j <= cap(l.pos)/2 {
		l.pos, l.id = slices.Clone(l.pos[:j]), slices.Clone(l.id[:j])
		return
	}
	l.pos, l.id = l.pos[:j], l.id[:j]
}

func (l *rowIDList) bytes() int64 { return int64(cap(l.pos))*4 + int64(cap(l.id))*8 }
