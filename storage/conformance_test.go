package storage_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	iceio "github.com/apache/iceberg-go/io"
	"github.com/icewriter/iceberg/storage"

	"github.com/icewriter/iceberg/storage/storagetest"
)

func TestFileConformance(t *testing.T) {
	storagetest.Run(t, storagetest.Config{Root: "file://" + t.TempDir(), LargeSize: 4 << 20})
}

func TestMemConformance(t *testing.T) {
	storagetest.Run(t, storagetest.Config{Root: "mem://conformance/prefix", LargeSize: 4 << 20})
}

// TestUploadTuning: the upload properties reach the writers the file system opens, and files still round-trip.
func TestUploadTuning(t *testing.T) {
	ctx := context.Background()
	props := map[string]string{storage.PartSizeKey: "5242880", storage.UploadConcurrencyKey: "2"}
	fs, err := iceio.LoadFS(ctx, props, "mem://tuned/x")
	if err != nil {
		t.Fatal(err)
	}
	if o := storage.UploadOptions(fs); o == nil || o.BufferSize != 5242880 || o.MaxConcurrency != 2 {
		t.Fatalf("upload properties ignored: the file system (%T) writes with %+v", fs, o)
	}
	wfs, ok := fs.(iceio.WriteFileIO)
	if !ok {
		t.Fatalf("%T cannot write", fs)
	}
	w, err := wfs.Create("mem://tuned/a/b.bin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(bytes.Repeat([]byte("x"), 1<<20)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := fs.Open("mem://tuned/a/b.bin")
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	if st.Size() != 1<<20 {
		t.Fatalf("size %d", st.Size())
	}
	f.Close()
}

// notListable is a file system without io.ListableIO.
type notListable struct{ iceio.IO }

// TestListNotListable: List fails on a file system that cannot list, naming its type.
func TestListNotListable(t *testing.T) {
	err := storage.List(context.Background(), notListable{}, "s3://b/t/data", func(storage.FileInfo) error { return nil })
	if !errors.Is(err, storage.ErrNotListable) || !strings.Contains(err.Error(), "notListable") {
		t.Fatalf("List on a file system that cannot list = %v, want ErrNotListable naming the type", err)
	}
}
