package s3_test

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"testing"

	iceio "github.com/apache/iceberg-go/io"

	"github.com/icewriter/iceberg/internal/faultproxy"
)

// Open costs one request, which reads the object's end: a Parquet reader's first two reads (the footer's
// length, then the footer) need no more, and a small file (an Avro manifest) is read whole by it (one this process wrote is not read at all: see storage.writtenFiles). ReadFile is
// one request whatever the size. Each body is read to its end, so one connection serves every request.
func TestOpenReadsTheEndInOneRequest(t *testing.T) {
	s := newFaultyStore(t, faultproxy.Config{Classify: faultproxy.S3Kind}, "5s")
	big := randomData(5, 1<<20)
	small := randomData(6, 20_000)
	bigLoc, smallLoc := s.put(t, "big.parquet", big), s.put(t, "positions.json.gz", small)
	// Requests the client asked for: a retry of one that went unanswered for the timeout (a starved process on a
	// loaded machine) is the SDK's doing, not a read more.
	gets := func() int64 { return s.proxy.Tally().FirstAttempts()["GetObject"] }

	before := gets()
	f, err := s.fs.Open(bigLoc)
	if err != nil {
		t.Fatal(err)
	}
	footerLen := make([]byte, 8)
	if _, err := f.ReadAt(footerLen, int64(len(big)-8)); err != nil || !bytes.Equal(footerLen, big[len(big)-8:]) {
		t.Fatalf("ReadAt the last 8 bytes: %v", err)
	}
	footer := make([]byte, 30_000)
	if _, err := f.ReadAt(footer, int64(len(big)-8-len(footer))); err != nil || !bytes.Equal(footer, big[len(big)-8-len(footer):len(big)-8]) {
		t.Fatalf("ReadAt the footer: %v", err)
	}
	if n := gets() - before; n != 1 {
		t.Fatalf("Open and the footer's reads took %d GETs, want 1", n)
	}
	chunk := make([]byte, 100_000)
	if _, err := f.ReadAt(chunk, 4); err != nil || !bytes.Equal(chunk, big[4:100_004]) {
		t.Fatalf("ReadAt a column chunk: %v", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if all, err := io.ReadAll(f); err != nil || !bytes.Equal(all, big) {
		t.Fatalf("read whole: %d bytes, %v", len(all), err)
	}
	f.Close()

	before = gets()
	got, err := s.fs.(iceio.ReadFileIO).ReadFile(smallLoc)
	if err != nil || !bytes.Equal(got, small) {
		t.Fatalf("ReadFile of a small file: %d bytes, %v", len(got), err)
	}
	if n := gets() - before; n != 1 {
		t.Fatalf("reading a 20,000-byte file took %d GETs, want 1", n)
	}
	// A file larger than Open's window too: one request for all of it, not the window and then the rest.
	before = gets()
	got, err = s.fs.(iceio.ReadFileIO).ReadFile(bigLoc)
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("ReadFile of a 1 MiB file: %d bytes, %v", len(got), err)
	}
	if n := gets() - before; n != 1 {
		t.Fatalf("reading a 1 MiB file whole took %d GETs, want 1", n)
	}
	// One connection serves them all, but a request may dial before the transport has put the connection
	// back after the previous body's end: allow one more, and one for each retry (the client abandons the
	// connection of an attempt that timed out). An abandoned body would close one per Open.
	tally := s.proxy.Tally()
	var retries int64
	for _, n := range tally.Retries {
		retries += n
	}
	if c := tally.Connections; c > 2+retries {
		t.Fatalf("%d connections for requests made one after another (%d retried), want 1 or 2 (every body read to its end)", c, retries)
	}
}

// A file below 16 MiB is one PutObject from the writer's buffer, whatever the size of the writes that made it
// (a Parquet encoder writes pages of a few KiB); a larger one streams as a multipart upload. Each reads back
// as written, and an empty file is an empty object.
func TestUploadRequestsBySize(t *testing.T) {
	s := newFaultyStore(t, faultproxy.Config{Classify: faultproxy.S3Kind}, "5s")
	for _, tc := range []struct {
		name  string
		size  int
		kinds map[string]int64
	}{
		{"empty.avro", 0, map[string]int64{"PutObject": 1}},
		{"small.parquet", 3 << 20, map[string]int64{"PutObject": 1}},
		{"large.parquet", 17 << 20, map[string]int64{"CreateMultipartUpload": 1, "UploadPart": 3, "CompleteMultipartUpload": 1}},
	} {
		data := bytes.Repeat(randomData(uint64(tc.size), 1<<16), tc.size>>16) // cheap to make, not compressible
		before := s.proxy.Tally()
		loc := s.root + "/" + tc.name
		w, err := s.fs.(iceio.WriteFileIO).Create(loc)
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off < len(data); off += 7_000 {
			if _, err := w.Write(data[off:min(off+7_000, len(data))]); err != nil {
				t.Fatalf("%s: Write: %v", tc.name, err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatalf("%s: Close: %v", tc.name, err)
		}
		// Count what the writer asked for: on a loaded machine an attempt can go unanswered for the request
		// timeout and be sent again, which says nothing about how the writer splits a file into requests.
		tally := s.proxy.Tally().Sub(before)
		if len(tally.Retries) > 0 {
			t.Logf("%s: retried %v", tc.name, tally.Retries)
		}
		got := tally.FirstAttempts()
		for kind, n := range tc.kinds {
			if got[kind] != n {
				t.Errorf("%s: %d %s requests, want %d (all: %v)", tc.name, got[kind], kind, n, got)
			}
		}
		if len(got) != len(tc.kinds) {
			t.Errorf("%s: requests %v, want only %v", tc.name, got, tc.kinds)
		}
		back, err := s.fs.(iceio.ReadFileIO).ReadFile(loc)
		if err != nil || !bytes.Equal(back, data) {
			t.Fatalf("%s: read back %d bytes of %d, %v", tc.name, len(back), len(data), err)
		}
	}
}

// Remove is one DeleteObject: gocloud's Delete asks for the object's attributes first (a HEAD), which the writer
// does not need (it removes files no snapshot needs: a rewrite's first copy, expired and orphaned files). The
// file is gone after it, and removing a missing file is no error, as S3's DeleteObject has it.
func TestRemoveIsOneRequest(t *testing.T) {
	s := newFaultyStore(t, faultproxy.Config{Classify: faultproxy.S3Kind}, "5s")
	loc := s.put(t, "first-copy.parquet", randomData(7, 50_000))
	before := s.proxy.Tally()
	if err := s.fs.Remove(loc); err != nil {
		t.Fatal(err)
	}
	got := s.proxy.Tally().Sub(before).FirstAttempts() // a retry is the SDK's doing, not a request more
	if n := got["DeleteObject"]; n != 1 {
		t.Errorf("Remove sent %d DeleteObject, want 1", n)
	}
	if n := got["HeadObject"]; n != 0 {
		t.Errorf("Remove sent %d HeadObject, want 0", n)
	}
	if _, err := s.fs.Open(loc); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open after Remove = %v, want fs.ErrNotExist", err)
	}
	if err := s.fs.Remove(loc); err != nil {
		t.Fatalf("Remove of a missing file = %v, want nil", err)
	}
}
