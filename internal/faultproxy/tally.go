package faultproxy

import (
	"maps"
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

// Tally is what the proxy saw, by request kind (Config.Classify names each request's kind).
type Tally struct {
	Requests    map[string]int64 // requests by kind, retries included
	Retries     map[string]int64 // of Requests, those a client sent again after a failed attempt (see Retry)
	BytesIn     map[string]int64 // request body bytes by kind (what the client uploaded)
	Connections int64            // client connections accepted: more than a few means keep-alive failed
}

// FirstAttempts returns the requests by kind without the retries: what the client asked for. Count these
// when the number of requests is the subject: a request that moves no byte for the client's timeout is sent
// again, and a loaded machine (a starved process serving both ends) can make that happen at any timeout.
func (t Tally) FirstAttempts() map[string]int64 {
	out := map[string]int64{}
	for k, v := range t.Requests {
		if v -= t.Retries[k]; v != 0 {
			out[k] = v
		}
	}
	return out
}

// Total returns the requests of every kind.
func (t Tally) Total() int64 {
	var n int64
	for _, c := range t.Requests {
		n += c
	}
	return n
}

// Sub returns t minus an earlier tally of the same proxy: what happened in between.
func (t Tally) Sub(before Tally) Tally {
	return Tally{Requests: subCounts(t.Requests, before.Requests), Retries: subCounts(t.Retries, before.Retries),
		BytesIn: subCounts(t.BytesIn, before.BytesIn), Connections: t.Connections - before.Connections}
}

// subCounts returns a minus b, leaving out the kinds whose difference is zero.
func subCounts(a, b map[string]int64) map[string]int64 {
	d := map[string]int64{}
	for k, v := range a {
		if v -= b[k]; v != 0 {
			d[k] = v
		}
	}
	return d
}

// Tally returns a copy of what the proxy has counted so far.
func (p *Proxy) Tally() Tally {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Tally{Requests: cloneCounts(p.byKind), Retries: cloneCounts(p.retries), BytesIn: cloneCounts(p.bytesIn),
		Connections: p.conns.Load()}
}

// cloneCounts copies m into a new map (an empty one when m is nil, so callers may add to it).
func cloneCounts(m map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(m))
	maps.Copy(out, m)
	return out
}

// Retry reports whether r is a client's retry of a request: the AWS SDKs number their attempts in the
// amz-sdk-request header ("attempt=2; max=3"). Other clients' retries are not told apart.
func Retry(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Amz-Sdk-Request"), ";") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(part), "attempt="); ok {
			n, err := strconv.Atoi(v)
			return err == nil && n > 1
		}
	}
	return false
}

// count adds one request of its kind, with its body's declared length.
func (p *Proxy) count(r *http.Request) {
	kind := r.Method
	if p.cfg.Classify != nil {
		kind = p.cfg.Classify(r)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byKind == nil {
		p.byKind, p.retries, p.bytesIn = map[string]int64{}, map[string]int64{}, map[string]int64{}
	}
	p.byKind[kind]++
	if Retry(r) {
		p.retries[kind]++
	}
	if r.ContentLength > 0 {
		p.bytesIn[kind] += r.ContentLength
	}
}

// S3Kind names an S3 request (path-style addressing) by its API operation: PutObject, UploadPart,
// CreateMultipartUpload, CompleteMultipartUpload, AbortMultipartUpload, GetObject, HeadObject, HeadBucket,
// ListObjects, DeleteObject, DeleteObjects, CopyObject.
func S3Kind(r *http.Request) string {
	q := r.URL.Query()
	bucketOnly := strings.Count(strings.Trim(r.URL.Path, "/"), "/") == 0
	switch r.Method {
	case http.MethodPut:
		switch {
		case q.Has("partNumber") && q.Has("uploadId"):
			return "UploadPart"
		case r.Header.Get("X-Amz-Copy-Source") != "":
			return "CopyObject"
		case bucketOnly:
			return "CreateBucket"
		}
		return "PutObject"
	case http.MethodPost:
		switch {
		case q.Has("uploads"):
			return "CreateMultipartUpload"
		case q.Has("uploadId"):
			return "CompleteMultipartUpload"
		case q.Has("delete"):
			return "DeleteObjects"
		}
	case http.MethodGet:
		if bucketOnly || q.Has("list-type") {
			return "ListObjects"
		}
		return "GetObject"
	case http.MethodHead:
		if bucketOnly {
			return "HeadBucket"
		}
		return "HeadObject"
	case http.MethodDelete:
		if q.Has("uploadId") {
			return "AbortMultipartUpload"
		}
		return "DeleteObject"
	}
	return r.Method + " " + r.URL.Path
}

var (
	restTable      = regexp.MustCompile(`/namespaces/[^/]+/tables/[^/]+$`)
	restTables     = regexp.MustCompile(`/namespaces/[^/]+/tables$`)
	restNamespace  = regexp.MustCompile(`/namespaces/[^/]+$`)
	restNamespaces = regexp.MustCompile(`/namespaces$`)
)

// RESTKind names an Iceberg REST catalog request by its operation: token, config, load-table, commit-table,
// table-exists, create-table, drop-table, list-tables, commit-transaction, load-namespace, namespace-exists,
// create-namespace, list-namespaces.
func RESTKind(r *http.Request) string {
	p, m := r.URL.Path, r.Method
	switch {
	case strings.HasSuffix(p, "/oauth/tokens"):
		return "token"
	case strings.HasSuffix(p, "/config"):
		return "config"
	case strings.HasSuffix(p, "/transactions/commit"):
		return "commit-transaction"
	case restTable.MatchString(p):
		switch m {
		case http.MethodGet:
			return "load-table"
		case http.MethodPost:
			return "commit-table"
		case http.MethodHead:
			return "table-exists"
		case http.MethodDelete:
			return "drop-table"
		}
	case restTables.MatchString(p):
		if m == http.MethodPost {
			return "create-table"
		}
		return "list-tables"
	case restNamespace.MatchString(p):
		switch m {
		case http.MethodGet:
			return "load-namespace"
		case http.MethodHead:
			return "namespace-exists"
		}
	case restNamespaces.MatchString(p):
		if m == http.MethodPost {
			return "create-namespace"
		}
		return "list-namespaces"
	}
	return m + " " + p
}
