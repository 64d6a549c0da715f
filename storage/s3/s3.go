// Package s3 serves s3://, s3a:// and s3n:// table locations from Amazon S3 or any S3-compatible store
// (MinIO, SeaweedFS, versitygw, Ceph, R2, ...) through gocloud.dev's s3blob over aws-sdk-go-v2. Import it for
// its side effect:
//
//	import _ "github.com/icewriter/iceberg/storage/s3"
//
//	cat, err := catalog.Open(ctx, "sqlite:///var/lib/app/catalog.db?warehouse=s3://bucket/wh"+
//		"&s3.endpoint=http://127.0.0.1:7070&s3.region=us-east-1&s3.path-style-access=true")
//
// It reads Iceberg's storage properties, from the catalog or vended per table by a REST catalog:
// s3.endpoint, s3.region (else client.region, else the environment, else us-east-1), s3.path-style-access
// (default: true when an endpoint is set, as s3.force-virtual-addressing=false), s3.access-key-id,
// s3.secret-access-key, s3.session-token (else the default AWS chain: environment, shared profile, web
// identity, instance role), s3.proxy-uri, s3.connect-timeout, s3.checksum (when_supported, the SDK default, or
// when_required for stores that reject checksum trailers), s3.retry.max-attempts (default 10) and
// s3.retry.max-backoff (default 10s): requests that fail on a connection error, throttling (503 SlowDown, 429)
// or a 5xx answer are retried for about a minute before the operation fails. The endpoint may also come from
// AWS_ENDPOINT_URL_S3 or AWS_S3_ENDPOINT.
//
// s3.unsigned-payload (auto, true or false; default auto) decides whether a request's SigV4 signature covers
// the SHA-256 of its body, which costs the writer a hash of every byte it uploads. Over HTTPS the SDK never
// hashes bodies (TLS protects them; it signs UNSIGNED-PAYLOAD), whatever this says. Over plain HTTP, auto
// hashes them unless the endpoint is a loopback address (the body never leaves the host, so nothing between
// client and store can alter it); true never hashes them (a network you trust, such as a private link to
// the store); false always hashes them, as the SDK does. A body sent unsigned still carries its checksum
// (s3.checksum), which the store verifies.
//
// s3.request-timeout (or icewriter.request-timeout, for every backend; default 60s, a Go duration or seconds)
// bounds how long a request may go without moving a byte: connecting, sending the body, waiting for the
// answer, reading the body. An attempt that moves no byte for half of it is abandoned and retried at once, and
// a second stalled attempt fails the request with an error wrapping storage.ErrStalled that names the
// operation and the object: a server that accepts connections and never answers fails an upload within the
// timeout. Bodies cut off while being read are re-read from where they stopped by package storage.
//
// Files are written through the S3 transfer manager: objects above one part (8 MiB) are uploaded as a
// multipart upload whose parts go up concurrently (5 at a time), so a large Parquet file streams out while it
// is being encoded. Buckets are cached per bucket and properties by package storage. Connections are kept
// alive and buffer 64 KiB each way (net/http's default is 4 KiB), and over plain HTTP request bodies go out
// in writes of up to 256 KiB: a manifest upload is one write syscall, a 3 MiB data file about a dozen (TLS
// writes a record at a time).
package s3

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	iceio "github.com/apache/iceberg-go/io"
	ices3 "github.com/apache/iceberg-go/io/gocloud/s3" // also registers iceberg-go's own factory, replaced below
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"
	"gocloud.dev/blob/s3blob"

	"github.com/icewriter/iceberg/internal/redact"
	"github.com/icewriter/iceberg/storage"
)

// Schemes are the URI schemes this package serves.
var Schemes = []string{"s3", "s3a", "s3n"}

// Property names read besides iceberg-go's io.S3* constants.
const (
	PathStyleAccess = "s3.path-style-access"
	Checksum        = "s3.checksum"
	// RetryMaxAttempts is the number of attempts per request (default DefaultMaxAttempts). Connection
	// errors, throttling and 5xx answers are retried with jittered exponential backoff, so that a store that
	// restarts or fails over does not fail a file upload.
	RetryMaxAttempts = "s3.retry.max-attempts"
	// RetryMaxBackoff caps the delay between attempts, as a Go duration (default DefaultMaxBackoff).
	RetryMaxBackoff = "s3.retry.max-backoff"
	// UnsignedPayload is auto (default), true or false: whether bodies sent over plain HTTP are signed without
	// their SHA-256 (see the package documentation).
	UnsignedPayload = "s3.unsigned-payload"
)

