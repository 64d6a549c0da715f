package keyindex

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/icewriter/iceberg/internal/keyindex/keyenc"
)

// RowMap says which of a batch's written rows (its resolved data, in order) each of its new data files holds,
// so that the key index learns the files' keys from the batch instead of reading their key columns back after
// every commit (a GET per file on object storage).
//
// It rests on how iceberg-go v0.7.0 writes (table/rolling_data_writer.go, clustered_writer.go, arrow_utils.go):
// one rolling writer per partition takes its records in order and fills its files one after another, emitting
// each as it closes; an unpartitioned write is one rolling writer; a clustered write takes the partitions of a
// record in the order of their first row, each partition's rows in record order, one rolling writer at a time.
// So an unpartitioned batch's files (writeParts returns them part after part) hold its rows in order, and a
// partitioned batch's files hold the rows of each partition group in the order the encoder handed them, group
// after group. The one reordering is a table's sort order (each record is sorted): a sorted table gets no map
// (MapsRows). Split checks what it can against the files themselves (row counts, and on a partitioned table
// one partition value per group, a different one per group), so a change of that behaviour upstream costs a
// read of the files, never a wrong index.
type RowMap struct {
	// order lists row numbers in the order the files hold them (nil: the rows in order, unpartitioned); ends
	// are where each partition group's rows end in order.
	order []int32
	ends  []int
}

// Unpartitioned is the map of an unpartitioned batch's files.
var Unpartitioned = &RowMap{}

// NewRowMap is the map of files that hold the rows in order, partition group after group; ends are where each
// group's rows end in order (internal/encode's RowOrder).
func NewRowMap(order []int32, ends []int) *RowMap { return &RowMap{order: order, ends: ends} }

// Add appends a partition group's rows.
func (m *RowMap) Add(rows []int32) {
	m.order = append(m.order, rows...)
	m.ends = append(m.ends, len(m.order))
}

// MapsRows reports whether the files of tbl's writes hold their rows in the order given to them.
func MapsRows(tbl *table.Table) bool { return tbl.Metadata().SortOrder().IsUnsorted() }

// Split cuts keys (the written rows' keys, in order) into the keys of each file, in row order. ok is false
// when the files do not add up to the map: the caller reads their keys back instead.
func (m *RowMap) Split(keys *keyenc.List, files []ice.DataFile) (out []FileKeys, ok bool) {
	if m == nil {
		return nil, false
	}
	var total int64
	for _, f := range files {
		total += f.Count()
	}
	if total != int64(keys.Len()) || (m.order != nil && len(m.order) != keys.Len()) {
		return nil, false
	}
	out = make([]FileKeys, len(files))
	if m.order == nil {
		at := 0
		for i, f := range files {
			n := int(f.Count())
			out[i] = FileKeys{DF: f, Keys: keys.Slice(at, at+n)}
			at += n
		}
		return out, true
	}
	// Each group's files: consecutive, one partition value, none shared with another group, rows adding up to
	// the group's exactly.
	seen := make(map[string]bool, len(m.ends))
	fi, at := 0, 0
	for _, end := range m.ends {
		part, first := "", true
		for at < end {
			if fi == len(files) {
				return nil, false
			}
			f := files[fi]
			p := partitionKey(f.Partition())
			switch {
			case first:
				if seen[p] {
					return nil, false
				}
				seen[p], part, first = true, p, false
			case p != part:
				return nil, false
			}
			n := int(f.Count())
			if at+n > end {
				return nil, false
			}
			var l keyenc.List
			for _, row := range m.order[at : at+n] {
				l.Add(keys.Key(int(row)))
			}
			out[fi] = FileKeys{DF: f, Keys: l}
			fi++
			at += n
		}
	}
	if fi != len(files) {
		return nil, false
	}
	return out, true
}

// partitionKey names a file's partition values: equal for equal values.
func partitionKey(p map[int]any) string {
	ids := make([]int, 0, len(p))
	for id := range p {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, cmp.Compare)
	var b strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&b, "%d=%#v;", id, p[id])
	}
	return b.String()
}
