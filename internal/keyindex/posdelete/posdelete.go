// Package posdelete writes and reads the position delete files of format-version 2 tables, which the key index
// writes there in place of deletion vectors. Each file is file-scoped (it deletes rows of one data file only,
// and says so by its referenced_data_file and by file_path bounds with lower = upper, so a reader plans it
// against that file alone), and the writer keeps at most one live file per data file: a later delete on the
// same data file writes a file holding the earlier positions too and removes the earlier one in the same
// catalog commit. iceberg-go writes v2 position deletes only inside its own filtered Delete, without a
// referenced data file, so they are written here.
package posdelete

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	ice "github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/dv"
	"github.com/icewriter/iceberg/internal/arrowx"
	"github.com/icewriter/iceberg/internal/encode"
)

// Ref is what a position delete file names of its data file: an iceberg-go DataFile, or what the key
// index keeps of one (fileRef).
type Ref interface {
	FilePath() string
	SpecID() int32
	Partition() map[int]any
}

// Write writes the positions of bm, rows of data file df, as a Parquet position delete file
// at path and returns its metadata. It is the one v2 position delete writer: the key index's deletes and the
// maintenance conversion of equality deletes both go through it.
func Write(ctx context.Context, fs iceio.WriteFileIO, meta table.Metadata, df Ref, bm *dv.RoaringPositionBitmap, path string) (ice.DataFile, error) {
	positions := make([]int64, 0, bm.Cardinality())
	for p := range bm.Positions() {
		positions = append(positions, int64(p))
	}
	slices.Sort(positions) // the spec wants deletes sorted by file_path, then pos
	if len(positions) == 0 {
		return nil, fmt.Errorf("iceberg: position delete file for %s: no positions", df.FilePath())
	}
	var buf bytes.Buffer
	fw, err := pqarrow.NewFileWriter(schema, &buf, props, pqarrow.DefaultWriterProps())
	if err != nil {
		return nil, fmt.Errorf("iceberg: position delete file for %s: %w", df.FilePath(), err)
	}
	for chunk := range slices.Chunk(positions, chunk) {
		rec := record(df.FilePath(), chunk)
		err := fw.WriteBuffered(rec)
		rec.Release()
		if err != nil {
			_ = fw.Close()
			return nil, fmt.Errorf("iceberg: position delete file for %s: %w", df.FilePath(), err)
		}
	}
	if err := fw.Close(); err != nil {
		return nil, fmt.Errorf("iceberg: position delete file for %s: %w", df.FilePath(), err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := fs.WriteFile(path, buf.Bytes()); err != nil {
		return nil, fmt.Errorf("iceberg: write position delete file %s: %w", path, err)
	}
	spec := meta.PartitionSpecByID(int(df.SpecID()))
	if spec == nil {
		return nil, fmt.Errorf("iceberg: data file %s: unknown partition spec %d", df.FilePath(), df.SpecID())
	}
	b, err := ice.NewDataFileBuilder(*spec, ice.EntryContentPosDeletes, path, ice.ParquetFile, df.Partition(),
		encode.PartitionLogicalTypes(meta, spec), nil, int64(len(positions)), int64(buf.Len()))
	if err != nil {
		return nil, fmt.Errorf("iceberg: position delete file %s: %w", path, err)
	}
	n := int64(len(positions))
	lo, hi := binary.LittleEndian.AppendUint64(nil, uint64(positions[0])), binary.LittleEndian.AppendUint64(nil, uint64(positions[len(positions)-1]))
	b.ValueCounts(map[int]int64{PathID: n, PosID: n}).
		NullValueCounts(map[int]int64{PathID: 0, PosID: 0}).
		LowerBoundValues(map[int][]byte{PathID: []byte(df.FilePath()), PosID: lo}).
		UpperBoundValues(map[int][]byte{PathID: []byte(df.FilePath()), PosID: hi}).
		ReferencedDataFile(df.FilePath())
	return b.Build(), nil
}

// props are the Parquet properties of every position delete file (shared: writers only read
// them). file_path, the same path in every row of a file-scoped file, is dictionary-encoded, and written as an
// Arrow dictionary (schema), so the encoder takes the one entry as it is instead of hashing the
// path again for every row; pos, whose values are all distinct, is not (a dictionary of every position cost
// more CPU than the rest of the file, and falls back to plain anyway). No Arrow schema is stored in the file
// (pqarrow.WithStoreSchema serialized it for every file): readers take the columns by field id, as Iceberg's.
var props = parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy),
	parquet.WithDictionaryDefault(false), parquet.WithDictionaryFor("file_path", true), parquet.WithStats(true))

