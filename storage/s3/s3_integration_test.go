//go:build integration

package s3_test

import (
	"context"
	"testing"

	"github.com/icewriter/iceberg/internal/testenv"
	"github.com/icewriter/iceberg/storage/s3"
	"github.com/icewriter/iceberg/storage/storagetest"
)

func conformance(t *testing.T, envVar string) {
	endpoint := testenv.Get(t, envVar)
	if err := testenv.EnsureBucket(context.Background(), endpoint, "conformance"); err != nil {
		t.Fatal(err)
	}
	// s3:// runs with the defaults, which send bodies to this loopback endpoint unsigned (UNSIGNED-PAYLOAD);
	// s3a:// with bodies signed by their SHA-256, as to a store on another host over plain HTTP: the server
	// must accept both.
	for _, tc := range []struct{ scheme, unsigned string }{{"s3", "auto"}, {"s3a", "false"}} {
		t.Run(tc.scheme, func(t *testing.T) {
			props := testenv.S3Props(endpoint)
			props[s3.UnsignedPayload] = tc.unsigned
			storagetest.Run(t, storagetest.Config{Root: tc.scheme + "://conformance/prefix", Props: props})
		})
	}
}

// TestVersityGW runs the storage conformance suite against versitygw's S3 gateway.
func TestVersityGW(t *testing.T) { conformance(t, testenv.VersityS3Endpoint) }

// TestSeaweedFS runs the storage conformance suite against SeaweedFS's S3 server.
func TestSeaweedFS(t *testing.T) { conformance(t, testenv.SeaweedS3Endpoint) }
