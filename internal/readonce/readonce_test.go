package readonce

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	iceio "github.com/apache/iceberg-go/io"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// TestReadOnceOpensANamedFileOnce: readers opening a named file at once, and again after closing it, get its
// bytes from one open of the file system underneath; the first reader reads the open file, the later ones a
// copy read whole in one read (up to max bytes) or the same open file (larger). A file not named is opened
// every time, and ReadFile returns a copy the caller may change.
func TestReadOnceOpensANamedFileOnce(t *testing.T) {
	ctx := context.Background()
	// The counted scheme counts the opens of the file system underneath.
	dir := tabletest.CountedScheme + "://" + filepath.ToSlash(t.TempDir())
	fsys, err := iceio.LoadFS(ctx, nil, dir)
	if err != nil {
		t.Fatal(err)
	}
	wfs := fsys.(iceio.WriteFileIO)
	data := make([]byte, 300_000)
	rng := rand.New(rand.NewPCG(19, 1))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	named, other := dir+"/named.parquet", dir+"/other.parquet"
	for _, p := range []string{named, other} {
		if err := wfs.WriteFile(p, data); err != nil {
			t.Fatal(err)
		}
	}

	for _, tc := range []struct {
		name     string
		max      int64
		maxReads int64 // ReadAt calls on the file underneath, of the 16 readers'
	}{{"read-whole", 1 << 20, 3}, {"kept-open", 1 << 10, 16}} {
		t.Run(tc.name, func(t *testing.T) {
			opened := map[string]int64{} // the opens of each file before this case
			for _, p := range []string{named, other} {
				opened[p], _ = tabletest.FileReads(p)
			}
			opensOf := func(p string) int64 {
				o, _ := tabletest.FileReads(p)
				return o - opened[p]
			}
			r := New(tc.max)
			r.Add(named)
			var reads atomic.Int64
			o := &onceIO{IO: readAtCounter{wfs, &reads}, r: r}
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for round := range 2 { // opened, closed, opened again
						f, err := o.Open(named)
						if err != nil {
							t.Error(err)
							return
						}
						off := int64((g*7919 + round*104729) % (len(data) - 1000))
						got := make([]byte, 1000)
						if _, err := f.ReadAt(got, off); err != nil || !bytes.Equal(got, data[off:off+1000]) {
							t.Errorf("ReadAt %d: %v, or other bytes", off, err)
						}
						if err := f.Close(); err != nil {
							t.Error(err)
						}
					}
				}()
			}
			wg.Wait()
			if n := opensOf(named); n != 1 {
				t.Errorf("the named file was opened %d times underneath, want 1", n)
			}
			// read-whole: the first reader's reads of the open file (1 or 2), then one read of it whole.
			if n := reads.Load(); n > tc.maxReads {
				t.Errorf("%d reads of the open file underneath, want at most %d", n, tc.maxReads)
			}
			got, err := o.ReadFile(named)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("ReadFile: %v, or other bytes", err)
			}
			got[0]++
			if again, _ := o.ReadFile(named); !bytes.Equal(again, data) {
				t.Fatal("a change to what ReadFile returned changed what the next read returns")
			}
			for range 2 {
				f, err := o.Open(other)
				if err != nil {
					t.Fatal(err)
				}
				if all, err := io.ReadAll(f); err != nil || !bytes.Equal(all, data) {
					t.Fatalf("read the other file: %v, or other bytes", err)
				}
				if err := f.Close(); err != nil {
					t.Fatal(err)
				}
			}
			if n := opensOf(other); n != 2 {
				t.Errorf("a file not named was opened %d times for 2 opens, want 2", n)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if r.file(named) != nil {
				t.Error("close kept the named file")
			}
		})
	}
}

// readAtCounter counts the ReadAt calls on the files it opens.
type readAtCounter struct {
	iceio.WriteFileIO
	reads *atomic.Int64
}

func (c readAtCounter) Open(name string) (iceio.File, error) {
	f, err := c.WriteFileIO.Open(name)
	if err != nil {
		return nil, err
	}
	return countedReadAt{f, c.reads}, nil
}

type countedReadAt struct {
	iceio.File
	reads *atomic.Int64
}

func (f countedReadAt) ReadAt(p []byte, off int64) (int, error) {
	f.reads.Add(1)
	return f.File.ReadAt(p, off)
}
