package maintain

import (
	"testing"

	ice "github.com/apache/iceberg-go"
)

// TestRewriteRowsOutput: a rewrite's output rows are its sources' live rows in read order, so a source position
// maps past the rows deleted before it, across output files; a deleted row, a position past the file's end and
// a file the rewrite did not read map nowhere.
func TestRewriteRowsOutput(t *testing.T) {
	out := func(path string, n int64) ice.DataFile {
		b, err := ice.NewDataFileBuilder(*ice.UnpartitionedSpec, ice.EntryContentData, "file:///t/"+path, ice.ParquetFile,
			nil, nil, nil, n, 100*n)
		if err != nil {
			t.Fatal(err)
		}
		return b.Build()
	}
	m := &rewriteRows{
		sources: map[string]*rowSource{
			"a": {offset: 0, count: 5, dead: []uint64{1, 3}}, // live 0, 2, 4: output rows 0..2
			"b": {offset: 3, count: 4},                       // output rows 3..6
		},
		outputs: []ice.DataFile{out("x", 4), out("y", 3)},
		ends:    []int64{4, 7},
	}
	for _, c := range []struct {
		src  string
		pos  uint64
		file int
		at   int64
		ok   bool
	}{
		{"a", 0, 0, 0, true}, {"a", 1, 0, 0, false}, {"a", 2, 0, 1, true}, {"a", 3, 0, 0, false}, {"a", 4, 0, 2, true},
		{"b", 0, 0, 3, true}, {"b", 1, 1, 0, true}, {"b", 3, 1, 2, true}, {"b", 4, 0, 0, false}, {"c", 0, 0, 0, false},
	} {
		file, at, ok := m.output(c.src, c.pos)
		if ok != c.ok || (ok && (file != c.file || at != c.at)) {
			t.Errorf("output(%s, %d) = %d, %d, %v; want %d, %d, %v", c.src, c.pos, file, at, ok, c.file, c.at, c.ok)
		}
	}
}
