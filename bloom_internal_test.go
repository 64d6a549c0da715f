package iceberg

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/icewriter/iceberg/internal/commit/cow"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/icewriter/iceberg/internal/encode"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// columnBloom opens a data file and returns the bloom filter of the named column in row group 0 (nil if none).
func columnBloom(t *testing.T, tbl *table.Table, path, column string) metadata.BloomFilter {
	t.Helper()
	fs, err := tbl.FS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	rdr, err := file.NewParquetReader(f)
	if err != nil {
		t.Fatal(err)
	}
	col := rdr.MetaData().Schema.ColumnIndexByName(column)
	if col < 0 {
		t.Fatalf("no column %q in %s", column, path)
	}
	rg, err := rdr.GetBloomFilterReader().RowGroup(0)
	if err != nil {
		t.Fatal(err)
	}
	bf, err := rg.GetColumnBloomFilter(col)
	if err != nil {
		t.Fatal(err)
	}
	return bf
}

// TestKeyColumnsCarryBloomFilters: every file a keyed writer writes has a bloom filter on the key column, sized
// for the file's rows (about 1.2 B a key, not iceberg-go's fixed 1 MiB), holding every key and rejecting keys
// it does not hold at about the 1% false-positive rate; other columns have none, and a table property turning
// the filter off wins.
func TestKeyColumnsCarryBloomFilters(t *testing.T) {
	t.Parallel() // see TestMain
	w := idNameWriter(t, 2, 1000, WithCreate(idNameSchema, IdentifierFields("id")))
	tasks := tabletest.LiveDataFiles(t, w.Table())
	if len(tasks) != 2 {
		t.Fatalf("%d data files, want 2", len(tasks))
	}
	for _, task := range tasks {
		bf := columnBloom(t, w.Table(), task.File.FilePath(), "id")
		if bf == nil {
			t.Fatalf("%s: no bloom filter on the key column", task.File.FilePath())
		}
		if got, want := bf.Size(), encode.BloomBytes(1000); got != want || want != 2048 {
			t.Fatalf("bloom filter of %d B, want %d (2 KiB for 1,000 keys)", got, want)
		}
		// The files hold ids [0, 1000) and [1000, 2000).
		first := int64(0)
		if !bf.CheckHash(metadata.GetHash(bf.Hasher(), int64(0))) {
			first = 1000
		}
		for id := first; id < first+1000; id++ {
			if !bf.CheckHash(metadata.GetHash(bf.Hasher(), id)) {
				t.Fatalf("bloom filter misses key %d it holds", id)
			}
		}
		falsePos := 0
		for id := int64(10_000); id < 20_000; id++ {
			if bf.CheckHash(metadata.GetHash(bf.Hasher(), id)) {
				falsePos++
			}
		}
		if falsePos > 300 {
			t.Fatalf("%d false positives in 10,000 absent keys (sized for 1%%)", falsePos)
		}
		if columnBloom(t, w.Table(), task.File.FilePath(), "name") != nil {
			t.Fatal("bloom filter on a non-key column")
		}
	}

	off := idNameWriter(t, 1, 1000, WithCreate(idNameSchema, IdentifierFields("id"),
		TableProperties(map[string]string{table.ParquetBloomFilterColumnEnabledKeyPrefix + ".id": "false"})))
	if columnBloom(t, off.Table(), tabletest.LiveDataFiles(t, off.Table())[0].File.FilePath(), "id") != nil {
		t.Fatal("bloom filter written though the table property turns it off")
	}
	plain := idNameWriter(t, 1, 1000, WithCreate(idNameSchema))
	if columnBloom(t, plain.Table(), tabletest.LiveDataFiles(t, plain.Table())[0].File.FilePath(), "id") != nil {
		t.Fatal("bloom filter written on a table without keys")
	}
}

func TestBloomBytes(t *testing.T) {
	for _, c := range []struct{ ndv, want int64 }{{0, 32}, {10, 32}, {1000, 2048}, {131072, 256 << 10}, {1 << 30, 1 << 20}} {
		if got := encode.BloomBytes(c.ndv); got != c.want {
			t.Errorf("bloomBytes(%d) = %d, want %d", c.ndv, got, c.want)
		}
	}
}

// checkBloomSizes fails when a data file's key-column bloom filter is more than twice the size its own
// rows need: the README promises a filter "sized for the file's rows". Files in skip are not checked; it
// returns how many were.
func checkBloomSizes(t *testing.T, w *Writer, wantFiles func(n int) bool, skip map[string]bool) int {
	t.Helper()
	tasks := tabletest.LiveDataFiles(t, w.Table())
	if !wantFiles(len(tasks)) {
		t.Fatalf("setup: %d data files", len(tasks))
	}
	checked := 0
	for _, task := range tasks {
		if skip[task.File.FilePath()] {
			continue
		}
		checked++
		bf := columnBloom(t, w.Table(), task.File.FilePath(), "id")
		if bf == nil {
			t.Fatalf("%s: no bloom filter on the key column", task.File.FilePath())
		}
		if limit := 2 * encode.BloomBytes(task.File.Count()); bf.Size() > limit {
			t.Fatalf("file of %d rows and %d B has a %d B bloom filter on its key column; its rows need %d B",
				task.File.Count(), task.File.FileSizeBytes(), bf.Size(), encode.BloomBytes(task.File.Count()))
		}
	}
	return checked
}

