package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/http"
	"path"
	"strings"
	"sync/atomic"
	"time"

	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/io/gocloud/blobfs"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// Read retries: a read whose body is cut off (a reset, a truncated response, a stall) is re-read from the
// offset it reached, up to ReadAttempts times in a row without progress, backing off between attempts.
const (
	ReadAttempts   = 5
	readMinBackoff = 100 * time.Millisecond
	readMaxBackoff = 2 * time.Second
)

// fileIO is the iceberg-go file system of one bucket, bound to the context of the call that asked for it:
// every request it makes carries that context, so cancelling the caller's work cancels its uploads and reads.
// (iceberg-go asks the table's file system factory for one per operation, with the operation's context.)
type fileIO struct {
	b       *blob.Bucket
	ctx     context.Context
	extract blobfs.ObjectLocationExtractor
	wopts   *blob.WriterOptions // nil: the backend's defaults
	timeout time.Duration       // request timeout: a body read that gets no byte for this long is a stall
	kept    *writtenFiles       // metadata files this process wrote (nil: none kept)
	suffix  SuffixRange         // asks a read for an object's end (nil: the backend cannot)
	whole   wholePut            // uploads small files in one request from a buffer (put nil: none)
	del     SingleDelete        // removes a file in one request (nil: gocloud's Delete, a HEAD and a DELETE)
	host    string              // the location's host: the bucket's name, for whole and del
}

var (
	_ iceio.ReadFileIO        = (*fileIO)(nil)
	_ iceio.WriteFileIO       = (*fileIO)(nil)
	_ iceio.ListableIO        = (*fileIO)(nil)
	_ iceio.BulkRemovableIO   = (*fileIO)(nil)
	_ iceio.StatIO            = (*fileIO)(nil)
	_ iceio.RenameIO          = (*fileIO)(nil)
	_ iceio.RenameNoReplaceIO = (*fileIO)(nil)
	_ iceio.RemoveAllIO       = (*fileIO)(nil)
	_ iceio.MkdirAllIO        = (*fileIO)(nil)
)

// WithContext returns fsys bound to ctx when it is a file system of this package, else fsys unchanged. Code
// that keeps a file system across calls (iceberg-go's REST catalog caches one per table while vended
// credentials last) otherwise runs every later request on the context of the call that opened it.
func WithContext(ctx context.Context, fsys iceio.IO) iceio.IO {
	f, ok := fsys.(*fileIO)
	if !ok || f.ctx == ctx {
		return fsys
	}
	c := *f
	c.ctx = ctx
	return &c
}

func (f *fileIO) blobfs() *blobfs.FileIO { return blobfs.New(f.ctx, f.b, f.extract) }

func (f *fileIO) key(name string) (string, error) {
	loc, err := f.extract(name)
	if err != nil {
		return "", err
	}
	return loc.Key(), nil
}

// Open opens the named file for reading; its reads are retried when a body is cut off.
func (f *fileIO) Open(name string) (iceio.File, error) {
	key, kept, err := f.lookup("open", name)
	switch {
	case err != nil:
		return nil, err
	case kept != nil:
		return kept, nil
	}
	file := &file{fsys: f, key: key, name: name}
	if err := file.openWindow(); err != nil {
		return nil, openError(name, err)
	}
	return file, nil
}

