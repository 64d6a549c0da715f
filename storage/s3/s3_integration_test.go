//go:build integration

package s3_test

import (
	"context"
	"testing"

	"github.com/icewriter/iceberg/internal/testenv"
	"github.com/icewriter/iceberg/storage/storagetest"
)

func conformance(t *testing.T, envVar string) {
	endpoint := testenv.Get(t, envVar)
	if err := testenv.EnsureBucket(context.Background(), endpoint, "conformance"); err != nil {
		t.Fatal(err)
	}
	for _, scheme := range []string{"s3", "s3a"} {
		t.Run(scheme, func(t *testing.T) {
			storagetest.Run(t, storagetest.Config{Root: scheme + "://conformance/prefix", Props: testenv.S3Props(endpoint)})
		})
	}
}

// TestVersityGW runs the storage conformance suite against versitygw's S3 gateway.
func TestVersityGW(t *testing.T) { conformance(t, testenv.VersityS3Endpoint) }

// TestSeaweedFS runs the storage conformance suite against SeaweedFS's S3 server.
func TestSeaweedFS(t *testing.T) { conformance(t, testenv.SeaweedS3Endpoint) }
