package encode

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	ice "github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
)

// Bulk files across batches. In a Router's bulk phase the memory limit seals batches far smaller than the bulk
// target file size (a 16 MiB limit makes 8 MiB batches), so a file per batch would never reach it. On an
// unpartitioned table a batch's rows are instead appended to a Parquet file that stays open across batches
// (each record a row group, flushed to the object store as it is written) and closed once it reaches the target
// size, or when the pipeline seals a closer batch (Flush, Close, a round that asks, SetPhase).
//
// The rows of a batch whose file is open are not committed: the batch is encoded (its memory freed) but it
// carries the file's span, and a run may end only where no span is open or crosses the end (spanEnd). A
// closed file belongs to the batch that closed it (its files), and its span names the newest batch written
// into it, so a run takes every batch a file holds or none. Positions ride on the batches, so a source's
// position is committed only with the rows before it. A process that dies leaves its open files unclosed and
// uncommitted: they carry the writer ID's mark (fileNamer) like every file it writes, and the next writer's
// orphan sweep removes them.
//
// Files are grouped by generation: a closer batch ends one (pipeline.fileGen), its encoding waits for every
// earlier batch's, then closes all the generation's files; later batches open files of the next generation,
// so a closer never closes a file that holds a batch after it.

// FileSpan is an open bulk file as the pipeline sees it: Done once the file is closed (and its batches may be
// committed), Until the newest sequence number it holds. Guarded by the pipeline's mutex.
type FileSpan struct {
	Done  bool
	Until int64
}

// ClosedSpan is a bulk file a batch's encoding closed, applied when the batch is staged (the pipeline's mutex
// held): the file (DF, of Schema) becomes the Holder's, the newest batch written into it (Until), and its
// Span is done.
type ClosedSpan[H any] struct {
	Span   *FileSpan
	Until  int64
	DF     ice.DataFile
	Holder H
	Schema *arrow.Schema
}

// Bulk is a batch's share of a Router's bulk phase: Gen is the file generation the batch was sealed in; Span
// the open bulk file its rows went into (nil: none); Closes the bulk files its encoding closed; Closer marks
// the rowless batch that closes every file of its generation.
type Bulk[H any] struct {
	Gen    int64
	Span   *FileSpan
	Closes []ClosedSpan[H]
	Closer bool
}

// bulkFiles is a table's open bulk files, by generation: idle ones wait for the next batch of their generation,
// busy ones are being written by one encoding.
type bulkFiles[H any] struct {
	mu   sync.Mutex
	idle map[int64][]*bulkFile[H]
	all  map[*bulkFile[H]]int64 // every open file and its generation
}

// bulkFile is one open Parquet data file.
type bulkFile[H any] struct {
	path   string
	schema *arrow.Schema
	sink   *countingSink
	w      *pqarrow.FileWriter
	span   *FileSpan
	until  int64 // the newest batch written into it
	holder H     // that batch
	rows   int64
	// pending is what the open row group's last column holds, not yet in sink (writeRowGroup).
	pending int64
}

// countingSink counts the bytes written to an object-store file.
type countingSink struct {
	w iceio.FileWriter
	n int64
}

func (c *countingSink) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func (c *countingSink) Close() error { return c.w.Close() }

// Carries reports whether a batch is written into an open bulk file: a bulk phase, an unpartitioned table, and
// a covered batch: inserts only, and (with WithCheckpoints) rows a checkpoint covers: a batch sealed without
// one gets files of its own, so that a file never holds rows no checkpoint covers next to rows one does. A table
// that shreds its variant columns (ShredsVariants) gets files of its own for every batch, as a partitioned one
// does: a bulk file is written by pqarrow directly, and only iceberg-go's writer shreds (from each file's first
// rows, by an inference it does not export), so a bulk file would hold the variants unshredded, without the
// bounds readers prune on. A table whose paths are chosen (Shred) gets files of its own per batch too, in that
// layout (writeShredded).
func (e *Encoder[H]) Carries(tbl *table.Table, covered bool) bool {
	if !e.carry.Load() || !e.Bulk() || !covered || !tbl.Spec().IsUnpartitioned() {
		return false
	}
	if e.Shred != nil {
		return false // chosen paths: each batch's files shredded by writeShredded
	}
	if ShredsVariants(tbl.Properties(), tbl.Schema()) {
		if e.Log != nil && e.shredWarned.CompareAndSwap(false, true) {
			e.Log.Info("iceberg: the table shreds its variant columns (table property "+
				table.ParquetShredVariantsKey+"): its bulk phase writes files per batch, shredded, instead of "+
				"files kept open across batches; reported once per writer", "table", tbl.Identifier())
		}
		return false
	}
	return true
}

