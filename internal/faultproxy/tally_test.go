package faultproxy_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/icewriter/iceberg/internal/faultproxy"
)

// send makes one request and reads its reply to the end; header, when not nil, is added to the request.
func send(t *testing.T, method, url string, body []byte, header http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

func TestTallyCountsRequestsBytesAndConnections(t *testing.T) {
	up := newUpstream(t)
	p := start(t, up, faultproxy.Config{Classify: faultproxy.S3Kind})
	do := func(method, path string, body []byte) { t.Helper(); send(t, method, p.URL()+path, body, nil) }
	before := p.Tally()
	do(http.MethodPut, "/bucket/data/a.parquet", make([]byte, 1000))
	do(http.MethodPut, "/bucket/data/b.parquet?partNumber=1&uploadId=x", make([]byte, 500))
	do(http.MethodGet, "/bucket/metadata/m.avro", nil)
	do(http.MethodGet, "/bucket?list-type=2&prefix=data/", nil)
	got := p.Tally().Sub(before)
	want := map[string]int64{"PutObject": 1, "UploadPart": 1, "GetObject": 1, "ListObjects": 1}
	for k, n := range want {
		if got.Requests[k] != n {
			t.Errorf("%s: %d requests, want %d (all: %v)", k, got.Requests[k], n, got.Requests)
		}
	}
	if got.Total() != 4 {
		t.Errorf("total %d, want 4", got.Total())
	}
	if got.BytesIn["PutObject"] != 1000 || got.BytesIn["UploadPart"] != 500 {
		t.Errorf("bytes in %v, want PutObject 1000 and UploadPart 500", got.BytesIn)
	}
	// http.DefaultClient keeps the connection alive between the four requests.
	if got.Connections != 1 {
		t.Errorf("%d connections for 4 sequential requests, want 1 (keep-alive)", got.Connections)
	}
}

// A request an AWS SDK sends again (amz-sdk-request: attempt=2) counts as a request and as a retry; the first
// attempts are what the client asked for.
func TestTallyTellsRetriesApart(t *testing.T) {
	up := newUpstream(t)
	p := start(t, up, faultproxy.Config{Classify: faultproxy.S3Kind})
	for _, attempt := range []string{"attempt=1; max=3", "attempt=2; max=3", "", "ttl=20261201T000000Z; attempt=3; max=3"} {
		var h http.Header
		if attempt != "" {
			h = http.Header{"Amz-Sdk-Request": {attempt}}
		}
		send(t, http.MethodPut, p.URL()+"/bucket/data/a.parquet", make([]byte, 10), h)
	}
	got := p.Tally()
	if got.Requests["PutObject"] != 4 || got.Retries["PutObject"] != 2 || got.FirstAttempts()["PutObject"] != 2 {
		t.Errorf("requests %v, retries %v, first attempts %v; want 4, 2 and 2 PutObject",
			got.Requests, got.Retries, got.FirstAttempts())
	}
}

func TestKindsNameOperations(t *testing.T) {
	s3 := []struct{ method, target, copySrc, want string }{
		{"PUT", "/b/k", "", "PutObject"},
		{"PUT", "/b/k?partNumber=2&uploadId=u", "", "UploadPart"},
		{"PUT", "/b/k", "/b/src", "CopyObject"},
		{"PUT", "/b", "", "CreateBucket"},
		{"POST", "/b/k?uploads", "", "CreateMultipartUpload"},
		{"POST", "/b/k?uploadId=u", "", "CompleteMultipartUpload"},
		{"POST", "/b?delete", "", "DeleteObjects"},
		{"GET", "/b/k", "", "GetObject"},
		{"GET", "/b/?list-type=2", "", "ListObjects"},
		{"HEAD", "/b/k", "", "HeadObject"},
		{"HEAD", "/b", "", "HeadBucket"},
		{"DELETE", "/b/k", "", "DeleteObject"},
		{"DELETE", "/b/k?uploadId=u", "", "AbortMultipartUpload"},
	}
	for _, c := range s3 {
		r := httptest.NewRequest(c.method, c.target, nil)
		if c.copySrc != "" {
			r.Header.Set("X-Amz-Copy-Source", c.copySrc)
		}
		if got := faultproxy.S3Kind(r); got != c.want {
			t.Errorf("S3Kind(%s %s) = %s, want %s", c.method, c.target, got, c.want)
		}
	}
	rest := []struct{ method, target, want string }{
		{"POST", "/v1/oauth/tokens", "token"},
		{"GET", "/v1/config?warehouse=w", "config"},
		{"GET", "/v1/pre/namespaces/db/tables/t", "load-table"},
		{"POST", "/v1/pre/namespaces/db/tables/t", "commit-table"},
		{"HEAD", "/v1/pre/namespaces/db/tables/t", "table-exists"},
		{"POST", "/v1/pre/namespaces/db/tables", "create-table"},
		{"POST", "/v1/pre/transactions/commit", "commit-transaction"},
		{"GET", "/v1/pre/namespaces/db", "load-namespace"},
		{"POST", "/v1/pre/namespaces", "create-namespace"},
	}
	for _, c := range rest {
		if got := faultproxy.RESTKind(httptest.NewRequest(c.method, c.target, nil)); got != c.want {
			t.Errorf("RESTKind(%s %s) = %s, want %s", c.method, c.target, got, c.want)
		}
	}
}