// lookup validates name for op and returns its key, and the file's kept copy when this process wrote it (nil
// otherwise: a request reads it).
func (f *fileIO) lookup(op, name string) (string, *keptFile, error) {
	key, err := f.key(name)
	if err != nil {
		return "", nil, &fs.PathError{Op: op, Path: name, Err: err}
	}
	if !fs.ValidPath(key) {
		return "", nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	if f.kept != nil {
		if k, ok := f.kept.get(key); ok {
			return key, &keptFile{Reader: bytes.NewReader(k.data), name: key, mod: k.mod}, nil
		}
	}
	return key, nil, nil
}

// openError is the error of a failed first request for name: fs.ErrNotExist for a missing object.
func openError(name string, err error) error {
	if gcerrors.Code(err) == gcerrors.NotFound {
		err = fs.ErrNotExist
	}
	return &fs.PathError{Op: "open", Path: name, Err: err}
}

// openWindow is Open's one request: it learns the object's size and reads a window of it, the last
// openWindowBytes where the backend can ask for an object's end (SuffixRange), else the first. Readers of
// Iceberg's files start there: a Parquet reader reads the footer at the end, an Avro manifest is read from the
// start and is usually smaller than the window, whole. Reading the window to its end, instead of opening a
// reader of the whole object and closing it after a few bytes, also keeps the connection for the next request
// (an HTTP body abandoned half-read closes its connection).
func (f *file) openWindow() error {
	var opts *blob.ReaderOptions
	off, length := int64(0), int64(openWindowBytes)
	if suffix := f.fsys.suffix; suffix != nil {
		length = -1
		opts = &blob.ReaderOptions{BeforeRead: func(as func(any) bool) error {
			if !suffix(as, openWindowBytes) {
				return errNoSuffixRange
			}
			return nil
		}}
	}
	br, err := f.openWith(off, length, opts)
	if err != nil {
		if f.fsys.suffix != nil && gcerrors.Code(err) != gcerrors.NotFound && f.fsys.ctx.Err() == nil {
			return f.openPlain() // e.g. a store that refuses a suffix range of an empty object
		}
		return err
	}
	defer br.Close()
	f.size, f.mod = br.r.Size(), br.r.ModTime()
	win, err := io.ReadAll(br)
	if err != nil || int64(len(win)) != min(f.size, openWindowBytes) {
		// A cut-off window: the reads after Open retry from where they are, as without one.
		return nil
	}
	f.win = win
	if f.fsys.suffix != nil {
		f.winOff = f.size - int64(len(win))
	}
	return nil
}

// openPlain opens a reader of the whole object, for its size; reads start from it.
func (f *file) openPlain() error {
	br, err := f.open(0, -1)
	if err != nil {
		return err
	}
	f.size, f.mod = br.r.Size(), br.r.ModTime()
	f.cur = br
	return nil
}

// openWindowBytes is the window Open reads: the end of a Parquet file (its footer and the length before it,
// which a reader reads first) or the start of an Avro manifest (most are smaller, and so read whole).
const openWindowBytes = 64 << 10

var errNoSuffixRange = errors.New("storage: the backend cannot read an object's end")

// window returns the bytes at [off, off+n) when Open's window holds them all.
func (f *file) window(off int64, n int) ([]byte, bool) {
	if f.win == nil || off < f.winOff || off+int64(n) > f.winOff+int64(len(f.win)) {
		return nil, false
	}
	return f.win[off-f.winOff : off-f.winOff+int64(n)], true
}

// ReadFile reads the whole file in one request (through Open, a file larger than Open's window would take
// two: the window, then the whole object from its start), re-read from the byte reached when a body is cut off.
func (f *fileIO) ReadFile(name string) ([]byte, error) {
	key, kept, err := f.lookup("open", name)
	if err != nil {
		return nil, err
	}
	var r io.Reader = kept
	size := int64(0)
	if kept != nil {
		size = kept.Size()
	} else {
		file := &file{fsys: f, key: key, name: name}
		if err := file.openPlain(); err != nil {
			return nil, openError(name, err)
		}
		defer file.Close()
		r, size = file, file.size
	}
	buf := make([]byte, size) // a copy, also of a kept file: the caller may modify it
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, &fs.PathError{Op: "ReadFile", Path: name, Err: err}
	}
	return buf, nil
}

// Create opens the named file for writing (with the table's upload options); errors name the file.
func (f *fileIO) Create(name string) (iceio.FileWriter, error) {
	open := func() (*blobfs.Writer, error) {
		w, err := f.blobfs().NewWriter(f.ctx, name, true, f.wopts)
		if err != nil {
			return nil, fmt.Errorf("storage: create %s: %w", name, err)
		}
		return w, nil
	}
	var w *blobfs.Writer
	if f.whole.put == nil {
		var err error
		if w, err = open(); err != nil {
			return nil, err
		}
	}
	up := &uploadWriter{Writer: w, name: name}
	if f.whole.put != nil {
		if key, err := f.key(name); err != nil || !plainKey(key) {
			if up.Writer, err = open(); err != nil {
				return nil, err
			}
		} else {
			// The streaming writer is opened only when the file outgrows whole.max: a file that does not is
			// one request from the buffer.
			up = &uploadWriter{name: name, max: f.whole.max, open: open, put: func(body io.ReadSeeker, size int64, contentType string) (bool, error) {
				return f.whole.put(f.ctx, f.b.As, f.host, key, body, size, contentType)
			}}
		}
	}
	if f.kept != nil && keepable(name) {
		if key, err := f.key(name); err == nil {
			return &keepingWriter{up: up, keep: f.kept, key: key}, nil
		}
	}
	return up, nil
}

