package s3

import (
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// The S3 client's connections buffer transportBufferSize each way (net/http's default is 4 KiB: a 10 KiB
// manifest upload took three write syscalls), whether the configuration brought a buildable client of its own
// (proxy, connect timeout) or none; sizes set by the caller are kept.
func TestHTTPClientBuffers(t *testing.T) {
	custom := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.WriteBufferSize = 1 << 20
	})
	for _, tc := range []struct {
		name        string
		given       *awshttp.BuildableClient
		write, read int
	}{
		{"none", nil, transportBufferSize, transportBufferSize},
		{"configured", awshttp.NewBuildableClient(), transportBufferSize, transportBufferSize},
		{"write buffer set", custom, 1 << 20, transportBufferSize},
	} {
		var given aws.HTTPClient
		if tc.given != nil {
			given = tc.given
		}
		tr := buildableClient(given, time.Minute).GetTransport()
		if tr.WriteBufferSize != tc.write || tr.ReadBufferSize != tc.read {
			t.Errorf("%s: write buffer %d, read buffer %d; want %d, %d", tc.name, tr.WriteBufferSize, tr.ReadBufferSize,
				tc.write, tc.read)
		}
		if tr.DialContext == nil {
			t.Errorf("%s: no dialer with the idle timeout", tc.name)
		}
	}
	own := &http.Client{}
	if c := httpClient(own, time.Minute); c != own {
		t.Errorf("a client of the caller's own was replaced by a %T", c)
	}
}
