package iceberg

import (
	"context"
	"runtime"

	"github.com/apache/arrow-go/v18/arrow"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"golang.org/x/sync/errgroup"
)

// Parallel chunks of an awaited keyed batch. A keyed batch sealed by a Flush or Close is often the only batch
// encoding while its caller waits: an Apply or Upsert stream that fits one flush (BenchmarkApply: 200,000
// changes, about 40,000 surviving rows) is resolved and encoded only at Close, on one core, with the other
// encode slots idle. Such a batch borrows the idle slots of the encode pool and is written as one file per
// slot, each of a contiguous share of its rows, at once. The files are smaller than one file of the whole batch
// would be, but never below chunkMinRows rows each, and this happens only where a caller waits for the
// encoding: batches the policy seals (rows, bytes, interval) and a Router's rounds are written as before, one
// file up to the target size, since their encoding already overlaps the calls that follow.

// chunkMinRows is the fewest rows of a parallel chunk: a gather's records (gatherRows), the records the
// encoder is handed anyway. Smaller shares would trade files for little: the pool's slots are few.
const chunkMinRows = gatherRows

// encodeChunks returns how many files an unpartitioned batch of rows rows is written as (1: one, as the
// target size rolls it), taking one idle slot of b's pool for each file after the first, up to GOMAXPROCS
// files. Only an awaited keyed batch borrows (b.pool is set only while an awaited batch encodes), never in a
// bulk phase (its files are as large as it can make them); writeChunks gives the slots back. A slot is only
// taken when no batch waits for one (TryAcquire), so a borrowing batch never delays another's encoding.
func (e *fileEncoder) encodeChunks(b *batch, rows int64) int {
	if b.pool == nil || !b.keyed || e.bulk() || rows < 2*chunkMinRows {
		return 1
	}
	want := int(min(rows/chunkMinRows, int64(runtime.GOMAXPROCS(0))))
	n := 1
	for n < want && b.pool.TryAcquire(1) {
		n++
	}
	return n
}

// writeChunks writes b's records (joined into records of up to gatherRows rows by coalesce) as chunks files at
// once, each of a contiguous share of the rows, in order, and gives back the chunks-1 slots encodeChunks took.
// Ownership of the records passes to the writes, as in writeFiles.
func (e *fileEncoder) writeChunks(ctx context.Context, tbl *table.Table, schema *arrow.Schema, b *batch, rows int64,
	chunks int, opts []table.WriteRecordOption, keep *packedFiles) ([]ice.DataFile, error) {
	defer b.pool.Release(int64(chunks - 1))
	parts := splitRecords(b.recs, rows, chunks)
	b.recs = nil
	files := make([][]ice.DataFile, len(parts))
	g, gctx := errgroup.WithContext(ctx)
	for i, part := range parts {
		var n int64
		for _, r := range part {
			n += r.NumRows()
		}
		bt, err := e.withBlooms(tbl, n)
		if err != nil {
			for _, p := range parts[i:] {
				releaseRecords(p...)
			}
			_ = g.Wait()
			return nil, err
		}
		uuid := e.names.next()
		g.Go(func() error {
			taken := 0
			recs := func(yield func(arrow.RecordBatch, error) bool) {
				for _, r := range part {
					taken++
					if !yield(r, nil) {
						return
					}
				}
			}
			out, err := collectFiles(table.WriteRecords(gctx, bt, schema, recs, append(opts, table.WithWriteUUID(uuid))...))
			releaseRecords(part[taken:]...) // those WriteRecords never took
			files[i] = out
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var all []ice.DataFile
	for _, f := range files {
		all = append(all, f...)
	}
	return e.keep(all, keep)
}

// splitRecords cuts recs (rows rows in all) into n contiguous parts of about rows/n rows each, slicing a record
// that straddles a cut. The parts own what they hold: recs are released.
func splitRecords(recs []arrow.RecordBatch, rows int64, n int) [][]arrow.RecordBatch {
	parts := make([][]arrow.RecordBatch, n)
	part, room := 0, rows/int64(n)
	for _, r := range recs {
		for off := int64(0); off < r.NumRows(); {
			take := r.NumRows() - off
			if part < n-1 {
				take = min(take, room)
			}
			if off == 0 && take == r.NumRows() {
				r.Retain()
				parts[part] = append(parts[part], r)
			} else {
				parts[part] = append(parts[part], r.NewSlice(off, off+take))
			}
			off += take
			room -= take
			if room == 0 && part < n-1 {
				part++
				room = rows / int64(n) // the last part takes what is left
			}
		}
		r.Release()
	}
	return parts
}
