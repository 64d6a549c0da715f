package encode

import (
	"fmt"
	"math"
	"unsafe"

	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/codec"
	"github.com/apache/iceberg-go/table"
)

// The metadata of data files from their write to their commit. iceberg-go's DataFile, as WriteRecords builds
// it, holds a copy of the partition tuple by name and by field id, a copy of the schema's logical types and each
// column's statistics as Avro lists, and the first call of a statistics accessor adds maps of them all. A batch
// that fans out over many partitions holds that for each of its files until its commit, all of it pointers for
// the GC to scan (BenchmarkPartitionFanout measures it). So a batch whose files only its commit reads keeps them
// packed as the Avro bytes of their manifest entries (iceberg-go's codec package: the encoding a manifest
// carries, so nothing the commit needs is lost): a fraction of the size, no pointers, decoded when its run forms.

// PackedFiles is the packed metadata of data files written to one table (spec, schema and format version as
// they were at the write: decoding needs the same three).
type PackedFiles struct {
	spec    ice.PartitionSpec
	schema  *ice.Schema
	version int
	buf     []byte   // the files' entries, one after the other
	ends    []uint32 // where each file's entry ends in buf
}

// NewPackedFiles returns an empty pack for files written to tbl.
func NewPackedFiles(tbl *table.Table) *PackedFiles {
	return &PackedFiles{spec: tbl.Spec(), schema: tbl.Schema(), version: tbl.Metadata().Version()}
}

// Add packs files.
func (p *PackedFiles) Add(files []ice.DataFile) error {
	for _, f := range files {
		entry, err := codec.EncodeDataFile(f, p.spec, p.schema, p.version)
		if err != nil {
			return fmt.Errorf("iceberg: pack the metadata of %s: %w", f.FilePath(), err)
		}
		if len(p.buf)+len(entry) > math.MaxUint32 {
			return fmt.Errorf("iceberg: pack the metadata of %s: %d files' metadata over 4 GiB", f.FilePath(), p.Len())
		}
		p.buf = append(p.buf, entry...)
		p.ends = append(p.ends, uint32(len(p.buf)))
	}
	return nil
}

// Empty returns an empty pack for files written to p's table as p's were.
func (p *PackedFiles) Empty() *PackedFiles {
	return &PackedFiles{spec: p.spec, schema: p.schema, version: p.version}
}

// Merge appends q's files (packed for the same table) to p's.
func (p *PackedFiles) Merge(q *PackedFiles) {
	base := uint32(len(p.buf))
	p.buf = append(p.buf, q.buf...)
	for _, e := range q.ends {
		p.ends = append(p.ends, base+e)
	}
}

// Trim gives back the room that appending left over: a pack held until its commit is counted, and costs, by
// its capacity.
func (p *PackedFiles) Trim() {
	p.buf = append([]byte(nil), p.buf...)
	p.ends = append([]uint32(nil), p.ends...)
}

// Len is the number of files packed.
func (p *PackedFiles) Len() int {
	if p == nil {
		return 0
	}
	return len(p.ends)
}

// MemBytes is the memory the pack holds (what the memory limit counts for it until its commit).
func (p *PackedFiles) MemBytes() int64 {
	if p == nil {
		return 0
	}
	return int64(unsafe.Sizeof(*p)) + int64(cap(p.buf)) + 4*int64(cap(p.ends))
}

// entry is file i's packed entry.
func (p *PackedFiles) entry(i int) []byte {
	var start uint32
	if i > 0 {
		start = p.ends[i-1]
	}
	return p.buf[start:p.ends[i]]
}

// File decodes file i.
func (p *PackedFiles) File(i int) (ice.DataFile, error) {
	df, err := codec.DecodeDataFile(p.entry(i), p.spec, p.schema, p.version)
	if err != nil {
		return nil, fmt.Errorf("iceberg: unpack the metadata of data file %d of %d: %w", i, p.Len(), err)
	}
	return df, nil
}

// Unpack appends every file, decoded, to dst.
func (p *PackedFiles) Unpack(dst []ice.DataFile) ([]ice.DataFile, error) {
	for i := range p.Len() {
		df, err := p.File(i)
		if err != nil {
			return nil, err
		}
		dst = append(dst, df)
	}
	return dst, nil
}