// Retry defaults: about a minute of retrying in total before an operation fails.
const (
	DefaultMaxAttempts = 10
	DefaultMaxBackoff  = 10 * time.Second
)

// DefaultRegion is the signing region used when neither the properties nor the environment name one.
const DefaultRegion = "us-east-1"

func init() {
	storage.Register(Open, Schemes...)
	storage.RegisterSuffixRange(suffixRange, Schemes...)
	storage.RegisterWholePut(wholePut, singlePutMax, Schemes...)
	storage.RegisterSingleDelete(singleDelete, Schemes...)
}

// singleDelete removes an object with one DeleteObject, without the HEAD gocloud's Delete sends first.
func singleDelete(ctx context.Context, as func(any) bool, bucket, key string) (bool, error) {
	var client *s3.Client
	if !as(&client) || client == nil {
		return false, nil
	}
	_, err := client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	return true, err
}

// singlePutMax is the largest object uploaded in one PutObject from a buffer: below 16 MiB, the threshold
// under which the SDK's transfer manager (gocloud's writer) sends a single PutObject too. Larger files stream
// through gocloud's writer in multipart uploads.
const singlePutMax = 16<<20 - 1

// wholePut uploads body in one PutObject, as the transfer manager would for an object this small, but from a
// buffer the SDK can rewind for a retry, without the pipe, the goroutine and the copy of the body into a
// buffer grown by doubling.
func wholePut(ctx context.Context, as func(any) bool, bucket, key string, body io.ReadSeeker, size int64,
	contentType string) (bool, error) {
	var client *s3.Client
	if !as(&client) || client == nil {
		return false, nil
	}
	_, err := client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(bucket),
		Key:           aws.String(key),
		Body:          body,
		ContentLength: aws.Int64(size),
		ContentType:   aws.String(contentType),
	})
	return true, err
}

// suffixRange asks a GetObject for the object's last n bytes; the reader's size comes from Content-Range.
func suffixRange(as func(any) bool, n int64) bool {
	var in *s3.GetObjectInput
	if !as(&in) || in == nil {
		return false
	}
	in.Range = aws.String(fmt.Sprintf("bytes=-%d", n))
	return true
}

// Options is what the properties resolve to, apart from credentials.
type Options struct {
	Endpoint    string
	Region      string
	PathStyle   bool
	Checksum    aws.RequestChecksumCalculation
	MaxAttempts int
	MaxBackoff  time.Duration
	// RequestTimeout is how long a request may go without moving a byte (storage.RequestTimeout).
	RequestTimeout time.Duration
	// UnsignedPayload signs bodies sent over plain HTTP as UNSIGNED-PAYLOAD rather than by their SHA-256
	// (s3.unsigned-payload, resolved against the endpoint). Over HTTPS the SDK sends them unsigned anyway.
	UnsignedPayload bool
}

// ParseOptions resolves the endpoint, region, addressing style and checksum mode from the properties and the
// environment.
func ParseOptions(props map[string]string) (Options, error) {
	o := Options{Endpoint: props[iceio.S3EndpointURL], Region: props[iceio.S3Region],
		MaxAttempts: DefaultMaxAttempts, MaxBackoff: DefaultMaxBackoff}
	if v := props[RetryMaxAttempts]; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return o, fmt.Errorf("storage/s3: %s=%q: want a positive integer", RetryMaxAttempts, v)
		}
		o.MaxAttempts = n
	}
	if v := props[RetryMaxBackoff]; v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return o, fmt.Errorf("storage/s3: %s=%q: want a positive duration", RetryMaxBackoff, v)
		}
		o.MaxBackoff = d
	}
	d, err := storage.RequestTimeout(props)
	if err != nil {
		return o, err
	}
	o.RequestTimeout = d
	if o.Endpoint == "" {
		o.Endpoint = os.Getenv("AWS_ENDPOINT_URL_S3")
	}
	if o.Endpoint == "" {
		o.Endpoint = os.Getenv("AWS_S3_ENDPOINT")
	}
	if o.Region == "" {
		o.Region = props[iceio.S3ClientRegion]
	}
	o.PathStyle = o.Endpoint != ""
	if v, ok := props[iceio.S3ForceVirtualAddressing]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return o, fmt.Errorf("storage/s3: %s=%q: %w", iceio.S3ForceVirtualAddressing, v, err)
		}
		o.PathStyle = !b
	}
	if v, ok := props[PathStyleAccess]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return o, fmt.Errorf("storage/s3: %s=%q: %w", PathStyleAccess, v, err)
		}
		o.PathStyle = b
	}
	switch strings.ToLower(props[Checksum]) {
	case "", "when_supported":
		o.Checksum = aws.RequestChecksumCalculationWhenSupported
	case "when_required":
		o.Checksum = aws.RequestChecksumCalculationWhenRequired
	default:
		return o, fmt.Errorf("storage/s3: %s=%q (want when_supported or when_required)", Checksum, props[Checksum])
	}
	switch v := strings.ToLower(props[UnsignedPayload]); v {
	case "", "auto":
		o.UnsignedPayload = loopback(o.Endpoint)
	default:
		b, err := strconv.ParseBool(v)
		if err != nil {
			return o, fmt.Errorf("storage/s3: %s=%q (want auto, true or false)", UnsignedPayload, props[UnsignedPayload])
		}
		o.UnsignedPayload = b
	}
	return o, nil
}