// TestBloomSizedForPartitionFile: a batch spread over 16 bucket partitions writes 16 files of about 1,000
// rows each; every file's filter fits its rows (sized for the largest partition of the batch), the first
// batch's as well as the second's.
func TestBloomSizedForPartitionFile(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	w := idNameWriter(t, 1, 16_000, WithCreate(idNameSchema, IdentifierFields("id"), PartitionBy("bucket(16, id)")))
	if err := w.Write(ctx, idNameRows(16_000, 16_000)); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	checked := checkBloomSizes(t, w, func(n int) bool { return n == 32 }, nil)
	if checked != 32 {
		t.Fatalf("the second batch wrote %d files, want 16", checked)
	}
}

// TestBloomSizedForSkewedPartitions: a batch of one partition of 4,000 rows and 60 of one row each, written in
// chunks of 16 partitions: each single-row file gets a filter for its row, not the large partition's.
func TestBloomSizedForSkewedPartitions(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	w := idNameWriter(t, 0, 0, WithCreate(idNameSchema, IdentifierFields("id"), PartitionBy("identity(name)")),
		WithFanoutForTest(16, 0))
	ids := make([]int64, 4000)
	for i := range ids {
		ids[i] = int64(i)
	}
	big := namedRows(ids, "big")
	defer big.Release()
	if err := w.Write(ctx, big); err != nil {
		t.Fatal(err)
	}
	for i := range int64(60) {
		one := namedRows([]int64{10_000 + i}, fmt.Sprint("single", i))
		if err := w.Write(ctx, one); err != nil {
			t.Fatal(err)
		}
		one.Release()
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	checkBloomSizes(t, w, func(n int) bool { return n == 61 }, nil)
}

// TestBloomSizedForCompactedFile: compacting 20 files of 100 rows writes one file of 2,000 rows whose key-column
// filter is sized for those rows (at most twice what they need), not for a full row group (131,072 rows: 256 KiB).
func TestBloomSizedForCompactedFile(t *testing.T) {
	t.Parallel() // see TestMain
	w := idNameWriter(t, 20, 100, WithCreate(idNameSchema, IdentifierFields("id")))
	if _, err := w.Compact(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkBloomSizes(t, w, func(n int) bool { return n == 1 }, nil)
}

// countingIO counts the bytes read from data files.
type countingIO struct {
	iceio.IO
	read *atomic.Int64
}

func (c countingIO) Open(name string) (iceio.File, error) {
	f, err := c.IO.Open(name)
	if err != nil {
		return nil, err
	}
	return countingFile{File: f, read: c.read}, nil
}

type countingFile struct {
	iceio.File
	read *atomic.Int64
}

func (f countingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.read.Add(int64(n))
	return n, err
}

func (f countingFile) Read(p []byte) (int, error) {
	n, err := f.File.Read(p)
	f.read.Add(int64(n))
	return n, err
}

// TestCopyOnWriteConfirmSkipsByBloom: confirming a candidate file for a key inside its min/max range that the
// file does not hold reads the footer and the bloom filter, not the key column; with the filter turned off the
// key column is read.
func TestCopyOnWriteConfirmSkipsByBloom(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	const rows = 20_000
	read := func(props map[string]string, key int64) (bool, int64) {
		t.Helper()
		// Even ids only, 0 the smallest: an odd id is inside the file's min/max range and absent.
		w := idNameWriter(t, 0, 0, WithCreate(idNameSchema, IdentifierFields("id"), TableProperties(props)))
		b := array.NewRecordBuilder(memory.DefaultAllocator, idNameSchema)
		rng := rand.New(rand.NewPCG(1, 2))
		for i := 0; i < rows; i++ {
			id := int64(2 * i)
			if i > 0 && i < rows-1 {
				id = 2 * rng.Int64N(1<<40) // random ids: the key column does not compress away
			}
			b.Field(0).(*array.Int64Builder).Append(id)
			b.Field(1).(*array.StringBuilder).Append("x")
		}
		rec := b.NewRecordBatch()
		b.Release()
		if err := w.Write(ctx, rec); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		tbl := w.Table()
		var n atomic.Int64
		counted := table.New(tbl.Identifier(), tbl.Metadata(), tbl.MetadataLocation(), func(ctx context.Context) (iceio.IO, error) {
			fs, err := tbl.FS(ctx)
			return countingIO{IO: fs, read: &n}, err
		}, nil)
		kb := array.NewInt64Builder(memory.DefaultAllocator)
		kb.Append(key)
		keyRec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil),
			[]arrow.Array{kb.NewArray()}, 1)
		tasks := tabletest.LiveDataFiles(t, tbl)
		if len(tasks) != 1 {
			t.Fatalf("%d files, want 1", len(tasks))
		}
		hit, err := cow.FileHoldsKey(ctx, counted, tbl.CurrentSnapshot().SnapshotID, tasks[0], []arrow.RecordBatch{keyRec})
		if err != nil {
			t.Fatal(err)
		}
		return hit, n.Load()
	}
	hitPresent, present := read(nil, 0)
	hitAbsent, absent := read(nil, 777)
	hitOff, off := read(map[string]string{table.ParquetBloomFilterColumnEnabledKeyPrefix + ".id": "false"}, 777)
	t.Logf("bytes read to confirm: key held %d, key absent %d, key absent without bloom filter %d", present, absent, off)
	if !hitPresent || hitAbsent || hitOff {
		t.Fatalf("confirm says held=%v absent=%v absent-no-bloom=%v", hitPresent, hitAbsent, hitOff)
	}
	// The id column of 20,000 random int64 is over 100 KB however it is encoded; the filter is 32 KiB.
	if absent >= present || absent >= off || off-absent < 50_000 {
		t.Fatalf("the bloom filter did not spare the key column: %d B read with it, %d B without, %d B for a held key", absent, off, present)
	}
}