// WriteFile writes the named file in one upload.
func (f *fileIO) WriteFile(name string, p []byte) error {
	w, err := f.Create(name)
	if err != nil {
		return err
	}
	if _, err := w.Write(p); err != nil {
		_ = w.Close()
		return err
	}
	return w.Close()
}

func (f *fileIO) Remove(name string) error {
	f.forget(name)
	if f.del != nil {
		if key, err := f.key(name); err == nil && plainKey(key) {
			if done, err := f.del(f.ctx, f.b.As, f.host, key); done {
				if err != nil {
					return fmt.Errorf("remove %s: %w", name, err)
				}
				return nil
			}
		}
	}
	return f.blobfs().Remove(name)
}

// forget drops a removed file's kept copy.
func (f *fileIO) forget(name string) {
	if f.kept == nil || !keepable(name) {
		return
	}
	if key, err := f.key(name); err == nil {
		f.kept.drop(key)
	}
}

func (f *fileIO) Stat(name string) (fs.FileInfo, error)        { return f.blobfs().Stat(name) }
func (f *fileIO) WalkDir(root string, fn fs.WalkDirFunc) error { return f.blobfs().WalkDir(root, fn) }
func (f *fileIO) Rename(oldpath, newpath string) error {
	f.forget(oldpath)
	return f.blobfs().Rename(oldpath, newpath)
}

func (f *fileIO) RemoveAll(name string) error {
	if f.kept != nil {
		if key, err := f.key(name); err == nil {
			f.kept.dropPrefix(key)
		}
	}
	return f.blobfs().RemoveAll(name)
}
func (f *fileIO) MkdirAll(name string) error { return f.blobfs().MkdirAll(name) }

func (f *fileIO) RenameNoReplace(oldpath, newpath string) error {
	f.forget(oldpath)
	return f.blobfs().RenameNoReplace(oldpath, newpath)
}

func (f *fileIO) DeleteFiles(ctx context.Context, paths []string) ([]string, error) {
	for _, p := range paths {
		f.forget(p)
	}
	return f.blobfs().DeleteFiles(ctx, paths)
}

// uploadWriter names the file in upload errors (gocloud names only the key; a stall names neither). With put
// set, it buffers the file and uploads it whole in one request on Close, unless it outgrows max: then it opens
// the streaming writer (open) and goes on through it.
type uploadWriter struct {
	*blobfs.Writer // nil while buffering
	name           string
	open           func() (*blobfs.Writer, error)
	put            func(body io.ReadSeeker, size int64, contentType string) (bool, error)
	max            int
	buf            *uploadBuffer // chunks of uploadChunks (nil: nothing written yet)
}

func (w *uploadWriter) Write(p []byte) (int, error) {
	if w.Writer == nil {
		if w.buf == nil {
			w.buf = &uploadBuffer{store: uploadChunks}
		}
		if w.buf.Len()+len(p) <= w.max {
			return w.buf.Write(p)
		}
		if err := w.stream(); err != nil {
			return 0, err
		}
	}
	n, err := w.Writer.Write(p)
	if err != nil {
		err = fmt.Errorf("storage: upload %s: %w", w.name, err)
	}
	return n, err
}

// stream opens the streaming writer and hands it what was buffered.
func (w *uploadWriter) stream() error {
	sw, err := w.open()
	if err != nil {
		return err
	}
	w.Writer = sw
	if w.buf == nil {
		return nil
	}
	defer w.release()
	if _, err := w.buf.WriteTo(w.Writer); err != nil {
		return fmt.Errorf("storage: upload %s: %w", w.name, err)
	}
	return nil
}

// release hands the buffer's chunks back for the next upload.
func (w *uploadWriter) release() {
	w.buf.release()
	w.buf = nil
}

func (w *uploadWriter) ReadFrom(r io.Reader) (int64, error) {
	if w.Writer == nil {
		return io.Copy(writerOnly{w}, r) // buffered through Write
	}
	n, err := w.Writer.ReadFrom(r)
	if err != nil {
		err = fmt.Errorf("storage: upload %s: %w", w.name, err)
	}
	return n, err
}

func (w *uploadWriter) Close() error {
	if w.Writer == nil {
		if w.buf == nil {
			w.buf = &uploadBuffer{store: uploadChunks}
		}
		defer w.release()
		// The content type gocloud's writer would give the object: sniffed from its first 512 bytes.
		ok, err := w.put(w.buf.reader(), int64(w.buf.Len()), http.DetectContentType(w.buf.head(512)))
		if err != nil {
			return fmt.Errorf("storage: upload %s: %w", w.name, err)
		}
		if ok {
			return nil
		}
		if err := w.stream(); err != nil {
			return err
		}
	}
	if err := w.Writer.Close(); err != nil {
		return fmt.Errorf("storage: upload %s: %w", w.name, err)
	}
	return nil
}

