package storage_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	iceio "github.com/apache/iceberg-go/io"

	_ "github.com/icewriter/iceberg/storage"
)

// The manifests and manifest lists a process writes are read back from memory: a commit's fast append reads
// its parent's manifest list, which the process's previous commit wrote. The test removes the objects behind
// the file system's back: a kept file still opens, a data file does not, and a file removed through the file
// system is gone.
func TestWrittenMetadataFilesAreReadFromMemory(t *testing.T) {
	dir := t.TempDir()
	fsys, err := iceio.LoadFS(context.Background(), nil, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	wfs := fsys.(iceio.WriteFileIO)
	write := func(name string, data []byte) {
		t.Helper()
		w, err := wfs.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		// Through ReadFrom, as io.Copy writes: the kept copy must see those bytes too.
		if _, err := io.Copy(w, bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	list := filepath.Join(dir, "metadata", "snap-1.avro")
	data := filepath.Join(dir, "data", "f.parquet")
	removed := filepath.Join(dir, "metadata", "m1.avro")
	content := bytes.Repeat([]byte("manifest list "), 1000)
	write("file://"+list, content)
	write("file://"+data, []byte("parquet"))
	write("file://"+removed, []byte("manifest"))
	for _, p := range []string{list, data} {
		if err := os.Remove(p); err != nil { // behind the file system's back
			t.Fatal(err)
		}
	}

	got, err := fsys.(iceio.ReadFileIO).ReadFile("file://" + list)
	if err != nil {
		t.Fatalf("a manifest list this process wrote: %v", err)
	}
	if !bytes.Equal(got, content) {
		t.Fatalf("read %d bytes back, wrote %d", len(got), len(content))
	}
	f, err := fsys.Open("file://" + list)
	if err != nil {
		t.Fatal(err)
	}
	tail := make([]byte, 5)
	if _, err := f.ReadAt(tail, int64(len(content)-5)); err != nil || string(tail) != "list " {
		t.Fatalf("ReadAt the end: %q, %v", tail, err)
	}
	if st, err := f.Stat(); err != nil || st.Size() != int64(len(content)) || st.Name() != "snap-1.avro" {
		t.Fatalf("Stat: %v, %v", st, err)
	}
	_ = f.Close()

	if _, err := fsys.Open("file://" + data); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a data file is not kept: open after removal = %v, want not exist", err)
	}
	if err := fsys.Remove("file://" + removed); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Open("file://" + removed); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a kept file removed through the file system: open = %v, want not exist", err)
	}
}
