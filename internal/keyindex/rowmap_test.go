package keyindex

import (
	"fmt"
	"testing"

	ice "github.com/apache/iceberg-go"
	"github.com/icewriter/iceberg/internal/keyindex/keyenc"
)

// Split hands each file its rows' keys only when the files add up to the map; any other answer would put keys
// at wrong positions, so it refuses (the caller reads the files back): row counts that do not add up, a
// partition group whose files hold two partition values (iceberg-go split it further than the encoder's
// grouping), and two groups in one partition (it joined them).
func TestRowMapSplit(t *testing.T) {
	var keys keyenc.List
	for i := range 6 {
		keys.Add(keyenc.AppendInt(nil, int64(i)))
	}
	file := func(n int64, part int32) ice.DataFile {
		t.Helper()
		b, err := ice.NewDataFileBuilder(*ice.UnpartitionedSpec, ice.EntryContentData,
			fmt.Sprintf("f-%d-%d.parquet", part, n), ice.ParquetFile, map[int]any{1000: part}, nil, nil, n, 1)
		if err != nil {
			t.Fatal(err)
		}
		return b.Build()
	}
	rowsOf := func(out []FileKeys) [][]int64 {
		var got [][]int64
		for _, fk := range out {
			var rows []int64
			for _, k := range fk.Keys.All() {
				rows = append(rows, int64(k[1]))
			}
			got = append(got, rows)
		}
		return got
	}
	if out, ok := Unpartitioned.Split(&keys, []ice.DataFile{file(4, 0), file(2, 0)}); !ok ||
		fmt.Sprint(rowsOf(out)) != "[[0 1 2 3] [4 5]]" {
		t.Fatalf("unpartitioned: %v %v", rowsOf(out), ok)
	}
	if _, ok := Unpartitioned.Split(&keys, []ice.DataFile{file(4, 0), file(1, 0)}); ok {
		t.Fatal("unpartitioned: 5 rows in the files for 6 keys: want a refusal")
	}
	grouped := func() *RowMap {
		m := &RowMap{}
		m.Add([]int32{1, 3, 5})
		m.Add([]int32{0, 2, 4})
		return m
	}
	if out, ok := grouped().Split(&keys, []ice.DataFile{file(2, 7), file(1, 7), file(3, 9)}); !ok ||
		fmt.Sprint(rowsOf(out)) != "[[1 3] [5] [0 2 4]]" {
		t.Fatalf("partitioned: %v %v", rowsOf(out), ok)
	}
	for name, files := range map[string][]ice.DataFile{
		"a group's files in two partitions": {file(2, 7), file(1, 8), file(3, 9)},
		"two groups in one partition":       {file(3, 7), file(3, 7)},
		"a file across two groups":          {file(2, 7), file(2, 9), file(2, 9)},
		"rows short":                        {file(3, 7), file(2, 9)},
	} {
		if _, ok := grouped().Split(&keys, files); ok {
			t.Fatalf("partitioned, %s: want a refusal", name)
		}
	}
}