// plainKey reports whether key is stored under itself by every backend: gocloud escapes control characters,
// "../" and its own escape marker, and an escaped key must go through gocloud's writer to match its readers.
func plainKey(key string) bool {
	for _, c := range key {
		if c < 32 {
			return false
		}
	}
	return !strings.Contains(key, "../") && !strings.Contains(key, "__0x")
}

// file is an open object. Sequential reads (Read, Seek) go through one reader that is reopened at the current
// offset when its body is cut off; each ReadAt reads its own range, reopened from where it stopped. Every
// reopened reader must report the size the object had when it was opened (else the object changed: an error).
type file struct {
	fsys      *fileIO
	key, name string
	size      int64
	mod       time.Time
	cur       *bodyReader // sequential reader, positioned at curPos (nil: none open)
	win       []byte      // the bytes Open read, at winOff (see openWindow)
	winOff    int64
	curPos    int64
	pos       int64 // Read/Seek position
}

// bodyReader is one ranged read of the object with a stall watchdog: a Read that gets no byte within the
// request timeout cancels the reader's own context, which aborts the body read on every backend.
type bodyReader struct {
	r      *blob.Reader
	cancel context.CancelFunc
	timer  *time.Timer
	idle   time.Duration
	fired  atomic.Bool
}

func (f *file) open(off, length int64) (*bodyReader, error) { return f.openWith(off, length, nil) }

func (f *file) openWith(off, length int64, opts *blob.ReaderOptions) (*bodyReader, error) {
	ctx, cancel := context.WithCancel(f.fsys.ctx)
	r, err := f.fsys.b.NewRangeReader(ctx, f.key, off, length, opts)
	if err != nil {
		cancel()
		return nil, err
	}
	br := &bodyReader{r: r, cancel: cancel, idle: f.fsys.timeout}
	if br.idle > 0 {
		br.timer = time.AfterFunc(time.Hour, func() { br.fired.Store(true); cancel() })
		br.timer.Stop()
	}
	return br, nil
}

func (br *bodyReader) Read(p []byte) (int, error) {
	if br.timer != nil {
		br.timer.Reset(br.idle)
	}
	n, err := br.r.Read(p)
	if br.timer != nil {
		br.timer.Stop()
	}
	if err != nil && err != io.EOF && br.fired.Load() {
		err = &StallError{Op: "read", After: br.idle, Err: err}
	}
	return n, err
}

func (br *bodyReader) Close() {
	if br.timer != nil {
		br.timer.Stop()
	}
	_ = br.r.Close()
	br.cancel()
}

// reopen opens the object at off (length -1: to the end) after a failed read, checking the size.
func (f *file) reopen(off, length int64) (*bodyReader, error) {
	br, err := f.open(off, length)
	if err != nil {
		return nil, err
	}
	if s := br.r.Size(); s != f.size {
		br.Close()
		return nil, fmt.Errorf("storage: %s changed while being read (size %d, was %d)", f.name, s, f.size)
	}
	return br, nil
}

// retryable reports whether a failed read is worth another attempt: not when the caller's context ended, nor
// for answers that will not change (missing object, denied, invalid range).
func (f *file) retryable(err error) bool {
	if f.fsys.ctx.Err() != nil {
		return false
	}
	// Network failures first, whatever code the driver maps them to: gocloud's s3blob, for one, calls any
	// failed operation whose message holds "301" (a port, a key) a missing bucket.
	var ne net.Error
	if errors.Is(err, ErrStalled) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ne) {
		return true
	}
	switch gcerrors.Code(err) {
	case gcerrors.NotFound, gcerrors.PermissionDenied, gcerrors.InvalidArgument, gcerrors.FailedPrecondition,
		gcerrors.Unimplemented, gcerrors.AlreadyExists, gcerrors.Canceled:
		return false
	}
	return true
}

// backoff waits before attempt (1-based) of a re-read, or returns the context's error.
func (f *file) backoff(attempt int) error {
	d := min(readMinBackoff<<min(attempt-1, 10), readMaxBackoff)
	d = d/2 + rand.N(d/2+1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-f.fsys.ctx.Done():
		return f.fsys.ctx.Err()
	case <-t.C:
		return nil
	}
}

