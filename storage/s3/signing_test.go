package s3_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	iceio "github.com/apache/iceberg-go/io"

	"github.com/icewriter/iceberg/internal/faultproxy"
	"github.com/icewriter/iceberg/storage/s3"
)

// signedUpload is what the store saw of one upload request: its kind, the payload hash it was signed with,
// whether the signature covers that header, and the checksum header.
type signedUpload struct {
	kind, contentSHA256, crc32 string
	signsHash                  bool
}

// Over plain HTTP to a loopback endpoint, bodies are signed as UNSIGNED-PAYLOAD (the writer does not hash
// what it uploads: whole objects and multipart parts alike) and still carry their CRC32 checksum; with
// s3.unsigned-payload=false the signature covers each body's SHA-256, as the SDK signs by default. Both read
// back as written.
func TestUnsignedPayloadOverLoopback(t *testing.T) {
	small := randomData(1, 100_000)
	large := bytes.Repeat(randomData(2, 1<<16), 17<<4) // 17 MiB: a multipart upload
	sum := sha256.Sum256(small)
	smallHash := hex.EncodeToString(sum[:])
	for _, tc := range []struct {
		setting  string
		unsigned bool
	}{{"", true}, {"auto", true}, {"true", true}, {"false", false}} {
		t.Run("unsigned-payload="+tc.setting, func(t *testing.T) {
			var mu sync.Mutex
			var seen []signedUpload
			classify := func(r *http.Request) string {
				kind := faultproxy.S3Kind(r)
				if kind == "PutObject" || kind == "UploadPart" {
					mu.Lock()
					seen = append(seen, signedUpload{kind: kind, contentSHA256: r.Header.Get("X-Amz-Content-Sha256"),
						crc32:     r.Header.Get("X-Amz-Checksum-Crc32"),
						signsHash: strings.Contains(r.Header.Get("Authorization"), "x-amz-content-sha256")})
					mu.Unlock()
				}
				return kind
			}
			props := map[string]string{}
			if tc.setting != "" {
				props[s3.UnsignedPayload] = tc.setting
			}
			s := newFaultyStore(t, faultproxy.Config{Classify: classify}, "5s", props)
			for i, data := range [][]byte{small, large} {
				loc := s.put(t, fmt.Sprintf("object-%d", i), data)
				back, err := s.fs.(iceio.ReadFileIO).ReadFile(loc)
				if err != nil || !bytes.Equal(back, data) {
					t.Fatalf("read back %d bytes of %d: %v", len(back), len(data), err)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			kinds := map[string]int{}
			for _, u := range seen {
				kinds[u.kind]++
				if !u.signsHash {
					t.Errorf("%s: the signature does not cover x-amz-content-sha256", u.kind)
				}
				if u.crc32 == "" {
					t.Errorf("%s: no x-amz-checksum-crc32 header: the body goes up without its checksum", u.kind)
				}
				switch {
				case tc.unsigned && u.contentSHA256 != "UNSIGNED-PAYLOAD":
					t.Errorf("%s signed with payload hash %q, want UNSIGNED-PAYLOAD", u.kind, u.contentSHA256)
				case !tc.unsigned && (len(u.contentSHA256) != 64 || u.contentSHA256 == "UNSIGNED-PAYLOAD"):
					t.Errorf("%s signed with payload hash %q, want the body's SHA-256", u.kind, u.contentSHA256)
				case !tc.unsigned && u.kind == "PutObject" && u.contentSHA256 != smallHash:
					t.Errorf("PutObject signed with %q, want the SHA-256 of its body %q", u.contentSHA256, smallHash)
				}
			}
			if kinds["PutObject"] != 1 || kinds["UploadPart"] != 3 {
				t.Errorf("uploads %v, want 1 PutObject and 3 UploadPart", kinds)
			}
		})
	}
}

// s3.unsigned-payload=auto signs bodies unsigned only where nothing between client and store can alter them.
func TestUnsignedPayloadOption(t *testing.T) {
	t.Setenv("AWS_ENDPOINT_URL_S3", "")
	t.Setenv("AWS_S3_ENDPOINT", "")
	for _, tc := range []struct {
		endpoint, setting string
		want              bool
	}{
		{"http://127.0.0.1:8333", "", true},
		{"http://127.0.0.5:8333", "auto", true},
		{"http://localhost:9000", "", true},
		{"http://[::1]:9000", "", true},
		{"http://10.0.0.7:9000", "", false},         // another host over plain HTTP: hashed and signed
		{"http://127.0.0.1.example.com", "", false}, // a name that only looks loopback
		{"https://127.0.0.1:9000", "", false},       // HTTPS: the SDK sends bodies unsigned by itself
		{"", "", false},                             // AWS S3: HTTPS
		{"http://10.0.0.7:9000", "true", true},
		{"http://127.0.0.1:8333", "false", false},
		{"http://127.0.0.1:8333", "FALSE", false},
	} {
		o, err := s3.ParseOptions(map[string]string{"s3.endpoint": tc.endpoint, s3.UnsignedPayload: tc.setting})
		if err != nil || o.UnsignedPayload != tc.want {
			t.Errorf("endpoint %q, %s=%q: UnsignedPayload %v (%v), want %v", tc.endpoint, s3.UnsignedPayload,
				tc.setting, o.UnsignedPayload, err, tc.want)
		}
	}
	_, err := s3.ParseOptions(map[string]string{s3.UnsignedPayload: "sometimes"})
	if err == nil || !strings.Contains(err.Error(), s3.UnsignedPayload) {
		t.Errorf("a bad value: %v, want an error naming %s", err, s3.UnsignedPayload)
	}
}
