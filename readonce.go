package iceberg

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strconv"
	"sync"
	"time"

	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/icewriter/iceberg/storage"
)

// readOnce reads each of a few named files from storage once, for a stage that reads them several times
// through iceberg-go's scanner: copy-on-write reads a candidate data file (with its delete files) to confirm
// that it holds a key, then again to rewrite it. Each read of the scanner opens the file again (a request for
// its end, where the footer is) and fetches each column chunk it needs in a request of its own: iceberg-go
// builds its Parquet readers itself, with neither arrow-go's buffered streams nor pre-buffering, and takes no
// reader properties from its caller, so the requests can only be saved below it, in the file system.
//
// A named file of at most max bytes is read whole in one request (ReadFile) the first time it is opened and
// served from memory after; a larger one is opened once and kept open, so its footer is read once and only its
// column chunks are fetched again. The memory is the caller's: what it names is held until close.
type readOnce struct {
	max   int64
	mu    sync.Mutex
	files map[string]*onceFile // the named files, by path
}

// onceFile is a named file: read on its first open, by whichever file system opened it.
type onceFile struct {
	size int64 // as the manifest gives it
	once sync.Once
	data []byte     // read whole (size <= max)
	open iceio.File // kept open (larger)
	mod  time.Time
	err  error
}

// newReadOnce returns a readOnce that reads files of at most max bytes whole.
func newReadOnce(max int64) *readOnce {
	return &readOnce{max: max, files: map[string]*onceFile{}}
}

// add names a file to read once; size is its size in bytes, as its manifest entry gives it.
func (r *readOnce) add(name string, size int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.files[name]; !ok {
		r.files[name] = &onceFile{size: size}
	}
}

func (r *readOnce) file(name string) *onceFile {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.files[name]
}

// close closes the files kept open and drops what was read.
func (r *readOnce) close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var first error
	for name, f := range r.files {
		if f.open != nil {
			if err := f.open.Close(); err != nil && first == nil {
				first = fmt.Errorf("iceberg: close %s: %w", name, err)
			}
		}
		delete(r.files, name)
	}
	return first
}

// table returns tbl reading through r: a table to scan (it writes nothing; use tbl for writes).
func (r *readOnce) table(tbl *table.Table) *table.Table {
	return table.New(tbl.Identifier(), tbl.Metadata(), tbl.MetadataLocation(), func(ctx context.Context) (iceio.IO, error) {
		fsys, err := tbl.FS(ctx)
		if err != nil {
			return nil, err
		}
		return &onceIO{IO: fsys, r: r}, nil
	}, nil)
}

// onceIO is a table's file system that opens the files a readOnce names through it.
type onceIO struct {
	iceio.IO
	r *readOnce
}

var _ iceio.ReadFileIO = (*onceIO)(nil)

func (o *onceIO) Open(name string) (iceio.File, error) {
	f := o.r.file(name)
	if f == nil {
		return o.IO.Open(name)
	}
	if err := f.read(o.IO, name, o.r.max); err != nil {
		return nil, err
	}
	if f.open != nil {
		return keptOpenFile{f.open}, nil
	}
	return &memoryFile{Reader: bytes.NewReader(f.data), name: name, mod: f.mod}, nil
}

func (o *onceIO) ReadFile(name string) ([]byte, error) {
	f := o.r.file(name)
	if f == nil {
		return readWhole(o.IO, name)
	}
	if err := f.read(o.IO, name, o.r.max); err != nil {
		return nil, err
	}
	if f.open == nil {
		return bytes.Clone(f.data), nil // the caller may modify what ReadFile returns
	}
	st, err := f.open.Stat()
	if err != nil {
		return nil, err
	}
	return io.ReadAll(io.NewSectionReader(f.open, 0, st.Size()))
}

// read reads f's file through fsys on its first call.
func (f *onceFile) read(fsys iceio.IO, name string, max int64) error {
	f.once.Do(func() { f.load(fsys, name, max) })
	return f.err
}

// load reads f's file through fsys: whole when it is at most max bytes, else opened and kept open.
func (f *onceFile) load(fsys iceio.IO, name string, max int64) {
	if f.size > max {
		f.open, f.err = fsys.Open(name)
		return
	}
	f.data, f.err = readWhole(fsys, name)
	f.mod = time.Now()
}

// readWhole reads a file whole: in one request through a file system of package storage.
func readWhole(fsys iceio.IO, name string) ([]byte, error) {
	if rf, ok := fsys.(iceio.ReadFileIO); ok {
		return rf.ReadFile(name)
	}
	file, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	return io.ReadAll(file)
}

// keptOpenFile is a file readOnce keeps open: closing it leaves it open for the next reader (readOnce.close
// closes it). Its readers use ReadAt, which is safe for concurrent use; a scanner's Seek to the end (for the
// size) moves no other reader's ReadAt.
type keptOpenFile struct{ iceio.File }

func (keptOpenFile) Close() error { return nil }

// memoryFile is a file read whole, served from memory.
type memoryFile struct {
	*bytes.Reader
	name string
	mod  time.Time
}

var _ iceio.File = (*memoryFile)(nil)

func (f *memoryFile) Close() error               { return nil }
func (f *memoryFile) Stat() (fs.FileInfo, error) { return f, nil }
func (f *memoryFile) Name() string               { return path.Base(f.name) }
func (f *memoryFile) Mode() fs.FileMode          { return fs.ModeIrregular }
func (f *memoryFile) ModTime() time.Time         { return f.mod }
func (f *memoryFile) IsDir() bool                { return false }
func (f *memoryFile) Sys() any                   { return nil }

// defaultWholeReadBytes is the largest file a copy-on-write rewrite reads whole when the table sets no upload
// part size: S3's default part size, the largest file the writer uploads in one request.
const defaultWholeReadBytes = 8 << 20

// wholeReadBytes is the largest file a stage reads whole into memory on tbl (see readOnce): the table's upload
// part size (storage.PartSizeKey) when set, the most the writer holds of a file it uploads; else
// defaultWholeReadBytes.
func wholeReadBytes(tbl *table.Table) int64 {
	if n, err := strconv.ParseInt(tbl.Metadata().Properties()[storage.PartSizeKey], 10, 64); err == nil && n > 0 {
		return n
	}
	return defaultWholeReadBytes
}
