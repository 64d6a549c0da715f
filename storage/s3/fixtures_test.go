package s3_test

import (
	"context"
	"maps"
	"math/rand/v2"
	"net/http"
	"testing"

	iceio "github.com/apache/iceberg-go/io"

	"github.com/icewriter/iceberg/internal/fakes3"
	"github.com/icewriter/iceberg/internal/faultproxy"
	"github.com/icewriter/iceberg/storage"
)

const secretKey = "FaultTestSecret42"

// faultyStore is an in-memory S3 behind a fault-injecting proxy, and a file system on it.
type faultyStore struct {
	s3    *fakes3.Server
	proxy *faultproxy.Proxy
	fs    iceio.IO
	root  string
}

// newFaultyStore starts the store and the proxy, and opens a file system on the proxy with timeout as the
// request timeout and the props of more (if any) on top of the defaults.
func newFaultyStore(t *testing.T, cfg faultproxy.Config, timeout string, more ...map[string]string) *faultyStore {
	t.Helper()
	srv := fakes3.Start()
	t.Cleanup(srv.Close)
	req, _ := http.NewRequest(http.MethodPut, srv.URL+"/bucket", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	p, err := faultproxy.Start(srv.URL, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	props := map[string]string{
		"s3.endpoint": p.URL(), "s3.region": "us-east-1", "s3.path-style-access": "true",
		"s3.access-key-id": "test", "s3.secret-access-key": secretKey,
		"s3.retry.max-backoff": "50ms", storage.S3RequestTimeoutKey: timeout,
	}
	for _, m := range more {
		maps.Copy(props, m)
	}
	fs, err := iceio.LoadFS(context.Background(), props, "s3://bucket/x")
	if err != nil {
		t.Fatal(err)
	}
	return &faultyStore{s3: srv, proxy: p, fs: fs, root: "s3://bucket/" + t.Name()}
}

func (s *faultyStore) put(t *testing.T, name string, data []byte) string {
	t.Helper()
	loc := s.root + "/" + name
	if err := s.fs.(iceio.WriteFileIO).WriteFile(loc, data); err != nil {
		t.Fatalf("WriteFile(%s): %v", name, err)
	}
	return loc
}

func randomData(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}
