// Package storagetest is the conformance suite every storage backend runs, in the spirit of gocloud.dev's
// drivertest: it goes through iceberg-go's io interfaces (the way tables read and write files), not through the
// bucket, so it checks the whole path a table uses: scheme registration, the caching factory, location parsing,
// the blob driver and the server.
//
//	func TestConformance(t *testing.T) {
//		storagetest.Run(t, storagetest.Config{Root: "s3://bucket/conformance", Props: props})
//	}
package storagetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"strings"
	"testing"
	"time"

	iceio "github.com/apache/iceberg-go/io"
	"github.com/google/uuid"

	"github.com/icewriter/iceberg/storage"
)

// Config tells the suite where to write.
type Config struct {
	// Root is a location prefix (s3://bucket/prefix, file:///tmp/dir, mem://bucket/prefix) that the suite may
	// write under. Each run writes below a fresh sub-folder of it and removes what it wrote.
	Root string
	// Props are the storage properties (endpoint, credentials, ...) a catalog would pass.
	Props map[string]string
	// LargeSize is the size of the large-object test in bytes. Default: 20 MiB (several multipart parts).
	// Negative skips it.
	LargeSize int
}

// Run runs the conformance tests as subtests of t.
func Run(t *testing.T, cfg Config) {
	t.Helper()
	if cfg.LargeSize == 0 {
		cfg.LargeSize = 20 << 20
	}
	root := strings.TrimRight(cfg.Root, "/") + "/" + "storagetest-" + uuid.NewString()
	ctx := context.Background()
	fsys, err := iceio.LoadFS(ctx, cfg.Props, root+"/x")
	if err != nil {
		t.Fatalf("storagetest: LoadFS(%s): %v", root, err)
	}
	s := &suite{cfg: cfg, root: root, fs: fsys}
	t.Run("WriteRead", s.testWriteRead)
	t.Run("Create", s.testCreate)
	t.Run("RangeRead", s.testRangeRead)
	t.Run("Seek", s.testSeek)
	t.Run("Missing", s.testMissing)
	t.Run("Overwrite", s.testOverwrite)
	t.Run("List", s.testList)
	t.Run("Delete", s.testDelete)
	t.Run("Large", s.testLarge)
	t.Run("SameClient", s.testSameClient)
}

type suite struct {
	cfg  Config
	root string
	fs   iceio.IO
}

func (s *suite) loc(name string) string { return s.root + "/" + name }

func (s *suite) write(t *testing.T, name string, data []byte) {
	t.Helper()
	w, ok := s.fs.(iceio.WriteFileIO)
	if !ok {
		t.Fatalf("%T does not implement io.WriteFileIO", s.fs)
	}
	if err := w.WriteFile(s.loc(name), data); err != nil {
		t.Fatalf("WriteFile(%s): %v", name, err)
	}
	t.Cleanup(func() { _ = s.fs.Remove(s.loc(name)) })
}