// ShredInference returns the write property that makes iceberg-go infer the shredded layout of each file of a
// write of up to rows rows from all of its rows (nil: the table does not shred, or sets the property itself).
// iceberg-go infers it from a file's first rows (table.ParquetVariantBufferSizeKey, default 100): an integer
// path is typed by the widest of those, a larger value after them goes to the file's residual, and the file
// then has no bound on the path, so that filters on it stop pruning the file while its rows read back right.
// The rows it buffers to infer are the write's own records, which the write holds until encoded anyway.
func ShredInference(props ice.Properties, schema *ice.Schema, rows int64) ice.Properties {
	if _, set := props[table.ParquetVariantBufferSizeKey]; set || rows <= table.ParquetVariantBufferSizeDefault ||
		!ShredsVariants(props, schema) {
		return nil
	}
	return ice.Properties{table.ParquetVariantBufferSizeKey: strconv.FormatInt(rows, 10)}
}

// WithShredInference is tbl with ShredInference's property for a write of up to rows rows, or tbl itself.
func WithShredInference(tbl *table.Table, rows int64) (*table.Table, error) {
	return WithWriteProperties(tbl, ShredInference(tbl.Properties(), tbl.Schema(), rows))
}

// ShredsVariants reports whether iceberg-go's writer shreds the variant columns of a table of these properties
// and schema: the table property write.parquet.shred-variants (table.ParquetShredVariantsKey, default false) is
// true and the schema has a top-level variant column (iceberg-go shreds those only).
func ShredsVariants(props ice.Properties, schema *ice.Schema) bool {
	if !props.GetBool(table.ParquetShredVariantsKey, table.ParquetShredVariantsDefault) {
		return false
	}
	for _, f := range schema.Fields() {
		if _, ok := f.Type.(ice.VariantType); ok {
			return true
		}
	}
	return false
}

// take returns the fullest idle file of generation gen whose schema is schema, or nil; idle files of gen with another
// schema (the table's schema evolved) are returned in stale, taken out of the pool for the caller to close.
func (f *bulkFiles[H]) take(gen int64, schema *arrow.Schema) (file *bulkFile[H], stale []*bulkFile[H]) {
	f.mu.Lock()
	defer f.mu.Unlock()
	// The fullest file first: it closes soonest, so fewer files are left part-full when a flush closes them.
	var keep []*bulkFile[H]
	for _, c := range f.idle[gen] {
		switch {
		case !c.schema.Equal(schema):
			delete(f.all, c)
			stale = append(stale, c)
		case file == nil || c.sink.n > file.sink.n:
			if file != nil {
				keep = append(keep, file)
			}
			file = c
		default:
			keep = append(keep, c)
		}
	}
	if f.idle != nil {
		f.idle[gen] = keep
	}
	return file, stale
}

// put returns a file to the pool of its generation (closed false) or forgets it (closed true).
func (f *bulkFiles[H]) put(gen int64, c *bulkFile[H], closed bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if closed {
		delete(f.all, c)
		return
	}
	if f.all == nil {
		f.all, f.idle = map[*bulkFile[H]]int64{}, map[int64][]*bulkFile[H]{}
	}
	f.all[c] = gen
	f.idle[gen] = append(f.idle[gen], c)
}

// drain takes every idle file of generations up to gen out of the pool (all generations when gen < 0).
func (f *bulkFiles[H]) drain(gen int64) []*bulkFile[H] {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*bulkFile[H]
	for g, idle := range f.idle {
		if gen >= 0 && g > gen {
			continue
		}
		for _, c := range idle {
			delete(f.all, c)
			out = append(out, c)
		}
		delete(f.idle, g)
	}
	return out
}

