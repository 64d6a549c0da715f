// Package fakes3 is a small in-memory S3 server for hermetic tests of error paths that a real server cannot
// produce on demand (put a faultproxy in front of it for stalls and cut-off bodies). It speaks path-style S3
// without checking signatures: buckets, PutObject (plain or aws-chunked bodies), GetObject with ranges (suffix
// ranges too), HeadObject, DeleteObject, CopyObject, multipart uploads and ListObjectsV2. Everything else is a
// 501.
// The integration suite runs the same scenarios against real servers.
package fakes3

import (
	"bufio"
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

type object struct {
	data []byte
	mod  time.Time
	etag string
}

// Server is a running fake.
type Server struct {
	*httptest.Server
	mu      sync.Mutex
	buckets map[string]map[string]*object
	uploads map[string]map[int][]byte
	nextID  int
}

// Start starts a fake on 127.0.0.1; Close stops it.
func Start() *Server {
	s := &Server{buckets: map[string]map[string]*object{}, uploads: map[string]map[int][]byte{}}
	s.Server = httptest.NewServer(s)
	return s
}

// Objects returns the keys of a bucket, sorted.
func (s *Server) Objects(bucket string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	for k := range s.buckets[bucket] {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	q := r.URL.Query()
	// Bodies are read and objects served outside the lock: a slow or stalled client holds up no one else.
	var data []byte
	if r.Method == http.MethodPut || r.Method == http.MethodPost {
		var err error
		if data, err = body(r); err != nil {
			fail(w, http.StatusBadRequest, "IncompleteBody")
			return
		}
	}
	if r.Method == http.MethodGet && key != "" {
		s.mu.Lock()
		o, ok := s.buckets[bucket][key]
		s.mu.Unlock()
		if !ok {
			fail(w, http.StatusNotFound, "NoSuchKey")
			return
		}
		serveObject(w, r, o)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if bucket == "" {
		fail(w, http.StatusNotImplemented, "NotImplemented")
		return
	}
	objs, ok := s.buckets[bucket]
	if key == "" {
		switch r.Method {
		case http.MethodPut:
			if !ok {
				s.buckets[bucket] = map[string]*object{}
			}
			w.WriteHeader(http.StatusOK)
		case http.MethodHead:
			if !ok {
				w.WriteHeader(http.StatusNotFound)
				return
			}
			w.WriteHeader(http.StatusOK)
		case http.MethodGet:
			if !ok {
				fail(w, http.StatusNotFound, "NoSuchBucket")
				return
			}
			s.list(w, objs, q)
		default:
			fail(w, http.StatusNotImplemented, "NotImplemented")
		}
		return
	}
	if !ok {
		fail(w, http.StatusNotFound, "NoSuchBucket")
		return
	}
	switch {
	case r.Method == http.MethodPost && q.Has("uploads"):
		s.nextID++
		id := strconv.Itoa(s.nextID)
		s.uploads[id] = map[int][]byte{}
		writeXML(w, struct {
			XMLName  xml.Name `xml:"InitiateMultipartUploadResult"`
			Bucket   string
			Key      string
			UploadId string
		}{Bucket: bucket, Key: key, UploadId: id})
	case r.Method == http.MethodPut && q.Has("uploadId"):
		parts, ok := s.uploads[q.Get("uploadId")]
		if !ok {
			fail(w, http.StatusNotFound, "NoSuchUpload")
			return
		}
		n, _ := strconv.Atoi(q.Get("partNumber"))
		parts[n] = data
		w.Header().Set("ETag", etag(data))
		w.WriteHeader(http.StatusOK)
	case r.Method == http.MethodPost && q.Has("uploadId"):
		parts, ok := s.uploads[q.Get("uploadId")]
		if !ok {
			fail(w, http.StatusNotFound, "NoSuchUpload")
			return
		}
		nums := make([]int, 0, len(parts))
		for n := range parts {
			nums = append(nums, n)
		}
		sort.Ints(nums)
		var all []byte
		for _, n := range nums {
			all = append(all, parts[n]...)
		}
		delete(s.uploads, q.Get("uploadId"))
		o := &object{data: all, mod: time.Now(), etag: etag(all)}
		objs[key] = o
		writeXML(w, struct {
			XMLName xml.Name `xml:"CompleteMultipartUploadResult"`
			Bucket  string
			Key     string
			ETag    string
		}{Bucket: bucket, Key: key, ETag: o.etag})
	case r.Method == http.MethodDelete && q.Has("uploadId"):
		delete(s.uploads, q.Get("uploadId"))
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodPut && r.Header.Get("X-Amz-Copy-Source") != "":
		src, _ := url.PathUnescape(r.Header.Get("X-Amz-Copy-Source"))
		sb, sk, _ := strings.Cut(strings.TrimPrefix(src, "/"), "/")
		o, ok := s.buckets[sb][sk]
		if !ok {
			fail(w, http.StatusNotFound, "NoSuchKey")
			return
		}
		objs[key] = &object{data: o.data, mod: time.Now(), etag: o.etag}
		writeXML(w, struct {
			XMLName xml.Name `xml:"CopyObjectResult"`
			ETag    string
		}{ETag: o.etag})
	case r.Method == http.MethodPut:
		o := &object{data: data, mod: time.Now(), etag: etag(data)}
		objs[key] = o
		w.Header().Set("ETag", o.etag)
		w.WriteHeader(http.StatusOK)
	case r.Method == http.MethodHead:
		o, ok := objs[key]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		serveObject(w, r, o)
	case r.Method == http.MethodDelete:
		delete(objs, key)
		w.WriteHeader(http.StatusNoContent)
	default:
		fail(w, http.StatusNotImplemented, "NotImplemented")
	}
}

func serveObject(w http.ResponseWriter, r *http.Request, o *object) {
	size := int64(len(o.data))
	h := w.Header()
	h.Set("ETag", o.etag)
	h.Set("Last-Modified", o.mod.UTC().Format(http.TimeFormat))
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Accept-Ranges", "bytes")
	start, end := int64(0), size-1
	status := http.StatusOK
	if rg := r.Header.Get("Range"); rg != "" {
		spec, ok := strings.CutPrefix(rg, "bytes=")
		a, b, _ := strings.Cut(spec, "-")
		s, err1 := strconv.ParseInt(a, 10, 64)
		e, err2 := strconv.ParseInt(b, 10, 64)
		if b == "" {
			e, err2 = size-1, nil
		}
		if a == "" && err2 == nil && e > 0 { // a suffix range, "bytes=-n": the last n bytes
			s, e, err1 = max(size-e, 0), size-1, nil
		}
		if !ok || err1 != nil || err2 != nil || s >= size || s > e {
			h.Set("Content-Range", fmt.Sprintf("bytes */%d", size))
			fail(w, http.StatusRequestedRangeNotSatisfiable, "InvalidRange")
			return
		}
		start, end = s, min(e, size-1)
		status = http.StatusPartialContent
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, end, size))
	}
	h.Set("Content-Length", strconv.FormatInt(end-start+1, 10))
	w.WriteHeader(status)
	if r.Method == http.MethodGet && size > 0 {
		_, _ = w.Write(o.data[start : end+1])
	}
}

func (s *Server) list(w http.ResponseWriter, objs map[string]*object, q url.Values) {
	prefix, delim := q.Get("prefix"), q.Get("delimiter")
	type content struct {
		Key          string
		LastModified string
		ETag         string
		Size         int64
	}
	type commonPrefix struct{ Prefix string }
	res := struct {
		XMLName        xml.Name `xml:"ListBucketResult"`
		Name           string
		Prefix         string
		KeyCount       int
		MaxKeys        int
		IsTruncated    bool
		Contents       []content
		CommonPrefixes []commonPrefix
	}{Prefix: prefix, MaxKeys: 1000}
	keys := make([]string, 0, len(objs))
	for k := range objs {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	seen := map[string]bool{}
	for _, k := range keys {
		if delim != "" {
			if i := strings.Index(k[len(prefix):], delim); i >= 0 {
				p := k[:len(prefix)+i+len(delim)]
				if !seen[p] {
					seen[p] = true
					res.CommonPrefixes = append(res.CommonPrefixes, commonPrefix{p})
				}
				continue
			}
		}
		o := objs[k]
		res.Contents = append(res.Contents, content{Key: k, LastModified: o.mod.UTC().Format(time.RFC3339),
			ETag: o.etag, Size: int64(len(o.data))})
	}
	res.KeyCount = len(res.Contents) + len(res.CommonPrefixes)
	writeXML(w, res)
}

// body reads a request body, decoding aws-chunked streaming uploads.
func body(r *http.Request) ([]byte, error) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	if !strings.Contains(r.Header.Get("Content-Encoding"), "aws-chunked") &&
		!strings.HasPrefix(r.Header.Get("X-Amz-Content-Sha256"), "STREAMING-") {
		return raw, nil
	}
	br := bufio.NewReader(bytes.NewReader(raw))
	var out []byte
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("fakes3: aws-chunked: %w", err)
		}
		sizeHex, _, _ := strings.Cut(strings.TrimSpace(line), ";")
		n, err := strconv.ParseInt(sizeHex, 16, 64)
		if err != nil {
			return nil, fmt.Errorf("fakes3: aws-chunked size %q: %w", line, err)
		}
		if n == 0 {
			return out, nil // trailers (checksums) follow; not checked
		}
		chunk := make([]byte, n)
		if _, err := io.ReadFull(br, chunk); err != nil {
			return nil, fmt.Errorf("fakes3: aws-chunked: %w", err)
		}
		out = append(out, chunk...)
		if _, err := br.ReadString('\n'); err != nil {
			return nil, fmt.Errorf("fakes3: aws-chunked: %w", err)
		}
	}
}

func etag(b []byte) string {
	h := md5.Sum(b)
	return `"` + hex.EncodeToString(h[:]) + `"`
}

func writeXML(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, xml.Header)
	_ = xml.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message></Error>`, code, code)
}
