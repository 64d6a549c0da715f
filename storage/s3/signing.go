package s3

import (
	"context"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// unsignedPayload is the value of x-amz-content-sha256 for a body the signature does not cover.
const unsignedPayload = "UNSIGNED-PAYLOAD"

// addUnsignedPayload signs every request that has a body as UNSIGNED-PAYLOAD, so that the SDK does not hash
// the body with SHA-256 before sending it over plain HTTP (over HTTPS it never does). It is inserted right
// after endpoint resolution, before the SDK's checksum and payload-hash middleware: both leave a payload hash
// already in the context alone, so the checksum (s3.checksum) is still computed and sent, and the SHA-256 is
// not. Swapping the SDK's ComputePayloadSHA256 for its UnsignedPayload would not do: the checksum middleware
// runs first and hashes the body in the same pass as the checksum.
func addUnsignedPayload(stack *middleware.Stack) error {
	return stack.Finalize.Insert(middleware.FinalizeMiddlewareFunc("icewriter.UnsignedPayload",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			if req, ok := in.Request.(*smithyhttp.Request); ok && req.GetStream() != nil && v4.GetPayloadHash(ctx) == "" {
				ctx = v4.SetPayloadHash(ctx, unsignedPayload)
			}
			return next.HandleFinalize(ctx, in)
		}), "ResolveEndpointV2", middleware.After)
}
