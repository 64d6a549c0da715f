package storage

import (
	"bytes"
	"io"
	"runtime"
	"testing"
	"time"
)

// An upload buffer reads back what was written in writes of any size across its chunks, from the start again
// after a seek (the SDK rewinds a body to retry), and from any offset, by Read or by WriteTo.
func TestUploadBufferReadsBackAcrossChunks(t *testing.T) {
	s := newChunkStore(4, time.Hour)
	for _, size := range []int{0, 1, uploadChunkSize - 1, uploadChunkSize, 2*uploadChunkSize + 12_345} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i*31 + i>>9)
		}
		b := &uploadBuffer{store: s}
		for off := 0; off < size; off += 7_000 {
			if n, err := b.Write(data[off:min(off+7_000, size)]); err != nil || n != min(7_000, size-off) {
				t.Fatalf("size %d: Write = %d, %v", size, n, err)
			}
		}
		if b.Len() != size {
			t.Fatalf("size %d: Len %d", size, b.Len())
		}
		if want := data[:min(512, size)]; !bytes.Equal(b.head(512), want) {
			t.Fatalf("size %d: head is %d bytes, want the first %d", size, len(b.head(512)), len(want))
		}
		r := b.reader()
		for pass := 0; pass < 2; pass++ {
			got, err := io.ReadAll(r)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("size %d, pass %d: read %d bytes, %v; not what was written", size, pass, len(got), err)
			}
			if r.Len() != 0 {
				t.Fatalf("size %d: Len %d after reading all", size, r.Len())
			}
			if _, err := r.Seek(0, io.SeekStart); err != nil {
				t.Fatal(err)
			}
		}
		if size > 10 {
			at := int64(size / 3)
			if got, err := r.Seek(at, io.SeekStart); err != nil || got != at {
				t.Fatalf("Seek = %d, %v", got, err)
			}
			rest, err := io.ReadAll(r)
			if err != nil || !bytes.Equal(rest, data[at:]) {
				t.Fatalf("size %d: read from %d: %d bytes, %v", size, at, len(rest), err)
			}
			// WriteTo (the SDK's checksum pass) hands the chunks over from wherever the reader is.
			if _, err := r.Seek(at, io.SeekStart); err != nil {
				t.Fatal(err)
			}
			var rest2 bytes.Buffer
			if n, err := r.WriteTo(&rest2); err != nil || n != int64(size)-at || !bytes.Equal(rest2.Bytes(), data[at:]) || r.Len() != 0 {
				t.Fatalf("size %d: WriteTo from %d = %d, %v; Len %d after", size, at, n, err, r.Len())
			}
			if end, err := r.Seek(-1, io.SeekEnd); err != nil || end != int64(size-1) {
				t.Fatalf("Seek(-1, end) = %d, %v", end, err)
			}
		}
		if _, err := r.Seek(-1, io.SeekStart); err == nil {
			t.Fatal("a seek before the start succeeded")
		}
		var out bytes.Buffer
		if n, err := b.WriteTo(&out); err != nil || n != int64(size) || !bytes.Equal(out.Bytes(), data) {
			t.Fatalf("size %d: WriteTo = %d, %v", size, n, err)
		}
		b.release()
		if b.Len() != 0 {
			t.Fatalf("Len %d after release", b.Len())
		}
	}
}

// A whole upload after a garbage collection reuses the chunks of the upload before it: it allocates no new
// memory for the file (a sync.Pool would have been emptied by the collection, and the file regrown by
// doubling, 2 MiB for this 1 MiB file).
func TestWholeUploadsReuseTheirBuffersAcrossCollections(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	upload := func() {
		w := &uploadWriter{name: "f", max: 16<<20 - 1, put: func(body io.ReadSeeker, size int64, _ string) (bool, error) {
			if size != int64(len(data)) {
				t.Errorf("put %d bytes, want %d", size, len(data))
			}
			return true, nil
		}}
		for off := 0; off < len(data); off += 7_000 {
			if _, err := w.Write(data[off:min(off+7_000, len(data))]); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	upload()
	runtime.GC()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	upload()
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got >= uploadChunkSize {
		t.Fatalf("a 1 MiB upload after a collection allocated %d bytes, want less than one chunk (%d)", got, uploadChunkSize)
	}
}

// The store keeps at most its capacity of idle chunks, and frees them once none was taken for an idle period.
func TestChunkStoreBoundsAndFreesIdleChunks(t *testing.T) {
	s := newChunkStore(2, time.Hour) // trimmed by hand below, never by its timer
	c1, c2, c3 := s.get(), s.get(), s.get()
	for _, c := range []*uploadChunk{c1, c2, c3} {
		s.put(c)
	}
	if s.kept() != 2 {
		t.Fatalf("kept %d chunks, want the store's capacity 2", s.kept())
	}
	if got := s.get(); got != c1 {
		t.Fatal("get returned a new chunk while one was kept")
	}
	s.put(c1)
	s.trim() // a chunk was taken since the store armed: kept
	if s.kept() != 2 {
		t.Fatalf("kept %d chunks after a trim that followed a get, want 2", s.kept())
	}
	s.trim() // nothing taken for a whole period: freed
	if s.kept() != 0 {
		t.Fatalf("kept %d chunks after an idle period, want 0", s.kept())
	}
}

// BenchmarkWholeUpload buffers a 4 MiB file (about one data file of the remote-cost benchmark's commits)
// written in 7,000-byte writes, as a Parquet encoder writes pages, for a whole upload whose request does
// nothing: the CPU and the bytes allocated by buffering alone. "after-gc" collects twice before each file, as
// a writer's encoding does between two commits' files (a collection empties sync.Pool).
func BenchmarkWholeUpload(b *testing.B) {
	data := make([]byte, 4<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	for _, gc := range []bool{false, true} {
		name := "pooled"
		if gc {
			name = "after-gc"
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if gc {
					b.StopTimer()
					runtime.GC()
					runtime.GC()
					b.StartTimer()
				}
				w := &uploadWriter{name: "f", max: 16<<20 - 1, put: func(io.ReadSeeker, int64, string) (bool, error) { return true, nil }}
				for off := 0; off < len(data); off += 7_000 {
					if _, err := w.Write(data[off:min(off+7_000, len(data))]); err != nil {
						b.Fatal(err)
					}
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
