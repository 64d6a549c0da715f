package storage

import (
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// A whole upload (WholePut) holds its file in memory until Close. It is buffered in fixed-size chunks kept
// from one upload to the next, rather than in a bytes.Buffer: a buffer grows by doubling, allocating twice the
// file and copying it, and sync.Pool, which held the last upload's buffer, is emptied by every garbage
// collection, of which a writer's encoding runs several between two commits. So every data file was buffered
// in new memory, which the kernel also had to fault in page by page: 12 ms of CPU for a 4 MiB file against
// 1.5 ms in reused memory (BenchmarkWholeUpload), most of the REST+S3 writer's CPU over the embedded
// catalog's in the remote-cost benchmark.
const (
	uploadChunkSize = 256 << 10
	// uploadChunksKept bounds the idle chunks kept for the next upload: 16 MiB, one largest whole upload.
	uploadChunksKept = 64
	// uploadChunksIdle is how long kept chunks may go unused before they are freed: a writer that stopped
	// uploading gives the memory back.
	uploadChunksIdle = time.Minute
)

type uploadChunk = [uploadChunkSize]byte

// chunkStore keeps up to cap(free) idle chunks across garbage collections, and frees them all once none was
// taken for a whole idle period.
type chunkStore struct {
	free  chan *uploadChunk
	idle  time.Duration
	taken atomic.Bool // a chunk was taken since the trim timer was armed

	mu    sync.Mutex
	armed bool
}

func newChunkStore(kept int, idle time.Duration) *chunkStore {
	return &chunkStore{free: make(chan *uploadChunk, kept), idle: idle}
}

// uploadChunks is the process's store: uploads of every bucket share it, and connections with the request
// timeout copy request bodies through its chunks (idleConn.ReadFrom).
var uploadChunks = newChunkStore(uploadChunksKept, uploadChunksIdle)

func (s *chunkStore) get() *uploadChunk {
	s.taken.Store(true)
	select {
	case c := <-s.free:
		return c
	default:
		return new(uploadChunk)
	}
}

// put keeps c for a later upload unless the store is full, and arms the idle trim.
func (s *chunkStore) put(c *uploadChunk) {
	select {
	case s.free <- c:
	default:
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.armed {
		s.armed = true
		s.taken.Store(false)
		time.AfterFunc(s.idle, s.trim)
	}
}

// trim frees the kept chunks when none was taken since it was armed; otherwise it looks again an idle period
// later.
func (s *chunkStore) trim() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.taken.Swap(false) {
		time.AfterFunc(s.idle, s.trim)
		return
	}
	s.armed = false
	for {
		select {
		case <-s.free:
		default:
			return
		}
	}
}

// kept reports how many idle chunks the store holds.
func (s *chunkStore) kept() int { return len(s.free) }

// uploadBuffer is a file being buffered for a whole upload, in chunks of its store.
type uploadBuffer struct {
	store  *chunkStore
	chunks []*uploadChunk
	n      int
}

func (b *uploadBuffer) Len() int { return b.n }

func (b *uploadBuffer) Write(p []byte) (int, error) {
	written := len(p)
	for len(p) > 0 {
		at := b.n % uploadChunkSize
		if at == 0 && b.n/uploadChunkSize == len(b.chunks) {
			b.chunks = append(b.chunks, b.store.get())
		}
		c := copy(b.chunks[b.n/uploadChunkSize][at:], p)
		b.n += c
		p = p[c:]
	}
	return written, nil
}

// head returns up to the first n bytes (at most one chunk's).
func (b *uploadBuffer) head(n int) []byte {
	if len(b.chunks) == 0 {
		return nil
	}
	return b.chunks[0][:min(n, b.n, uploadChunkSize)]
}

// WriteTo writes what the buffer holds to w, a chunk a call.
func (b *uploadBuffer) WriteTo(w io.Writer) (int64, error) {
	var written int64
	for i, c := range b.chunks {
		n, err := w.Write(c[:min(uploadChunkSize, b.n-i*uploadChunkSize)])
		written += int64(n)
		if err != nil {
			return written, err
		}
	}
	return written, nil
}

// reader reads the buffer from its start; a request body the SDK can rewind for a retry.
func (b *uploadBuffer) reader() *uploadReader { return &uploadReader{b: b} }

// release hands the chunks back to the store; the buffer is empty after it.
func (b *uploadBuffer) release() {
	for _, c := range b.chunks {
		b.store.put(c)
	}
	b.chunks, b.n = nil, 0
}

// uploadReader reads an uploadBuffer.
type uploadReader struct {
	b   *uploadBuffer
	off int64
}

var (
	_ io.ReadSeeker = (*uploadReader)(nil)
	_ io.WriterTo   = (*uploadReader)(nil)
)

func (r *uploadReader) Read(p []byte) (int, error) {
	if r.off >= int64(r.b.n) {
		return 0, io.EOF
	}
	i, at := int(r.off/uploadChunkSize), int(r.off%uploadChunkSize)
	end := min(uploadChunkSize, r.b.n-i*uploadChunkSize)
	n := copy(p, r.b.chunks[i][at:end])
	r.off += int64(n)
	return n, nil
}

// WriteTo writes the rest of the buffer to w a chunk at a time, straight from the chunks: the S3 SDK reads a
// body once to compute its checksum before sending it (io.Copy into the hash), and without WriteTo that pass
// would copy the whole file once more through a 32 KiB buffer.
func (r *uploadReader) WriteTo(w io.Writer) (int64, error) {
	var written int64
	for r.off < int64(r.b.n) {
		i, at := int(r.off/uploadChunkSize), int(r.off%uploadChunkSize)
		end := min(uploadChunkSize, r.b.n-i*uploadChunkSize)
		n, err := w.Write(r.b.chunks[i][at:end])
		r.off += int64(n)
		written += int64(n)
		if err != nil {
			return written, err
		}
		if n < end-at {
			return written, io.ErrShortWrite
		}
	}
	return written, nil
}

var errSeekBeforeStart = errors.New("storage: seek before the start of an upload body")

func (r *uploadReader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += r.off
	case io.SeekEnd:
		offset += int64(r.b.n)
	default:
		return 0, errors.New("storage: invalid whence")
	}
	if offset < 0 {
		return 0, errSeekBeforeStart
	}
	r.off = offset
	return offset, nil
}

// Len is how many bytes are left to read.
func (r *uploadReader) Len() int { return max(0, r.b.n-int(r.off)) }
