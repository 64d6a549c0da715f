// Package storage connects Apache Iceberg file IO to gocloud.dev blob buckets.
//
// Each backend registers a URI scheme (file and mem here; s3, gcs and azblob in their own packages, imported for
// their side effect) with iceberg-go's io registry through one caching factory: a table's reads and writes reuse
// one bucket (one client) per scheme, bucket and effective properties instead of building a new client on every
// file system lookup. Entries whose properties carry a credential expiry are reopened shortly before it.
//
// Each lookup returns a file system bound to the lookup's context (iceberg-go looks one up per operation, with
// the operation's context): its uploads and reads stop when that context ends. Reads survive bodies that are
// cut off: a read that ends early (a reset, a truncated body, a stall) is re-read from the byte it reached, up
// to ReadAttempts times in a row without progress, and every re-read must find the object at the size it had
// when opened. A body read that gets no byte for the request timeout (RequestTimeoutKey,
// icewriter.request-timeout; S3RequestTimeoutKey, s3.request-timeout, for S3; default DefaultRequestTimeout,
// 60s) is abandoned as a stall (ErrStalled) and re-read; backends apply the same timeout to their connections
// (package s3 does, to uploads too).
package storage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strconv"
	"sync"
	"time"

	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/io/gocloud/blobfs"
	"gocloud.dev/blob"

	"github.com/icewriter/iceberg/internal/redact"
)

// Opener opens the bucket that a location's scheme and authority name, configured by the table's effective
// properties (credentials included).
type Opener func(ctx context.Context, u *url.URL, props map[string]string) (*blob.Bucket, error)

// ExpiryKeys are property names whose value is a credential expiry in Unix milliseconds, as REST catalogs vend
// them. A cached bucket opened with such a property is reopened RefreshBefore ahead of the expiry.
var ExpiryKeys = []string{
	"s3.session-token-expires-at-ms",
	"gcs.oauth2.token-expires-at",
	"adls.sas-token-expires-at-ms",
}

// RefreshBefore is how long before a vended credential's expiry a cached bucket is reopened.
const RefreshBefore = 5 * time.Minute

// maxCached bounds the number of cached buckets; the least recently used one is closed past it.
const maxCached = 64

type entry struct {
	bucket   *blob.Bucket
	extract  blobfs.ObjectLocationExtractor
	wopts    *blob.WriterOptions
	timeout  time.Duration
	expires  time.Time // zero: never
	lastUsed time.Time
	kept     *writtenFiles // metadata files this process wrote through the bucket
	suffix   SuffixRange   // nil: the backend cannot read an object's end in one request
	whole    wholePut      // put nil: every upload streams
	del      SingleDelete  // nil: gocloud's Delete
	host     string        // the location's host: the bucket's name
}

// fs returns the entry's file system bound to ctx.
func (e *entry) fs(ctx context.Context) iceio.IO {
	return &fileIO{b: e.bucket, ctx: ctx, extract: e.extract, wopts: e.wopts, timeout: e.timeout, kept: e.kept,
		suffix: e.suffix, whole: e.whole, del: e.del, host: e.host}
}

var (
	cacheMu sync.Mutex
	cache   = map[string]*entry{}
	opens   = map[string]int{} // scheme -> buckets opened, for tests and Stats
)

// Register makes opener serve the given URI schemes for iceberg-go file IO, replacing any factory registered
// for them before (iceberg-go registers plain ones for file and mem).
func Register(opener Opener, schemes ...string) {
	for _, scheme := range schemes {
		register(scheme, opener, func(host string) blobfs.ObjectLocationExtractor {
			return blobfs.DefaultObjectLocationExtractor(host, scheme)
		})
	}
}

func register(scheme string, opener Opener, extract func(host string) blobfs.ObjectLocationExtractor) {
	iceio.Unregister(scheme)
	iceio.Register(scheme, factory(scheme, opener, extract))
}

// SuffixRange makes a read request of a backend ask for the last n bytes of an object (an HTTP suffix range,
// "bytes=-n"): as is the request's driver-specific As function (gocloud's blob.ReaderOptions.BeforeRead). It
// reports whether it could. The reader's Size must still be the whole object's.
type SuffixRange func(as func(any) bool, n int64) bool

// suffixRanges holds each scheme's SuffixRange (under cacheMu).
var suffixRanges = map[string]SuffixRange{}

// RegisterSuffixRange lets files of the schemes open with one request for their end (see SuffixRange): a
// Parquet reader then finds the footer it reads first already read. Package s3 registers one.
func RegisterSuffixRange(f SuffixRange, schemes ...string) {
	cacheMu.Lock()
	defer cacheMu.Unlock()
	for _, s := range schemes {
		suffixRanges[s] = f
	}
}

// WholePut uploads an object in one request whose body is all of it, bypassing gocloud's streaming writer: as
// is the bucket's As (to reach the backend's client), bucket the location's host; body holds size bytes, read
// from the start and rewindable for a retry (valid only until WholePut returns), and contentType is what
// gocloud's writer would sniff. It reports whether it could; when it could not, the file goes through the
// streaming writer.
type WholePut func(ctx context.Context, as func(any) bool, bucket, key string, body io.ReadSeeker, size int64,
	contentType string) (bool, error)

// wholePut is a scheme's WholePut and the largest object it takes (larger ones stream).
type wholePut struct {
	put WholePut
	max int
}

