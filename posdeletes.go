package iceberg

import (
	"bytes"
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	ice "github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
)

// writePositionDeletes writes a file-scoped position delete file (format v2) that removes positions of data
// file df, sorted, at path, and returns it as the table's metadata describes it (referenced_data_file set, so
// readers skip it for every other file). iceberg-go v0.7.0 writes position deletes only inside its own
// Delete/Overwrite, so the file is encoded here and described by table.DataFileFromMetadata.
func writePositionDeletes(ctx context.Context, tbl *table.Table, df ice.DataFile, positions []uint64, path string) (ice.DataFile, error) {
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	wfs, err := writableFS(fs, "position deletes")
	if err != nil {
		return nil, err
	}
	sc, err := table.SchemaToArrowSchema(ice.PositionalDeleteSchema, nil, true, false)
	if err != nil {
		return nil, err
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	paths, pos := b.Field(0).(*array.StringBuilder), b.Field(1).(*array.Int64Builder)
	for _, p := range positions {
		paths.Append(df.FilePath())
		pos.Append(int64(p))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()

	var buf bytes.Buffer
	fw, err := pqarrow.NewFileWriter(sc, &buf,
		parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd), parquet.WithStats(true)),
		pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		return nil, err
	}
	if err := fw.Write(rec); err != nil {
		fw.Close()
		return nil, fmt.Errorf("iceberg: encode position deletes: %w", err)
	}
	if err := fw.Close(); err != nil {
		return nil, fmt.Errorf("iceberg: encode position deletes: %w", err)
	}
	meta, err := fw.FileMetadata()
	if err != nil {
		return nil, err
	}
	if err := wfs.WriteFile(path, buf.Bytes()); err != nil {
		return nil, fmt.Errorf("iceberg: write position deletes: %w", err)
	}
	spec := tbl.Metadata().PartitionSpecByID(int(df.SpecID()))
	if spec == nil {
		return nil, fmt.Errorf("iceberg: position deletes for %s: unknown partition spec %d", df.FilePath(), df.SpecID())
	}
	ref := df.FilePath()
	return table.DataFileFromMetadata(table.DataFileArgs{
		Schema: ice.PositionalDeleteSchema, Spec: *spec, Format: ice.ParquetFile, Metadata: meta,
		FilePath: path, FileSize: int64(buf.Len()), Content: ice.EntryContentPosDeletes,
		PartitionValues: df.Partition(), FormatVersion: tbl.Metadata().Version(), ReferencedDataFile: &ref,
		Properties: tbl.Properties(),
	})
}

// writableFS returns the table's file system as one that writes files (what: the files it is for, in the error).
func writableFS(fs iceio.IO, what string) (iceio.WriteFileIO, error) {
	wfs, ok := fs.(iceio.WriteFileIO)
	if !ok {
		return nil, fmt.Errorf("iceberg: the table's file system cannot write %s", what)
	}
	return wfs, nil
}
