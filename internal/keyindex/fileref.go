package keyindex

import (
	"maps"
	"slices"
	"strings"

	ice "github.com/apache/iceberg-go"
)

// What the key index keeps of a data file besides its keys, and how its budget counts it.

// FileRef is what the key index keeps of a data file: what a position delete file or deletion vector for it
// names. An iceberg-go DataFile also holds every column's statistics (3.2 KiB on 2 columns, 27 KiB on 64),
// which put a table of a few thousand wide files past the index's budget before any key.
type FileRef struct {
	path      string
	specID    int32
	partition map[int]any
}

// NewFileRef keeps what the index needs of df, copied, so that nothing of df stays reachable through it.
func NewFileRef(df ice.DataFile) FileRef {
	return FileRef{path: strings.Clone(df.FilePath()), specID: df.SpecID(), partition: maps.Clone(df.Partition())}
}

// FilePath is the data file's path.
func (r FileRef) FilePath() string { return r.path }

// SpecID is the id of the data file's partition spec.
func (r FileRef) SpecID() int32 { return r.specID }

// Partition is the data file's partition values by field id.
func (r FileRef) Partition() map[int]any { return r.partition }

// Bytes estimates the memory a FileRef holds: the struct and its path, and a small map of the partition's
// values (the root package's TestFileMetadataMemory measures it).
func (r FileRef) Bytes() int64 {
	n := int64(64 + len(r.path))
	if len(r.partition) > 0 {
		n += 256 + 48*int64(len(r.partition))
	}
	return n
}

// DeleteFileBytes estimates what a delete file's metadata holds: iceberg-go's DataFile without column
// statistics (a deletion vector's) is about 1 KiB with its path; a position delete file's bounds hold the data
// file's path twice more.
func DeleteFileBytes(d ice.DataFile) int64 { return 1<<10 + 3*int64(len(d.FilePath())) }

// RowIDs is the explicit _row_id of some rows of a data file (the rows an upsert carried an id to): their
// positions, sorted, and ids. 12 bytes a row, exactly what the budget counts; a map[int32]int64 takes a 16-byte
// slot a row plus its control bytes and the slack of its load factor and growth.
type RowIDs struct {
	pos []int32
	id  []int64
}

// NewRowIDs returns the ids of m, by position.
func NewRowIDs(m map[int32]int64) RowIDs {
	l := RowIDs{pos: make([]int32, 0, len(m)), id: make([]int64, len(m))}
	for p := range m {
		l.pos = append(l.pos, p)
	}
	slices.Sort(l.pos)
	for i, p := range l.pos {
		l.id[i] = m[p]
	}
	return l
}

// Get returns the id of the row at pos, if the list holds it.
func (l *RowIDs) Get(pos int32) (int64, bool) {
	if i, ok := slices.BinarySearch(l.pos, pos); ok {
		return l.id[i], true
	}
	return 0, false
}

// Drop forgets the ids of the rows at the positions dead reports (rows the index no longer holds: their ids
// are never asked for again).
func (l *RowIDs) Drop(dead func(pos int32) bool) {
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
		*l = RowIDs{}
		return
	}
	// Shrink once at most half is left: the budget counts capacity.
	if j <= cap(l.pos)/2 {
		l.pos, l.id = slices.Clone(l.pos[:j]), slices.Clone(l.id[:j])
		return
	}
	l.pos, l.id = l.pos[:j], l.id[:j]
}

// Len is how many rows the list holds an id of.
func (l *RowIDs) Len() int { return len(l.pos) }

// Bytes is the memory the list holds: its capacity, 12 bytes a row.
func (l *RowIDs) Bytes() int64 { return int64(cap(l.pos))*4 + int64(cap(l.id))*8 }