// WriteBulk appends a batch's records to an open bulk file of its generation (opening one if none is idle)
// and closes the file when it reached the bulk target size (recorded in b.Bulk.Closes). Its files come when
// they close.
func (e *Encoder[H]) WriteBulk(ctx context.Context, tbl *table.Table, schema *arrow.Schema, b *Batch[H]) error {
	// Each record is a row group (an open file buffers none between batches): records of the row-group limit,
	// as iceberg-go's buffered writer makes them. Small row groups cost CPU per group and column.
	if err := e.coalesceTo(schema, b, int64(e.RowGroupRows)); err != nil {
		return err
	}
	c, stale := e.open.take(b.Bulk.Gen, schema)
	for _, s := range stale {
		if err := e.closeBulk(ctx, tbl, s, b.Bulk); err != nil {
			return err
		}
	}
	if c == nil {
		var err error
		if c, err = e.openBulk(ctx, tbl, schema, b.Recs); err != nil {
			return err
		}
	}
	for i, r := range b.Recs {
		var err error
		c.pending, err = writeRowGroup(c.w, r, int64(e.RowGroupRows), e.Mem)
		r.Release()
		b.Recs[i] = nil
		if err != nil {
			e.abortBulk(ctx, tbl, c)
			return fmt.Errorf("iceberg: write bulk file %s: %w", c.path, err)
		}
		c.rows += r.NumRows()
	}
	b.Recs = nil
	if b.Seq > c.until {
		c.until, c.holder = b.Seq, b.Self
	}
	b.Bulk.Span = c.span
	if c.sink.n+c.pending < e.fileSize() {
		e.open.put(b.Bulk.Gen, c, false)
		return nil
	}
	return e.closeBulk(ctx, tbl, c, b.Bulk)
}

// CloseGen closes every file of generations up to the closer batch's (b, its bulk part; its encoding runs after
// every earlier batch's, so none is busy).
func (e *Encoder[H]) CloseGen(ctx context.Context, tbl *table.Table, b *Bulk[H]) error {
	for _, c := range e.open.drain(b.Gen) {
		if err := e.closeBulk(ctx, tbl, c, b); err != nil {
			return err
		}
	}
	return nil
}

// openBulk opens a data file named as the writer's other files are (its mark included) at the table's data
// location, with the Parquet settings of the table's properties and a write batch picked for recs, the first
// records it takes (writeBatchRows).
func (e *Encoder[H]) openBulk(ctx context.Context, tbl *table.Table, schema *arrow.Schema, recs []arrow.RecordBatch) (*bulkFile[H], error) {
	lp, err := tbl.LocationProvider()
	if err != nil {
		return nil, err
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	wfs, ok := fs.(iceio.WriteFileIO)
	if !ok {
		return nil, errors.New("iceberg: the table's file IO cannot write files")
	}
	p := lp.NewDataLocation(fmt.Sprintf("00000-0-%s-00001.parquet", e.next()))
	w, err := wfs.Create(p)
	if err != nil {
		return nil, fmt.Errorf("iceberg: create bulk file %s: %w", p, err)
	}
	sink := &countingSink{w: w}
	arrProps := pqarrow.NewArrowWriterProperties(pqarrow.WithAllocator(e.Mem), pqarrow.WithStoreSchema())
	props, err := bulkWriterProps(tbl.Properties(), e.RowGroupRows, WriteBatchRows(tbl.Properties(), recs), schema, arrProps)
	if err != nil {
		_ = w.Close()
		return nil, err
	}
	fw, err := pqarrow.NewFileWriter(schema, sink, props, arrProps)
	if err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("iceberg: open bulk file %s: %w", p, err)
	}
	return &bulkFile[H]{path: p, schema: schema, sink: sink, w: fw, span: &FileSpan{}}, nil
}