// errTruncated is what a body that ended before the object did becomes.
func (f *file) errTruncated(at int64) error {
	return fmt.Errorf("storage: %s: body ended at byte %d of %d: %w", f.name, at, f.size, io.ErrUnexpectedEOF)
}

// Read reads sequentially from the current position.
func (f *file) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if f.pos < f.size {
		if _, ok := f.window(f.pos, 1); ok {
			n := copy(p, f.win[f.pos-f.winOff:])
			f.pos += int64(n)
			return n, nil
		}
	}
	for attempt := 0; ; {
		if f.pos >= f.size {
			return 0, io.EOF
		}
		var err error
		if f.cur == nil || f.curPos != f.pos {
			if f.cur != nil {
				f.cur.Close()
				f.cur = nil
			}
			f.cur, err = f.reopen(f.pos, -1)
			f.curPos = f.pos
		}
		var n int
		if err == nil {
			n, err = f.cur.Read(p)
			f.pos += int64(n)
			f.curPos = f.pos
			if err == io.EOF {
				if f.pos >= f.size {
					return n, io.EOF
				}
				err = f.errTruncated(f.pos)
			}
			if err == nil || n > 0 {
				if err != nil {
					// Report the bytes that arrived; the next Read reopens at the new position.
					f.cur.Close()
					f.cur = nil
				}
				return n, nil
			}
			f.cur.Close()
			f.cur = nil
		}
		attempt++
		if !f.retryable(err) || attempt >= ReadAttempts {
			return 0, fmt.Errorf("storage: read %s at byte %d (%d attempts): %w", f.name, f.pos, attempt, err)
		}
		if berr := f.backoff(attempt); berr != nil {
			return 0, fmt.Errorf("storage: read %s at byte %d: %w", f.name, f.pos, berr)
		}
	}
}

// ReadAt reads len(p) bytes at off in a ranged read of its own (safe for concurrent use), re-reading from the
// offset reached when a body is cut off. At the end of the object it returns the bytes there and io.EOF.
func (f *file) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, &fs.PathError{Op: "readat", Path: f.name, Err: fs.ErrInvalid}
	}
	if off >= f.size {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	want := int(min(int64(len(p)), f.size-off))
	if w, ok := f.window(off, want); ok {
		n := copy(p, w)
		if want < len(p) {
			return n, io.EOF
		}
		return n, nil
	}
	n := 0
	for attempt := 0; n < want; {
		br, err := f.reopen(off+int64(n), int64(want-n))
		if err == nil {
			var m int
			m, err = io.ReadFull(br, p[n:want])
			br.Close()
			n += m
			if m > 0 {
				attempt = 0
			}
			if n == want {
				break
			}
			if err == nil || err == io.EOF || err == io.ErrUnexpectedEOF {
				err = f.errTruncated(off + int64(n))
			}
		}
		attempt++
		if !f.retryable(err) || attempt >= ReadAttempts {
			return n, fmt.Errorf("storage: read %s at byte %d (%d attempts): %w", f.name, off+int64(n), attempt, err)
		}
		if berr := f.backoff(attempt); berr != nil {
			return n, fmt.Errorf("storage: read %s at byte %d: %w", f.name, off+int64(n), berr)
		}
	}
	if want < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Seek sets the position of the next Read; the reader reopens lazily there.
func (f *file) Seek(offset int64, whence int) (int64, error) {
	var abs int64
	switch whence {
	case io.SeekStart:
		abs = offset
	case io.SeekCurrent:
		abs = f.pos + offset
	case io.SeekEnd:
		abs = f.size + offset
	default:
		return f.pos, &fs.PathError{Op: "seek", Path: f.name, Err: fs.ErrInvalid}
	}
	if abs < 0 {
		return f.pos, &fs.PathError{Op: "seek", Path: f.name, Err: fs.ErrInvalid}
	}
	f.pos = abs
	return abs, nil
}

// Close releases the open reader.
func (f *file) Close() error {
	if f.cur != nil {
		f.cur.Close()
		f.cur = nil
	}
	return nil
}

// Stat describes the object as it was when opened.
func (f *file) Stat() (fs.FileInfo, error) { return f, nil }

func (f *file) Name() string       { return path.Base(f.key) }
func (f *file) Size() int64        { return f.size }
func (f *file) Mode() fs.FileMode  { return fs.ModeIrregular }
func (f *file) ModTime() time.Time { return f.mod }
func (f *file) IsDir() bool        { return false }
func (f *file) Sys() any           { return f.fsys.b }