// wholePuts holds each scheme's WholePut (under cacheMu).
var wholePuts = map[string]wholePut{}

// RegisterWholePut makes files of the schemes up to max bytes upload in one request from a buffer (see
// WholePut), where gocloud's streaming writer would pipe them to a goroutine that reads them again into a
// buffer grown by copying. Package s3 registers one for the objects its SDK would upload in a single PutObject.
func RegisterWholePut(f WholePut, max int, schemes ...string) {
	cacheMu.Lock()
	defer cacheMu.Unlock()
	for _, s := range schemes {
		wholePuts[s] = wholePut{put: f, max: max}
	}
}

// SingleDelete removes an object in one request, where gocloud's Delete sends two: it asks for the object's
// attributes first (a HEAD) to report a missing object as not found. as is the bucket's As (to reach the
// backend's client), bucket the location's host. It reports whether it could; when it could not, gocloud's
// Delete runs. Removing a missing object is then no error, as S3's DeleteObject has it: every removal here is of
// a file no snapshot needs (a rewrite's first copy, an expired or orphaned file), whose absence is the goal.
type SingleDelete func(ctx context.Context, as func(any) bool, bucket, key string) (bool, error)

// singleDeletes holds each scheme's SingleDelete (under cacheMu).
var singleDeletes = map[string]SingleDelete{}

// RegisterSingleDelete makes Remove of files of the schemes one request (see SingleDelete). Package s3 registers
// one.
func RegisterSingleDelete(f SingleDelete, schemes ...string) {
	cacheMu.Lock()
	defer cacheMu.Unlock()
	for _, s := range schemes {
		singleDeletes[s] = f
	}
}

// Opened reports how many buckets the cache has opened for a scheme since the process started.
func Opened(scheme string) int {
	cacheMu.Lock()
	defer cacheMu.Unlock()
	return opens[scheme]
}

func factory(scheme string, opener Opener, extract func(host string) blobfs.ObjectLocationExtractor) iceio.SchemeFactory {
	return func(ctx context.Context, u *url.URL, props map[string]string) (iceio.IO, error) {
		if scheme == "file" {
			// fileblob cannot root a bucket at "/": a file bucket is rooted at the location's top folder.
			u = &url.URL{Scheme: "file", Host: topFolder(u.Path)}
		}
		key := cacheKey(scheme, u.Host, props)
		now := time.Now()
		cacheMu.Lock()
		defer cacheMu.Unlock()
		if e, ok := cache[key]; ok && (e.expires.IsZero() || now.Before(e.expires)) {
			e.lastUsed = now
			return e.fs(ctx), nil
		}
		timeout, err := RequestTimeout(props)
		if err != nil {
			return nil, err
		}
		b, err := opener(ctx, u, props)
		if err != nil {
			// Masked here as well as in each backend: an opener registered by a program may quote its properties.
			return nil, redact.Error(fmt.Errorf("storage: open %s://%s: %w", scheme, u.Host, err), redact.Secrets(props)...)
		}
		opens[scheme]++
		// An expired entry that is replaced may still be in use by a reader; gocloud buckets need no close to
		// be collected, so it is left to the garbage collector rather than break an in-flight read.
		e := &entry{
			bucket:   b,
			extract:  extract(u.Host),
			wopts:    writerOptions(props),
			timeout:  timeout,
			expires:  expiry(props),
			lastUsed: now,
			kept:     newWrittenFiles(),
			suffix:   suffixRanges[scheme],
			whole:    wholePuts[scheme],
			del:      singleDeletes[scheme],
			host:     u.Host,
		}
		cache[key] = e
		evictLocked()
		return e.fs(ctx), nil
	}
}

func evictLocked() {
	for len(cache) > maxCached {
		var oldestKey string
		var oldest time.Time
		for k, e := range cache {
			if oldestKey == "" || e.lastUsed.Before(oldest) {
				oldestKey, oldest = k, e.lastUsed
			}
		}
		delete(cache, oldestKey)
	}
}

func expiry(props map[string]string) time.Time {
	var t time.Time
	for _, k := range ExpiryKeys {
		v, ok := props[k]
		if !ok {
			continue
		}
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			continue
		}
		at := time.UnixMilli(ms).Add(-RefreshBefore)
		if t.IsZero() || at.Before(t) {
			t = at
		}
	}
	return t
}

// cacheKey is a digest of the scheme, bucket and every property, so that two tables with different
// credentials or endpoints never share a client, and no secret is kept in a map key in clear text.
func cacheKey(scheme, host string, props map[string]string) string {
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", scheme, host)
	for _, k := range keys {
		fmt.Fprintf(h, "%s\x00%s\x00", k, props[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Properties that tune uploads, for every backend: the buffer (part) size of a multipart upload and how many
// parts upload at once. Unset, the backend's defaults apply (for S3: 8 MiB parts, 5 at once).
const (
	PartSizeKey          = "icewriter.upload.part-size-bytes"
	UploadConcurrencyKey = "icewriter.upload.concurrency"
)

func writerOptions(props map[string]string) *blob.WriterOptions {
	size, _ := strconv.Atoi(props[PartSizeKey])
	conc, _ := strconv.Atoi(props[UploadConcurrencyKey])
	if size <= 0 && conc <= 0 {
		return nil
	}
	return &blob.WriterOptions{BufferSize: max(size, 0), MaxConcurrency: max(conc, 0)}
}