// schema is Iceberg's position delete schema (table.PositionalDeleteArrowSchema, field ids
// included) with file_path as a dictionary of strings: the Parquet column is the same string column.
var schema = func() *arrow.Schema {
	fields := slices.Clone(table.PositionalDeleteArrowSchema.Fields())
	fields[0].Type = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: fields[0].Type}
	md := table.PositionalDeleteArrowSchema.Metadata()
	return arrow.NewSchema(fields, &md)
}()

// record returns the rows of a file-scoped position delete file: path, then each position. The
// columns are made from buffers of their final size (the path once, as a dictionary every row's index points
// to; the positions shared), where builders copied the path per row into a buffer grown by doubling.
func record(path string, positions []int64) arrow.RecordBatch {
	n := len(positions)
	dict := array.NewStringData(array.NewData(arrow.BinaryTypes.String, 1, []*memory.Buffer{nil,
		memory.NewBufferBytes(arrow.Int32Traits.CastToBytes([]int32{0, int32(len(path))})), memory.NewBufferBytes([]byte(path))}, nil, 0, 0))
	defer dict.Release()
	indices := array.NewInt32Data(array.NewData(arrow.PrimitiveTypes.Int32, n,
		[]*memory.Buffer{nil, memory.NewBufferBytes(make([]byte, 4*n))}, nil, 0, 0))
	defer indices.Release()
	paths := array.NewDictionaryArray(schema.Field(0).Type, indices, dict)
	defer paths.Release()
	pos := array.NewInt64Data(array.NewData(arrow.PrimitiveTypes.Int64, n,
		[]*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int64Traits.CastToBytes(positions))}, nil, 0, 0))
	defer pos.Release()
	return array.NewRecordBatch(schema, []arrow.Array{paths, pos}, int64(n))
}

// chunk is how many rows of a position delete file go into one record (and so the memory a
// record's index column takes).
const chunk = 1 << 20

// Read reads a Parquet position delete file's file_path and pos columns (found by their
// reserved field ids).
func Read(fs iceio.IO, f ice.DataFile) (map[string][]uint64, error) {
	in, err := fs.Open(f.FilePath())
	if err != nil {
		return nil, err
	}
	defer in.Close()
	pr, err := file.NewParquetReader(in)
	if err != nil {
		return nil, err
	}
	defer pr.Close()
	fr, err := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{BatchSize: 64 << 10}, memory.DefaultAllocator)
	if err != nil {
		return nil, err
	}
	sc := pr.MetaData().Schema
	pathCol, posCol := -1, -1
	for c := 0; c < sc.NumColumns(); c++ {
		switch sc.Column(c).SchemaNode().FieldID() {
		case PathID:
			pathCol = c
		case PosID:
			posCol = c
		}
	}
	if pathCol < 0 || posCol < 0 {
		return nil, fmt.Errorf("no file_path (field id %d) and pos (field id %d) columns", PathID, PosID)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		return nil, err
	}
	defer tbl.Release()
	paths, err := arrowx.Concat(tbl.Column(fieldIndexOf(fr, pathCol)).Data())
	if err != nil {
		return nil, err
	}
	defer paths.Release()
	poss, err := arrowx.Concat(tbl.Column(fieldIndexOf(fr, posCol)).Data())
	if err != nil {
		return nil, err
	}
	defer poss.Release()
	ps, ok1 := paths.(*array.String)
	pp, ok2 := poss.(*array.Int64)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("file_path %s and pos %s: want string and int64", paths.DataType(), poss.DataType())
	}
	out := map[string][]uint64{}
	for i := 0; i < ps.Len(); i++ {
		out[ps.Value(i)] = append(out[ps.Value(i)], uint64(pp.Value(i)))
	}
	return out, nil
}

// fieldIndexOf maps a Parquet leaf column to its top-level Arrow field (the position delete schema is flat).
func fieldIndexOf(fr *pqarrow.FileReader, col int) int {
	idx, _ := fr.Manifest.GetFieldIndices([]int{col})
	if len(idx) == 0 {
		return col
	}
	return idx[0]
}

// The reserved field ids of a position delete file's columns (Iceberg spec, "Position Delete Files").
const (
	PathID = 2147483546
	PosID  = 2147483545
)

// Target returns the data file a file-scoped position delete file applies to: its referenced data file
// or, as format version 2 manifests do not keep that field, its file_path bounds when they name one path.
func Target(f ice.DataFile) string {
	if ref := f.ReferencedDataFile(); ref != nil {
		return *ref
	}
	lo, hi := f.LowerBoundValues()[PathID], f.UpperBoundValues()[PathID]
	if len(lo) > 0 && bytes.Equal(lo, hi) {
		return string(lo)
	}
	return ""
}
