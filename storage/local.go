package storage

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"

	"github.com/apache/iceberg-go/io/gocloud/blobfs"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/memblob"
)

func init() {
	register("file", openFile, fileLocation)
	Register(openMem, "mem")
}

// openFile serves file:///top/rest locations from a bucket rooted at /top (u.Host holds "top"). Files are
// written to a temporary name beside the target and renamed into place, so a reader never sees a partial file.
func openFile(_ context.Context, u *url.URL, _ map[string]string) (*blob.Bucket, error) {
	return fileblob.OpenBucket("/"+u.Host, &fileblob.Options{Metadata: fileblob.MetadataDontWrite, NoTempDir: true})
}

// topFolder is the first segment of an absolute path.
func topFolder(p string) string {
	p = strings.TrimLeft(p, "/")
	top, _, _ := strings.Cut(p, "/")
	return top
}

var (
	memMu      sync.Mutex
	memBuckets = map[string]*blob.Bucket{}
)

// openMem serves mem://bucket/key locations from a process-wide in-memory bucket per name, for tests.
func openMem(_ context.Context, u *url.URL, _ map[string]string) (*blob.Bucket, error) {
	memMu.Lock()
	defer memMu.Unlock()
	b, ok := memBuckets[u.Host]
	if !ok {
		b = memblob.OpenBucket(nil)
		memBuckets[u.Host] = b
	}
	return b, nil
}

// fileLocation maps file:///top/a/b (and a bare /top/a/b) to the key a/b of the bucket rooted at /top. Every
// file of a table lives under one top folder in practice; a location under another one is refused.
func fileLocation(top string) blobfs.ObjectLocationExtractor {
	return func(location string) (blobfs.ObjectLocation, error) {
		p := location
		if rest, ok := strings.CutPrefix(location, "file://"); ok {
			p = rest
		}
		if !strings.HasPrefix(p, "/") {
			return blobfs.ObjectLocation{}, fmt.Errorf("storage: file location %q is not absolute (want file:///abs/path)", location)
		}
		key, ok := strings.CutPrefix(strings.TrimLeft(p, "/"), top+"/")
		if !ok || key == "" {
			return blobfs.ObjectLocation{}, fmt.Errorf("%w: %s is not under /%s", blobfs.ErrUnsupportedObjectAuthority, location, top)
		}
		return blobfs.NewObjectLocation("file", "/"+top, key), nil
	}
}