// closeBulk closes a file, reads its statistics back into a DataFile, and records on b that b closed it: the
// file goes to the newest batch written into it when b is staged.
func (e *Encoder[H]) closeBulk(ctx context.Context, tbl *table.Table, c *bulkFile[H], b *Bulk[H]) error {
	e.open.put(0, c, true)
	if err := c.w.Close(); err != nil { // closes the sink too: the upload completes
		return fmt.Errorf("iceberg: close bulk file %s: %w", c.path, err)
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return err
	}
	df, err := table.FileToDataFile(ctx, fs, c.path, tbl.Schema(), tbl.Spec(), 0, tbl.Properties())
	if err != nil {
		return fmt.Errorf("iceberg: read back bulk file %s: %w", c.path, err)
	}
	e.count([]ice.DataFile{df})
	b.Closes = append(b.Closes, ClosedSpan[H]{Span: c.span, Until: c.until, DF: df, Holder: c.holder,
		Schema: c.schema})
	return nil
}

// abortBulk gives up a file: its writer is closed and the file removed (it was never committed).
func (e *Encoder[H]) abortBulk(ctx context.Context, tbl *table.Table, c *bulkFile[H]) {
	e.open.put(0, c, true)
	_ = c.w.Close()
	if fs, err := tbl.FS(ctx); err == nil {
		_ = fs.Remove(c.path)
	}
}

// DropBulk aborts every open bulk file (Close and Abort: their rows were not committed).
func (e *Encoder[H]) DropBulk(ctx context.Context, tbl *table.Table) {
	if tbl == nil {
		return
	}
	for _, c := range e.open.drain(-1) {
		e.abortBulk(ctx, tbl, c)
	}
}

// bulkWriterProps are the Parquet writer properties of a bulk file, iceberg-go's defaults for its own files:
// the table's codec (zstd by default), statistics, its page sizes, the writer's row-group limit, the write batch
// (batchRows; 0: the table's write.parquet.page-row-limit, 20,000 by default) and the cost-based dictionary
// fallback on every leaf column (without it a column of distinct values keeps its dictionary, and the files grow).
// extra are more properties (the chosen-path writer's bloom filters).
func bulkWriterProps(props ice.Properties, rowGroupRows, batchRows int, schema *arrow.Schema, arrProps pqarrow.ArrowWriterProperties,
	extra ...parquet.WriterProperty) (*parquet.WriterProperties, error) {
	if batchRows <= 0 {
		batchRows = props.GetInt(table.ParquetPageRowLimitKey, table.ParquetPageRowLimitDefault)
	}
	codec := compress.Codecs.Zstd
	switch name := props.Get("write.parquet.compression-codec", "zstd"); name {
	case "zstd":
	case "snappy":
		codec = compress.Codecs.Snappy
	case "gzip":
		codec = compress.Codecs.Gzip
	case "uncompressed":
		codec = compress.Codecs.Uncompressed
	case "lz4raw":
		codec = compress.Codecs.Lz4Raw
	default:
		return nil, fmt.Errorf("iceberg: bulk file: table property write.parquet.compression-codec %q is not supported", name)
	}
	wp := []parquet.WriterProperty{
		parquet.WithCompression(codec),
		// iceberg-go passes the table's level, -1 unless set, which arrow-go's zstd reads as its fastest level;
		// left unset, arrow-go would pick zstd's default level, a slower one.
		parquet.WithCompressionLevel(props.GetInt("write.parquet.compression-level", -1)),
		parquet.WithStats(true),
		parquet.WithMaxRowGroupLength(int64(rowGroupRows)),
		parquet.WithDataPageVersion(parquet.DataPageV2),
		parquet.WithDataPageSize(int64(props.GetInt(table.ParquetPageSizeBytesKey, table.ParquetPageSizeBytesDefault))),
		parquet.WithBatchSize(int64(batchRows)),
		parquet.WithDictionaryPageSizeLimit(2 << 20),
	}
	wp = append(wp, extra...)
	ps, err := pqarrow.ToParquet(schema, parquet.NewWriterProperties(wp...), arrProps)
	if err != nil {
		return nil, fmt.Errorf("iceberg: bulk file schema: %w", err)
	}
	for i := range ps.NumColumns() {
		wp = append(wp, parquet.WithDictionaryCostFallbackFor(ps.Column(i).Path(), true))
	}
	return parquet.NewWriterProperties(wp...), nil
}
