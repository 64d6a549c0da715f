package s3

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go/middleware"

	"github.com/icewriter/iceberg/storage"
)

// httpClient returns the client every request goes through: the configured one (proxy and connect timeout
// from the properties) with an idle timeout on each connection and larger buffers. It is frozen, so that the
// S3 client does not re-derive the transport (and drop the wrapped dialer) from its defaults mode.
func httpClient(c aws.HTTPClient, timeout time.Duration) aws.HTTPClient {
	bc := buildableClient(c, timeout)
	if bc == nil {
		return c // a client of the caller's own: left as it is
	}
	return bc.Freeze()
}

// buildableClient is httpClient before it is frozen, or nil for a client of the caller's own.
func buildableClient(c aws.HTTPClient, timeout time.Duration) *awshttp.BuildableClient {
	bc, ok := c.(*awshttp.BuildableClient)
	if !ok {
		if c != nil {
			return nil
		}
		bc = awshttp.NewBuildableClient()
	}
	// The SDK's own read timeout covers reads only, and would wrap the connection a second time.
	return bc.WithReadTimeout(0).WithTransportOptions(func(tr *http.Transport) {
		storage.WithIdleTimeout(tr, timeout)
		tuneBuffers(tr)
	})
}

// transportBufferSize is each connection's write and read buffer (net/http's default is 4 KiB): a manifest
// or manifest list upload, headers and body, goes out in one write syscall instead of one per 4 KiB, and a
// ranged read of a Parquet footer comes in with few reads. Two buffers per kept-alive connection; a writer
// keeps a few.
const transportBufferSize = 64 << 10

// tuneBuffers sets tr's buffers to transportBufferSize where they are left at the default.
func tuneBuffers(tr *http.Transport) {
	if tr.WriteBufferSize == 0 {
		tr.WriteBufferSize = transportBufferSize
	}
	if tr.ReadBufferSize == 0 {
		tr.ReadBufferSize = transportBufferSize
	}
}

// stallAttempts is how many attempts of one request may stall before the request fails: each gets an equal
// share of the request timeout, and a server that stalled twice in a row is not answering.
const stallAttempts = 2

type stallCountKey struct{}

// addStallBudget counts the stalled attempts of each request: a middleware before the retry loop gives the
// request a counter, one inside it marks the error of the last allowed stalled attempt as not retryable.
func addStallBudget(stack *middleware.Stack) error {
	err := stack.Finalize.Insert(middleware.FinalizeMiddlewareFunc("icewriter.StallBudget",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			return next.HandleFinalize(context.WithValue(ctx, stallCountKey{}, new(atomic.Int32)), in)
		}), "Retry", middleware.Before)
	if err != nil {
		return err
	}
	return stack.Finalize.Insert(middleware.FinalizeMiddlewareFunc("icewriter.StallCount",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleFinalize(ctx, in)
			if err != nil && errors.Is(err, storage.ErrStalled) {
				if n, ok := ctx.Value(stallCountKey{}).(*atomic.Int32); ok && n.Add(1) >= stallAttempts {
					err = &finalStall{err}
				}
			}
			return out, md, err
		}), "Retry", middleware.After)
}

// finalStall is a stall the request may not retry.
type finalStall struct{ error }

func (e *finalStall) Unwrap() error { return e.error }

// RetryableError tells the SDK's retryer not to retry (it asks this before its connection-error checks).
func (e *finalStall) RetryableError() bool { return false }

// stallRetryer retries a stalled attempt at once: it already waited a whole request timeout.
type stallRetryer struct{ aws.RetryerV2 }

func (r stallRetryer) RetryDelay(attempt int, err error) (time.Duration, error) {
	if errors.Is(err, storage.ErrStalled) {
		return 0, nil
	}
	return r.RetryerV2.RetryDelay(attempt, err)
}
