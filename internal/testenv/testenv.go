// Package testenv reads the endpoints that scripts/integration.sh exports for the integration suite and
// prepares what those tests need on the servers (buckets). Tests skip cleanly when a variable is missing.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// Environment variables set by scripts/integration.sh.
const (
	VersityS3Endpoint = "ICEWRITER_S3_ENDPOINT"         // versitygw S3 endpoint, http://127.0.0.1:PORT
	SeaweedS3Endpoint = "ICEWRITER_SEAWEED_S3_ENDPOINT" // SeaweedFS S3 endpoint
	RESTURI           = "ICEWRITER_REST_URI"            // SeaweedFS Iceberg REST catalog, rest://127.0.0.1:PORT
	PostgresDSN       = "ICEWRITER_PG_DSN"              // postgres://user@127.0.0.1:PORT/db?sslmode=disable
	MySQLDSN          = "ICEWRITER_MYSQL_DSN"           // mysql://root@127.0.0.1:PORT/db
	AccessKey         = "ICEWRITER_S3_ACCESS_KEY"       // both S3 servers and the REST client id
	SecretKey         = "ICEWRITER_S3_SECRET_KEY"       // both S3 servers and the REST client secret
	RESTWarehouse     = "ICEWRITER_REST_WAREHOUSE"      // s3://iceberg-tables
	RESTRestart       = "ICEWRITER_REST_RESTART"        // a command that restarts the REST catalog server
)

// Get returns the variable or skips the test when it is not set.
func Get(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Skipf("%s not set: run scripts/integration.sh", name)
	}
	return v
}

// Keys returns the S3 access key and secret (default test/testsecret).
func Keys() (string, string) {
	a, s := os.Getenv(AccessKey), os.Getenv(SecretKey)
	if a == "" {
		a = "test"
	}
	if s == "" {
		s = "testsecret"
	}
	return a, s
}

// S3Props are the storage properties for an S3 endpoint with the test keys.
func S3Props(endpoint string) map[string]string {
	a, s := Keys()
	return map[string]string{
		"s3.endpoint":          endpoint,
		"s3.region":            "us-east-1",
		"s3.path-style-access": "true",
		"s3.access-key-id":     a,
		"s3.secret-access-key": s,
	}
}

// EnsureBucket creates the bucket on the S3 endpoint unless it exists.
func EnsureBucket(ctx context.Context, endpoint, bucket string) error {
	a, s := Keys()
	cl := s3.New(s3.Options{
		BaseEndpoint: aws.String(endpoint),
		Region:       "us-east-1",
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(a, s, ""),
	})
	_, err := cl.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)})
	var owned *types.BucketAlreadyOwnedByYou
	var exists *types.BucketAlreadyExists
	if err == nil || errors.As(err, &owned) || errors.As(err, &exists) {
		return nil
	}
	if _, herr := cl.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)}); herr == nil {
		return nil
	}
	return fmt.Errorf("create bucket %s at %s: %w", bucket, endpoint, err)
}