func (s *suite) read(t *testing.T, name string) []byte {
	t.Helper()
	f, err := s.fs.Open(s.loc(name))
	if err != nil {
		t.Fatalf("Open(%s): %v", name, err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return data
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func (s *suite) testWriteRead(t *testing.T) {
	for _, n := range []int{0, 1, 4096, 1<<20 + 7} {
		name := fmt.Sprintf("wr/%d.bin", n)
		data := randomBytes(n)
		s.write(t, name, data)
		if got := s.read(t, name); !bytes.Equal(got, data) {
			t.Errorf("%s: read %d bytes, want %d (equal: false)", name, len(got), len(data))
		}
		f, err := s.fs.Open(s.loc(name))
		if err != nil {
			t.Fatal(err)
		}
		st, err := f.Stat()
		_ = f.Close()
		if err != nil || st.Size() != int64(n) {
			t.Errorf("%s: Stat size %v, %v; want %d", name, st, err, n)
		}
		if r, ok := s.fs.(iceio.ReadFileIO); ok {
			got, err := r.ReadFile(s.loc(name))
			if err != nil || !bytes.Equal(got, data) {
				t.Errorf("ReadFile(%s): %d bytes, %v", name, len(got), err)
			}
		}
	}
}

func (s *suite) testCreate(t *testing.T) {
	w, ok := s.fs.(iceio.WriteFileIO)
	if !ok {
		t.Skipf("%T does not implement io.WriteFileIO", s.fs)
	}
	fw, err := w.Create(s.loc("create/streamed.bin"))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { _ = s.fs.Remove(s.loc("create/streamed.bin")) })
	var want bytes.Buffer
	for i := 0; i < 100; i++ {
		chunk := randomBytes(1000 + i)
		want.Write(chunk)
		if _, err := fw.Write(chunk); err != nil {
			t.Fatalf("Write: %v", err)
		}
	}
	tail := randomBytes(5000)
	want.Write(tail)
	if _, err := fw.ReadFrom(bytes.NewReader(tail)); err != nil {
		t.Fatalf("ReadFrom: %v", err)
	}
	if err := fw.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := s.read(t, "create/streamed.bin"); !bytes.Equal(got, want.Bytes()) {
		t.Errorf("streamed file: read %d bytes, want %d", len(got), want.Len())
	}
}

func (s *suite) testRangeRead(t *testing.T) {
	data := randomBytes(100_000)
	s.write(t, "range.bin", data)
	f, err := s.fs.Open(s.loc("range.bin"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, r := range [][2]int{{0, 10}, {99_990, 10}, {12_345, 54_321}, {50_000, 1}, {0, 100_000}} {
		buf := make([]byte, r[1])
		n, err := f.ReadAt(buf, int64(r[0]))
		if err != nil && !(errors.Is(err, io.EOF) && n == r[1]) {
			t.Errorf("ReadAt(off %d, len %d): %d, %v", r[0], r[1], n, err)
			continue
		}
		if !bytes.Equal(buf[:n], data[r[0]:r[0]+r[1]]) {
			t.Errorf("ReadAt(off %d, len %d): wrong bytes", r[0], r[1])
		}
	}
	// Past the end: a short read with an error, as io.ReaderAt demands. (iceberg-go's blobfs returns
	// io.ErrUnexpectedEOF here rather than io.EOF; both are accepted.)
	buf := make([]byte, 100)
	n, err := f.ReadAt(buf, 99_950)
	if n != 50 || !(errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
		t.Errorf("ReadAt across the end: %d, %v; want 50, io.EOF", n, err)
	} else if !bytes.Equal(buf[:n], data[99_950:]) {
		t.Errorf("ReadAt across the end: wrong bytes")
	}
	// Parquet readers read the footer first: the last 8 bytes.
	footer := make([]byte, 8)
	if n, err := f.ReadAt(footer, int64(len(data)-8)); n != 8 || (err != nil && !errors.Is(err, io.EOF)) || !bytes.Equal(footer, data[len(data)-8:]) {
		t.Errorf("footer ReadAt: %d, %v", n, err)
	}
}

func (s *suite) testSeek(t *testing.T) {
	data := randomBytes(10_000)
	s.write(t, "seek.bin", data)
	f, err := s.fs.Open(s.loc("seek.bin"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if off, err := f.Seek(-100, io.SeekEnd); err != nil || off != 9_900 {
		t.Fatalf("Seek(-100, end) = %d, %v", off, err)
	}
	got, err := io.ReadAll(f)
	if err != nil || !bytes.Equal(got, data[9_900:]) {
		t.Errorf("read after seek: %d bytes, %v", len(got), err)
	}
	if _, err := f.Seek(1000, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	if _, err := io.ReadFull(f, buf); err != nil || !bytes.Equal(buf, data[1000:1010]) {
		t.Errorf("read after Seek(1000): %v", err)
	}
}

func (s *suite) testMissing(t *testing.T) {
	_, err := s.fs.Open(s.loc("missing/nothing-here.bin"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open(missing) = %v, want fs.ErrNotExist", err)
	}
	if r, ok := s.fs.(iceio.ReadFileIO); ok {
		if _, err := r.ReadFile(s.loc("missing/nothing-here.bin")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("ReadFile(missing) = %v, want fs.ErrNotExist", err)
		}
	}
	if st, ok := s.fs.(iceio.StatIO); ok {
		if _, err := st.Stat(s.loc("missing/nothing-here.bin")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Stat(missing) = %v, want fs.ErrNotExist", err)
		}
	}
}

func (s *suite) testOverwrite(t *testing.T) {
	s.write(t, "over.bin", []byte("first version, longer"))
	s.write(t, "over.bin", []byte("second"))
	if got := string(s.read(t, "over.bin")); got != "second" {
		t.Errorf("after overwrite: %q", got)
	}
}

func (s *suite) testList(t *testing.T) {
	l, ok := s.fs.(iceio.ListableIO)
	if !ok {
		t.Skipf("%T does not implement io.ListableIO", s.fs)
	}
	want := []string{"list/a.bin", "list/b.bin", "list/sub/c.bin", "list/sub/deeper/d.bin"}
	for _, n := range want {
		s.write(t, n, []byte(n))
	}
	s.write(t, "listnot/e.bin", []byte("outside")) // shares the prefix "list" but not the folder
	var got []string
	err := l.WalkDir(s.loc("list"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			got = append(got, path)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("WalkDir: %v", err)
	}
	sort.Strings(got)
	if len(got) != len(want) {
		t.Fatalf("WalkDir found %v, want %d files under list/", got, len(want))
	}
	for i, n := range want {
		if !strings.HasSuffix(got[i], n) {
			t.Errorf("WalkDir[%d] = %q, want a path ending in %q", i, got[i], n)
		}
	}
	s.checkList(t, want)
}

// checkList checks storage.List, the listing orphan file removal uses: exactly the files under list/ (not those
// of the sibling listnot/), spelled as the listed location plus their key, with their sizes and modification
// times; a location without files is empty.
func (s *suite) checkList(t *testing.T, want []string) {
	ctx := context.Background()
	listed := map[string]storage.FileInfo{}
	err := storage.List(ctx, s.fs, s.loc("list")+"/", func(f storage.FileInfo) error {
		listed[f.Path] = f
		return nil
	})
	if err != nil {
		t.Fatalf("storage.List: %v", err)
	}
	if len(listed) != len(want) {
		t.Errorf("storage.List found %d files, want %d: %v", len(listed), len(want), listed)
	}
	for _, n := range want {
		f, ok := listed[s.loc(n)]
		switch {
		case !ok:
			t.Errorf("storage.List did not find %s", s.loc(n))
		case f.Size != int64(len(n)) || f.ModTime.IsZero():
			t.Errorf("storage.List: %s has size %d and modification time %v, want %d and a time", n, f.Size, f.ModTime, len(n))
		}
	}
	err = storage.List(ctx, s.fs, s.loc("nothing-here"), func(f storage.FileInfo) error {
		return fmt.Errorf("found %s under a location without files", f.Path)
	})
	if err != nil {
		t.Errorf("storage.List of a location without files: %v", err)
	}
}

func (s *suite) testDelete(t *testing.T) {
	s.write(t, "del.bin", []byte("bye"))
	if err := s.fs.Remove(s.loc("del.bin")); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if _, err := s.fs.Open(s.loc("del.bin")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open after Remove = %v, want fs.ErrNotExist", err)
	}
	if b, ok := s.fs.(iceio.BulkRemovableIO); ok {
		var paths []string
		for i := 0; i < 5; i++ {
			n := fmt.Sprintf("bulk/%d.bin", i)
			s.write(t, n, []byte(n))
			paths = append(paths, s.loc(n))
		}
		deleted, err := b.DeleteFiles(context.Background(), paths)
		if err != nil || len(deleted) != len(paths) {
			t.Errorf("DeleteFiles: %d deleted, %v", len(deleted), err)
		}
		for _, p := range paths {
			if _, err := s.fs.Open(p); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("Open(%s) after DeleteFiles = %v", p, err)
			}
		}
	}
}

func (s *suite) testLarge(t *testing.T) {
	if s.cfg.LargeSize < 0 {
		t.Skip("large object test disabled")
	}
	w, ok := s.fs.(iceio.WriteFileIO)
	if !ok {
		t.Skipf("%T does not implement io.WriteFileIO", s.fs)
	}
	data := randomBytes(s.cfg.LargeSize)
	start := time.Now()
	fw, err := w.Create(s.loc("large.bin"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.fs.Remove(s.loc("large.bin")) })
	// Stream it in 1 MiB writes, as a Parquet writer does.
	for off := 0; off < len(data); off += 1 << 20 {
		end := min(off+1<<20, len(data))
		if _, err := fw.Write(data[off:end]); err != nil {
			t.Fatalf("Write at %d: %v", off, err)
		}
	}
	if err := fw.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	t.Logf("wrote %d MiB in %v", len(data)>>20, time.Since(start))
	got := s.read(t, "large.bin")
	if !bytes.Equal(got, data) {
		t.Fatalf("large object: read %d bytes, want %d, equal false", len(got), len(data))
	}
	f, err := s.fs.Open(s.loc("large.bin"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1000)
	off := int64(len(data) - 1500)
	if n, err := f.ReadAt(buf, off); n != 1000 || (err != nil && !errors.Is(err, io.EOF)) || !bytes.Equal(buf, data[off:off+1000]) {
		t.Errorf("ReadAt in the large object: %d, %v", n, err)
	}
}

// testSameClient checks that a table's repeated file system lookups are served from one cached client: each
// lookup returns a file system bound to its own context, over the bucket the first one opened.
func (s *suite) testSameClient(t *testing.T) {
	scheme, _, _ := strings.Cut(s.root, "://")
	before := storage.Opened(scheme)
	for _, name := range []string{"a", "b"} {
		if _, err := iceio.LoadFS(context.Background(), s.cfg.Props, s.loc(name)); err != nil {
			t.Fatal(err)
		}
	}
	if n := storage.Opened(scheme) - before; n != 0 {
		t.Errorf("two lookups on one bucket and one set of properties opened %d new buckets", n)
	}
}
