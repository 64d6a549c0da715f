package storage

import (
	"bytes"
	"io"
	"io/fs"
	"path"
	"strings"
	"sync"
	"time"

	iceio "github.com/apache/iceberg-go/io"
)

// Bounds of a bucket's cache of the metadata files this process wrote (see writtenFiles).
const (
	writtenFileMax  = 1 << 20  // larger files are not kept
	writtenTotalMax = 16 << 20 // the oldest files are dropped past it
)

// writtenFiles keeps the small Iceberg metadata files (Avro manifests and manifest lists) this process
// uploaded through one bucket, so that reading them back costs no request: every commit of a fast append
// reads its parent's manifest list, the one the writer's previous commit wrote, and planning a delete or a
// rewrite reads manifests it wrote. Iceberg never rewrites a file in place (every name is new), so a kept copy
// is what the store holds until the file is removed; a file removed by another process is served from here
// until evicted, which only a stale table view would ask for, and a commit built on one is rejected by its
// requirements anyway.
type writtenFiles struct {
	mu    sync.Mutex
	files map[string]writtenFile
	order []string // keys, oldest first
	bytes int64
}

type writtenFile struct {
	data []byte
	mod  time.Time
}

func newWrittenFiles() *writtenFiles { return &writtenFiles{files: map[string]writtenFile{}} }

// keepable reports whether a file of this name is kept: Iceberg's Avro metadata files.
func keepable(name string) bool { return strings.HasSuffix(name, ".avro") }

func (w *writtenFiles) put(key string, data []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if old, ok := w.files[key]; ok {
		w.bytes -= int64(len(old.data))
	} else {
		w.order = append(w.order, key)
	}
	w.files[key] = writtenFile{data: data, mod: time.Now()}
	w.bytes += int64(len(data))
	for w.bytes > writtenTotalMax && len(w.order) > 0 {
		oldest := w.order[0]
		w.order = w.order[1:]
		if f, ok := w.files[oldest]; ok {
			w.bytes -= int64(len(f.data))
			delete(w.files, oldest)
		}
	}
}

func (w *writtenFiles) get(key string) (writtenFile, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f, ok := w.files[key]
	return f, ok
}

// drop forgets a file (it was removed); its key stays in order until evicted, harmlessly.
func (w *writtenFiles) drop(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if f, ok := w.files[key]; ok {
		w.bytes -= int64(len(f.data))
		delete(w.files, key)
	}
}

// dropPrefix forgets every file under prefix (a folder removed whole).
func (w *writtenFiles) dropPrefix(prefix string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, f := range w.files {
		if strings.HasPrefix(k, prefix) {
			w.bytes -= int64(len(f.data))
			delete(w.files, k)
		}
	}
}

// keepingWriter uploads a file and keeps a copy of it in the bucket's writtenFiles once the upload succeeded.
type keepingWriter struct {
	up   *uploadWriter
	keep *writtenFiles
	key  string
	buf  bytes.Buffer
	over bool // the file outgrew writtenFileMax: not kept
}

func (w *keepingWriter) Write(p []byte) (int, error) {
	n, err := w.up.Write(p)
	w.tee(p[:n])
	return n, err
}

func (w *keepingWriter) ReadFrom(r io.Reader) (int64, error) {
	return io.Copy(writerOnly{w}, r) // through Write, so the copy is kept
}

func (w *keepingWriter) tee(p []byte) {
	if w.over {
		return
	}
	if w.buf.Len()+len(p) > writtenFileMax {
		w.over = true
		w.buf = bytes.Buffer{}
		return
	}
	w.buf.Write(p)
}

func (w *keepingWriter) Close() error {
	if err := w.up.Close(); err != nil {
		return err
	}
	if !w.over {
		w.keep.put(w.key, w.buf.Bytes())
	}
	return nil
}

// writerOnly hides ReadFrom, so that io.Copy calls Write.
type writerOnly struct{ io.Writer }

// keptFile is an open kept file: reads served from memory.
type keptFile struct {
	*bytes.Reader
	name string
	mod  time.Time
}

var _ iceio.File = (*keptFile)(nil)

func (f *keptFile) Close() error { return nil }

func (f *keptFile) Stat() (fs.FileInfo, error) {
	return keptInfo{name: f.name, size: f.Reader.Size(), mod: f.mod}, nil
}

type keptInfo struct {
	name string
	size int64
	mod  time.Time
}

func (i keptInfo) Name() string       { return path.Base(i.name) }
func (i keptInfo) Size() int64        { return i.size }
func (i keptInfo) Mode() fs.FileMode  { return fs.ModeIrregular }
func (i keptInfo) ModTime() time.Time { return i.mod }
func (i keptInfo) IsDir() bool        { return false }
func (i keptInfo) Sys() any           { return nil }