// loopback reports whether endpoint is a plain-HTTP URL whose host is a loopback address (127.0.0.0/8, ::1)
// or localhost: a request to it never leaves the machine. An endpoint that does not parse is not.
func loopback(endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil || !strings.EqualFold(u.Scheme, "http") {
		return false
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// Open opens the bucket u.Host configured by props. It is registered with package storage for Schemes and
// exported for programs that want a *blob.Bucket of their own.
func Open(ctx context.Context, u *url.URL, props map[string]string) (*blob.Bucket, error) {
	if u.Host == "" {
		return nil, fmt.Errorf("storage/s3: location %q names no bucket", redact.URL(u))
	}
	o, err := ParseOptions(props)
	if err != nil {
		return nil, err
	}
	cfg, err := ices3.ParseAWSConfig(ctx, props) // region, static or default credentials, proxy, timeouts
	if err != nil {
		return nil, redact.Error(fmt.Errorf("storage/s3: aws config: %w", err), redact.Secrets(props)...)
	}
	if o.Region != "" {
		cfg.Region = o.Region
	}
	if cfg.Region == "" {
		cfg.Region = DefaultRegion
	}
	// Each of the stallAttempts attempts gets an equal share of the request timeout, so a server that stops
	// answering fails the request within the timeout, retry included.
	cfg.HTTPClient = httpClient(cfg.HTTPClient, o.RequestTimeout/stallAttempts)
	client := s3.NewFromConfig(*cfg, func(so *s3.Options) {
		if o.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.Endpoint)
		}
		so.UsePathStyle = o.PathStyle
		so.RequestChecksumCalculation = o.Checksum
		so.DisableLogOutputChecksumValidationSkipped = true
		so.Retryer = stallRetryer{retry.NewStandard(func(ro *retry.StandardOptions) {
			ro.MaxAttempts = o.MaxAttempts
			ro.MaxBackoff = o.MaxBackoff
			// The default retry quota (a token bucket shared by the client) would stop retrying after a few
			// dozen failed uploads during an outage, which is exactly when retries matter.
			ro.RateLimiter = ratelimit.None
			// S3 throttles with 503 SlowDown (retried by default); S3-compatible stores and proxies in front
			// of them also answer 429 Too Many Requests, which the SDK would not retry.
			ro.Retryables = append(ro.Retryables, retry.RetryableHTTPStatusCode{Codes: map[int]struct{}{429: {}}},
				retry.RetryableErrorCode{Codes: map[string]struct{}{"TooManyRequests": {}}})
			ro.Throttles = append(ro.Throttles, retry.ThrottleErrorCode{Codes: map[string]struct{}{"TooManyRequests": {}}})
		})}
		so.APIOptions = append(so.APIOptions, addStallBudget)
		if o.UnsignedPayload {
			so.APIOptions = append(so.APIOptions, addUnsignedPayload)
		}
	})
	b, err := s3blob.OpenBucketV2(ctx, client, u.Host, &s3blob.Options{RequestChecksumCalculation: o.Checksum})
	if err != nil {
		return nil, redact.Error(fmt.Errorf("storage/s3: open bucket %s at %s: %w", u.Host, endpointName(o), err), redact.Secrets(props)...)
	}
	return b, nil
}

func endpointName(o Options) string {
	if o.Endpoint != "" {
		return o.Endpoint
	}
	return "AWS S3 (" + o.Region + ")"
}
