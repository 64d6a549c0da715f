package iceberg

import (
	"fmt"
	"reflect"
	"runtime"
	"testing"

	ice "github.com/apache/iceberg-go"
	"github.com/icewriter/iceberg/internal/encode"
)

// TestFileMetadataMemory measures what a data file's metadata holds from its write to its commit, on tables of
// 6 and 16 columns partitioned by identity, a file per partition: fileMetaBytes covers a DataFile as
// iceberg-go's WriteRecords builds it and as a run's commit holds it (decoded from its pack, every accessor
// read), within 1.5 times; a pack holds at most what it counts (memBytes) and under a quarter of the DataFiles
// it replaces; and every file decodes from its pack as it was written. On 6 columns it also measures what the
// key index keeps of the same files (checkFileRefMemory). 200 files a table (ICEWRITER_SOAK=1: 400).
func TestFileMetadataMemory(t *testing.T) {
	for _, cols := range []int{6, 16} {
		t.Run(fmt.Sprintf("columns=%d", cols), func(t *testing.T) {
			n := soak(t, 200, 400)
			files := int64(n)
			before := heapInUse()
			tbl, schema, built := wideFiles(t, cols, n)
			builtCost := (heapInUse() - before) / files

			warm := encode.NewPackedFiles(tbl) // iceberg-go caches the Avro schema of the table's entries at first use
			if err := warm.Add(built[:1]); err != nil {
				t.Fatal(err)
			}
			before = heapInUse()
			pack := encode.NewPackedFiles(tbl)
			if err := pack.Add(built); err != nil {
				t.Fatal(err)
			}
			pack.Trim()
			packCost := heapInUse() - before

			before = heapInUse()
			decoded, err := pack.Unpack(nil)
			if err != nil {
				t.Fatal(err)
			}
			decodedCost := (heapInUse() - before) / files
			before = heapInUse()
			for _, df := range decoded {
				readDataFile(df)
			}
			readCost := decodedCost + (heapInUse()-before)/files
			before = heapInUse()
			for _, df := range built {
				readDataFile(df)
			}
			builtReadCost := builtCost + (heapInUse()-before)/files
			for i, df := range decoded {
				sameDataFile(t, built[i], df)
			}
			est := fileMetaBytes(schema)
			t.Logf("per file: built %d B (%d B read), decoded %d B (%d B read), estimate %d B; packed %d B (counted %d B)",
				builtCost, builtReadCost, decodedCost, readCost, est, packCost/files, pack.MemBytes()/files)
			for name, cost := range map[string]int64{"as built": builtCost, "as built and read": builtReadCost,
				"decoded": decodedCost, "decoded and read": readCost} {
				if cost > est {
					t.Errorf("a file's metadata %s takes %d B, over fileMetaBytes' %d B", name, cost, est)
				}
			}
			if most := max(builtReadCost, readCost); 2*est > 3*most {
				t.Errorf("fileMetaBytes estimates %d B, over 1.5 times the most a file took (%d B)", est, most)
			}
			if packCost > pack.MemBytes()*21/20 {
				t.Errorf("a pack of %d files takes %d B, counted as %d B", files, packCost, pack.MemBytes())
			}
			if 4*pack.MemBytes() > builtCost*files {
				t.Errorf("a pack of %d files takes %d B, the files as built %d B: not a quarter", files, pack.MemBytes(), builtCost*files)
			}
			runtime.KeepAlive(decoded)
			if cols == 6 {
				checkFileRefMemory(t, schema, built)
			}
			runtime.KeepAlive(built)
		})
	}
}

// readDataFile calls every accessor of df.
func readDataFile(df ice.DataFile) {
	_, _, _, _ = df.Partition(), df.ColumnSizes(), df.ValueCounts(), df.NullValueCounts()
	_, _, _ = df.NaNValueCounts(), df.LowerBoundValues(), df.UpperBoundValues()
}

// sameDataFile fails unless got carries everything of want a manifest entry does.
func sameDataFile(t *testing.T, want, got ice.DataFile) {
	t.Helper()
	same := func(what string, a, b any) {
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%s: %s %v, want %v", want.FilePath(), what, b, a)
		}
	}
	same("path", want.FilePath(), got.FilePath())
	same("content", want.ContentType(), got.ContentType())
	same("format", want.FileFormat(), got.FileFormat())
	same("partition", want.Partition(), got.Partition())
	same("spec", want.SpecID(), got.SpecID())
	same("rows", want.Count(), got.Count())
	same("size", want.FileSizeBytes(), got.FileSizeBytes())
	same("column sizes", want.ColumnSizes(), got.ColumnSizes())
	same("value counts", want.ValueCounts(), got.ValueCounts())
	same("null counts", want.NullValueCounts(), got.NullValueCounts())
	same("NaN counts", want.NaNValueCounts(), got.NaNValueCounts())
	same("lower bounds", want.LowerBoundValues(), got.LowerBoundValues())
	same("upper bounds", want.UpperBoundValues(), got.UpperBoundValues())
	same("split offsets", want.SplitOffsets(), got.SplitOffsets())
	same("sort order", want.SortOrderID(), got.SortOrderID())
	same("key metadata", want.KeyMetadata(), got.KeyMetadata())
	same("first row id", want.FirstRowID(), got.FirstRowID())
}
