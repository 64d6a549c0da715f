package readonce

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

// Files opens each of a few named files once, for a stage that reads them several times
// through iceberg-go's scanner: copy-on-write reads a candidate data file (with its delete files) to confirm
// that it holds a key, then again to rewrite it. Each read of the scanner opens the file again (a request for
// its end, where the footer is) and fetches each column chunk it needs in a request of its own: iceberg-go
// builds its Parquet readers itself, with neither arrow-go's buffered streams nor pre-buffering, and takes no
// reader properties from its caller, so the requests can only be saved below it, in the file system.
//
// A named file is opened once and kept open, so its footer is read once (by the first open's request, which
// reads the file's end). A later open of a file of at most max bytes reads it whole, in one ranged read (no
// request when the first one held all of it), and serves it from memory; a larger one shares the open file,
// fetching only its column chunks again. The first open reads no more than before: a candidate that turns out
// to hold no key costs what it did (its end and its key column), not the whole file. The memory is the
// caller's: what it names is held until close.
type Files struct {
	max   int64
	mu    sync.Mutex
	files map[string]*onceFile // the named files, by path
}

// onceFile is a named file: opened by whichever file system opens it first.
type onceFile struct {
	mu   sync.Mutex
	open iceio.File // kept open from the first open
	data []byte     // read whole on a later open (at most max bytes)
	mod  time.Time
	err  error
}

// New returns a Files that reads files of at most max bytes whole.
func New(max int64) *Files {
	return &Files{max: max, files: map[string]*onceFile{}}
}

// Add names a file to read once.
func (r *Files) Add(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.files[name]; !ok {
		r.files[name] = &onceFile{}
	}
}

func (r *Files) file(name string) *onceFile {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.files[name]
}

// Close closes the files kept open and drops what was read.
func (r *Files) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var first error
	for name, f := range r.files {
		f.mu.Lock()
		open := f.open
		f.mu.Unlock()
		if open != nil {
			if err := open.Close(); err != nil && first == nil {
				first = fmt.Errorf("iceberg: close %s: %w", name, err)
			}
		}
		delete(r.files, name)
	}
	return first
}

// Table returns tbl reading through r: a table to scan (it writes nothing; use tbl for writes).
func (r *Files) Table(tbl *table.Table) *table.Table {
	return table.New(tbl.Identifier(), tbl.Metadata(), tbl.MetadataLocation(), func(ctx context.Context) (iceio.IO, error) {
		fsys, err := tbl.FS(ctx)
		if err != nil {
			return nil, err
		}
		return &onceIO{IO: fsys, r: r}, nil
	}, nil)
}

// onceIO is a table's file system that opens the files a Files names through it.
type onceIO struct {
	iceio.IO
	r *Files
}

var _ iceio.ReadFileIO = (*onceIO)(nil)

func (o *onceIO) Open(name string) (iceio.File, error) {
	f := o.r.file(name)
	if f == nil {
		return o.IO.Open(name)
	}
	return f.get(o.IO, name, o.r.max)
}

func (o *onceIO) ReadFile(name string) ([]byte, error) {
	f := o.r.file(name)
	if f == nil {
		return readWhole(o.IO, name)
	}
	file, err := f.get(o.IO, name, o.r.max)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	st, err := file.Stat()
	if err != nil {
		return nil, err
	}
	return io.ReadAll(io.NewSectionReader(file, 0, st.Size())) // a copy: the caller may modify it
}

// get opens f's file for a reader: through fsys the first time (kept open), then from what is kept.
func (f *onceFile) get(fsys iceio.IO, name string, max int64) (iceio.File, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.err != nil:
		return nil, f.err
	case f.data != nil:
		return &memoryFile{Reader: bytes.NewReader(f.data), name: name, mod: f.mod}, nil
	case f.open == nil:
		f.open, f.err = fsys.Open(name)
		if f.err != nil {
			return nil, f.err
		}
		return keptOpenFile{f.open}, nil
	}
	st, err := f.open.Stat()
	if err != nil || st.Size() > max {
		return keptOpenFile{f.open}, nil
	}
	// Read again: whole, from the open file (one ranged read, or none where the first request held it all).
	data := make([]byte, st.Size())
	if n, err := f.open.ReadAt(data, 0); n < len(data) {
		return nil, fmt.Errorf("iceberg: read %s: %d of %d bytes: %w", name, n, len(data), err)
	}
	f.data, f.mod = data, st.ModTime()
	return &memoryFile{Reader: bytes.NewReader(f.data), name: name, mod: f.mod}, nil
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

// keptOpenFile is a file Files keeps open: closing it leaves it open for the next reader (Files.close
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

// WholeReadBytes is the largest file a stage reads whole into memory on tbl (see Files): the table's upload
// part size (storage.PartSizeKey) when set, the most the writer holds of a file it uploads; else
// defaultWholeReadBytes.
func WholeReadBytes(tbl *table.Table) int64 {
	if n, err := strconv.ParseInt(tbl.Metadata().Properties()[storage.PartSizeKey], 10, 64); err == nil && n > 0 {
		return n
	}
	return defaultWholeReadBytes
}

// WholeReads returns tbl reading the files sizes names (path: size in bytes), those of at most max bytes, whole
// in one request each when the scanner opens them, and everything else (writes included) as tbl does; tbl
// itself when its file system cannot write.
//
// A compaction reads every column of each input file once through iceberg-go's scanner: its end, then each
// column chunk in a request of its own (7 requests for the seed events' 6 columns). Read whole, it is one
// request for the same bytes. Each file read is held only while the scanner reads it: a compaction's scanner
// reads a few files at once, so memory stays within a few times max.
func WholeReads(tbl *table.Table, sizes map[string]int64, max int64) *table.Table {
	return table.New(tbl.Identifier(), tbl.Metadata(), tbl.MetadataLocation(), func(ctx context.Context) (iceio.IO, error) {
		fsys, err := tbl.FS(ctx)
		if err != nil {
			return nil, err
		}
		wfs, ok := fsys.(iceio.WriteFileIO)
		if !ok {
			return fsys, nil
		}
		return &wholeIO{WriteFileIO: wfs, sizes: sizes, max: max}, nil
	}, nil)
}

// wholeIO is a table's file system that reads the files wholeReads names whole on open.
type wholeIO struct {
	iceio.WriteFileIO
	sizes map[string]int64
	max   int64
}

func (w *wholeIO) Open(name string) (iceio.File, error) {
	if n, ok := w.sizes[name]; !ok || n > w.max {
		return w.WriteFileIO.Open(name)
	}
	data, err := readWhole(w.WriteFileIO, name)
	if err != nil {
		return nil, err
	}
	return &memoryFile{Reader: bytes.NewReader(data), name: name}, nil
}
