package s3_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/icewriter/iceberg/storage/s3"
)

func TestParseOptions(t *testing.T) {
	t.Setenv("AWS_ENDPOINT_URL_S3", "")
	t.Setenv("AWS_S3_ENDPOINT", "")
	o, err := s3.ParseOptions(map[string]string{})
	if err != nil || o.PathStyle || o.Endpoint != "" || o.Checksum != aws.RequestChecksumCalculationWhenSupported {
		t.Errorf("defaults: %+v, %v", o, err)
	}
	o, _ = s3.ParseOptions(map[string]string{"s3.endpoint": "http://127.0.0.1:1", "client.region": "eu-west-1"})
	if !o.PathStyle || o.Region != "eu-west-1" {
		t.Errorf("endpoint: %+v", o)
	}
	o, _ = s3.ParseOptions(map[string]string{"s3.endpoint": "http://x", "s3.path-style-access": "false"})
	if o.PathStyle {
		t.Errorf("path-style-access=false ignored: %+v", o)
	}
	o, _ = s3.ParseOptions(map[string]string{"s3.force-virtual-addressing": "false", "s3.checksum": "when_required"})
	if !o.PathStyle || o.Checksum != aws.RequestChecksumCalculationWhenRequired {
		t.Errorf("force-virtual-addressing=false: %+v", o)
	}
	if _, err := s3.ParseOptions(map[string]string{"s3.path-style-access": "maybe"}); err == nil {
		t.Error("no error for a bad boolean")
	}
	t.Setenv("AWS_S3_ENDPOINT", "http://env:9000")
	if o, _ := s3.ParseOptions(nil); o.Endpoint != "http://env:9000" || !o.PathStyle {
		t.Errorf("env endpoint: %+v", o)
	}
}

func TestOpenNeverPrintsSecret(t *testing.T) {
	u, _ := url.Parse("s3://bucket/key")
	// A secret without an access key id is refused; the message must not carry it.
	_, err := s3.Open(context.Background(), u, map[string]string{"s3.secret-access-key": "TopSecretKey123"})
	if err != nil && strings.Contains(err.Error(), "TopSecretKey123") {
		t.Fatalf("error prints the secret: %v", err)
	}
	if _, err := s3.Open(context.Background(), &url.URL{Scheme: "s3"}, nil); err == nil {
		t.Error("no error for a location without a bucket")
	}
}
