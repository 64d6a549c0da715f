package posdelete

import (
	"context"
	"maps"
	"path/filepath"
	"slices"
	"testing"

	ice "github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/dv"
)

// dataFile is the data file a position delete file names.
type dataFile struct{ path string }

func (f dataFile) FilePath() string       { return f.path }
func (f dataFile) SpecID() int32          { return 0 }
func (f dataFile) Partition() map[int]any { return nil }

// TestWriteRead: a file Write wrote reads back (Read) as the data file's positions, sorted, and its metadata
// names the data file (referenced_data_file, file_path bounds) and counts the positions; no positions is an
// error.
func TestWriteRead(t *testing.T) {
	sc := ice.NewSchema(0, ice.NestedField{ID: 1, Name: "id", Type: ice.PrimitiveTypes.Int64, Required: true})
	meta, err := table.NewMetadata(sc, ice.UnpartitionedSpec, table.UnsortedSortOrder, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	df := dataFile{path: "s3://bucket/data/a.parquet"}
	bm := dv.NewRoaringPositionBitmap()
	want := []uint64{9, 1, 70000, 5}
	for _, p := range want {
		bm.Set(p)
	}
	path := filepath.Join(t.TempDir(), "pos.parquet")
	f, err := Write(context.Background(), iceio.LocalFS{}, meta, df, bm, path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Count() != int64(len(want)) || f.ContentType() != ice.EntryContentPosDeletes {
		t.Fatalf("%d rows of %v, want %d position deletes", f.Count(), f.ContentType(), len(want))
	}
	if ref := f.ReferencedDataFile(); ref == nil || *ref != df.path {
		t.Fatalf("referenced data file %v, want %s", ref, df.path)
	}
	if lo, hi := string(f.LowerBoundValues()[PathID]), string(f.UpperBoundValues()[PathID]); lo != df.path || hi != df.path {
		t.Fatalf("file_path bounds %q, %q, want %q", lo, hi, df.path)
	}
	got, err := Read(iceio.LocalFS{}, f)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(want)
	if !slices.Equal(slices.Collect(maps.Keys(got)), []string{df.path}) || !slices.Equal(got[df.path], want) {
		t.Fatalf("read %v, want %s: %v", got, df.path, want)
	}
	if _, err := Write(context.Background(), iceio.LocalFS{}, meta, df, dv.NewRoaringPositionBitmap(), path+"2"); err == nil {
		t.Fatal("a file of no positions written")
	}
}
