package iceberg

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	ice "github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/dv"
	"golang.org/x/sync/errgroup"
)

// Position delete files for format-version 2 tables: what the key index writes there in place of deletion
// vectors. Each file is file-scoped (it deletes rows of one data file only, and says so by its
// referenced_data_file and by file_path bounds with lower = upper, so a reader plans it against that file
// alone), and the writer keeps at most one live file per data file: a later delete on the same data file
// writes a file holding the earlier positions too and removes the earlier one in the same catalog commit
// (stagePositionDeletes). iceberg-go writes v2 position deletes only inside its own filtered Delete, without a
// referenced data file, so they are written here.

// dataFileRef is what a position delete file names of its data file: an iceberg-go DataFile, or what the key
// index keeps of one (fileRef).
type dataFileRef interface {
	FilePath() string
	SpecID() int32
	Partition() map[int]any
}

// writePositionDeleteFile writes the positions of bm, rows of data file df, as a Parquet position delete file
// at path and returns its metadata. It is the one v2 position delete writer: the key index's deletes and the
// maintenance conversion of equality deletes both go through it.
func writePositionDeleteFile(ctx context.Context, fs iceio.WriteFileIO, meta table.Metadata, df dataFileRef, bm *dv.RoaringPositionBitmap, path string) (ice.DataFile, error) {
	positions := make([]int64, 0, bm.Cardinality())
	for p := range bm.Positions() {
		positions = append(positions, int64(p))
	}
	slices.Sort(positions) // the spec wants deletes sorted by file_path, then pos
	if len(positions) == 0 {
		return nil, fmt.Errorf("iceberg: position delete file for %s: no positions", df.FilePath())
	}
	var buf bytes.Buffer
	fw, err := pqarrow.NewFileWriter(positionDeleteSchema, &buf, positionDeleteProps, pqarrow.DefaultWriterProps())
	if err != nil {
		return nil, fmt.Errorf("iceberg: position delete file for %s: %w", df.FilePath(), err)
	}
	for chunk := range slices.Chunk(positions, positionDeleteChunk) {
		rec := positionDeleteRecord(df.FilePath(), chunk)
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
		partitionLogicalTypes(meta, spec), nil, int64(len(positions)), int64(buf.Len()))
	if err != nil {
		return nil, fmt.Errorf("iceberg: position delete file %s: %w", path, err)
	}
	n := int64(len(positions))
	lo, hi := binary.LittleEndian.AppendUint64(nil, uint64(positions[0])), binary.LittleEndian.AppendUint64(nil, uint64(positions[len(positions)-1]))
	b.ValueCounts(map[int]int64{positionDeletePathID: n, positionDeletePosID: n}).
		NullValueCounts(map[int]int64{positionDeletePathID: 0, positionDeletePosID: 0}).
		LowerBoundValues(map[int][]byte{positionDeletePathID: []byte(df.FilePath()), positionDeletePosID: lo}).
		UpperBoundValues(map[int][]byte{positionDeletePathID: []byte(df.FilePath()), positionDeletePosID: hi}).
		ReferencedDataFile(df.FilePath())
	return b.Build(), nil
}

// positionDeleteProps are the Parquet properties of every position delete file (shared: writers only read
// them). file_path, the same path in every row of a file-scoped file, is dictionary-encoded, and written as an
// Arrow dictionary (positionDeleteSchema), so the encoder takes the one entry as it is instead of hashing the
// path again for every row; pos, whose values are all distinct, is not (a dictionary of every position cost
// more CPU than the rest of the file, and falls back to plain anyway). No Arrow schema is stored in the file
// (pqarrow.WithStoreSchema serialized it for every file): readers take the columns by field id, as Iceberg's.
var positionDeleteProps = parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy),
	parquet.WithDictionaryDefault(false), parquet.WithDictionaryFor("file_path", true), parquet.WithStats(true))

// positionDeleteSchema is Iceberg's position delete schema (table.PositionalDeleteArrowSchema, field ids
// included) with file_path as a dictionary of strings: the Parquet column is the same string column.
var positionDeleteSchema = func() *arrow.Schema {
	fields := slices.Clone(table.PositionalDeleteArrowSchema.Fields())
	fields[0].Type = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: fields[0].Type}
	md := table.PositionalDeleteArrowSchema.Metadata()
	return arrow.NewSchema(fields, &md)
}()

// positionDeleteRecord returns the rows of a file-scoped position delete file: path, then each position. The
// columns are made from buffers of their final size (the path once, as a dictionary every row's index points
// to; the positions shared), where builders copied the path per row into a buffer grown by doubling.
func positionDeleteRecord(path string, positions []int64) arrow.RecordBatch {
	n := len(positions)
	dict := array.NewStringData(array.NewData(arrow.BinaryTypes.String, 1, []*memory.Buffer{nil,
		memory.NewBufferBytes(arrow.Int32Traits.CastToBytes([]int32{0, int32(len(path))})), memory.NewBufferBytes([]byte(path))}, nil, 0, 0))
	defer dict.Release()
	indices := array.NewInt32Data(array.NewData(arrow.PrimitiveTypes.Int32, n,
		[]*memory.Buffer{nil, memory.NewBufferBytes(make([]byte, 4*n))}, nil, 0, 0))
	defer indices.Release()
	paths := array.NewDictionaryArray(positionDeleteSchema.Field(0).Type, indices, dict)
	defer paths.Release()
	pos := array.NewInt64Data(array.NewData(arrow.PrimitiveTypes.Int64, n,
		[]*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int64Traits.CastToBytes(positions))}, nil, 0, 0))
	defer pos.Release()
	return array.NewRecordBatch(positionDeleteSchema, []arrow.Array{paths, pos}, int64(n))
}

// positionDeleteChunk is how many rows of a position delete file go into one record (and so the memory a
// record's index column takes).
const positionDeleteChunk = 1 << 20

// writePositionDeletes writes one position delete file per data file of pending (format version 2), each with
// every position merged holds for it (this writer's earlier deletes of the file and the run's), a few at once.
func (k *keyStage) writePositionDeletes(ctx context.Context, fs iceio.WriteFileIO, tbl *table.Table, lp table.LocationProvider,
	idx *keyIndex, pending map[int32][]int64, merged runDVs) ([]ice.DataFile, error) {
	meta := tbl.Metadata()
	fids := slices.Sorted(maps.Keys(pending))
	out := make([]ice.DataFile, len(fids))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, k.parallel))
	for i, fid := range fids {
		df := idx.files[fid].df
		path := lp.NewDataLocation("icewriter-pos-" + k.files.next().String() + ".parquet")
		g.Go(func() error {
			f, err := writePositionDeleteFile(gctx, fs, meta, df, merged[df.FilePath()], path)
			out[i] = f
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// stagePositionDeletes stages a segment whose position deletes are position delete files (format version 2):
// a row delta adds its rows and delete files, then, when they supersede this writer's earlier files of the same
// data files (seg.RemovedDVs), a rewrite snapshot removes those in the same catalog commit. iceberg-go's row
// delta removes only deletion vectors (v3); a rewrite ("replace": no logical change, which changelog readers
// skip) may remove any delete file, and removing one whose positions a live file of a later sequence number
// repeats changes no row. Both snapshots carry the segment's summary, so the head names the run's marker.
func stagePositionDeletes(ctx context.Context, tx *table.Transaction, seg *Segment, props ice.Properties) error {
	if err := tx.NewRowDelta(props).AddRows(seg.DataFiles...).AddDeletes(seg.DeleteFiles...).
		AddDeletes(seg.DVFiles...).Commit(ctx); err != nil {
		return err
	}
	if len(seg.RemovedDVs) == 0 {
		return nil
	}
	rw := tx.NewRewrite(props)
	for _, f := range seg.RemovedDVs {
		rw.DeleteFile(f)
	}
	if err := rw.Commit(ctx); err != nil {
		return fmt.Errorf("iceberg: remove superseded position delete files: %w", err)
	}
	return nil
}

// supersededBatch is how many superseded position delete files a v2 writer lets accumulate before a commit
// removes them. The removal is a rewrite snapshot, which iceberg-go stages by reading every manifest of the
// table (and rewriting those that list the files): per commit it doubled the CPU of a router test of small
// commits. A superseded file changes no row (its replacement repeats its positions); until removed, a reader of
// its data file reads it too.
const supersededBatch = 16

// supersededBy returns the position delete files a run removes, given those its new files supersede: every
// superseded file still live with them once they are batch or more, else none. The index's list changes
// only when the run commits (keyStage.committed): a run that falls back to equality deletes writes none of its
// files, so what it would have superseded stays live, and the only file holding its positions.
func (idx *keyIndex) supersededBy(files []ice.DataFile, batch int) []ice.DataFile {
	if len(idx.superseded)+len(files) < max(1, batch) {
		return nil
	}
	return append(slices.Clone(idx.superseded), files...)
}

// removedSuperseded forgets superseded position delete files that a committed run or conversion removed.
func (idx *keyIndex) removedSuperseded(files []ice.DataFile) {
	if len(files) == 0 || len(idx.superseded) == 0 {
		return
	}
	gone := make(map[string]struct{}, len(files))
	for _, f := range files {
		gone[f.FilePath()] = struct{}{}
	}
	idx.superseded = slices.DeleteFunc(idx.superseded, func(f ice.DataFile) bool {
		_, ok := gone[f.FilePath()]
		return ok
	})
}

// posDeleteTarget returns the data file a file-scoped position delete file applies to: its referenced data file
// or, as format version 2 manifests do not keep that field, its file_path bounds when they name one path.
func posDeleteTarget(f ice.DataFile) string {
	if ref := f.ReferencedDataFile(); ref != nil {
		return *ref
	}
	lo, hi := f.LowerBoundValues()[positionDeletePathID], f.UpperBoundValues()[positionDeletePathID]
	if len(lo) > 0 && bytes.Equal(lo, hi) {
		return string(lo)
	}
	return ""
}

// writableFS returns the table's file system as one that writes files (what: the files it is for, in the error).
func writableFS(fs iceio.IO, what string) (iceio.WriteFileIO, error) {
	wfs, ok := fs.(iceio.WriteFileIO)
	if !ok {
		return nil, fmt.Errorf("iceberg: the table's file system cannot write %s", what)
	}
	return wfs, nil
}
