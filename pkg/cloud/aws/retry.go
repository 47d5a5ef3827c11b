/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package aws

import (
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
)

// withInterruptedResponsesRetried has the SDK retry, besides what its retryer retries, a call whose response was
// cut while its body was read ("failed to decode response body, unexpected EOF", a connection closed or reset
// mid-body): the SDK's retryer takes those for malformed answers and gives up at once, and one lost response to
// the first catalog read left nothing to launch until the next read. The calls Stevedore makes are safe to repeat
// (reads, and writes with a client token or that repeat as a no-op or a conflict Stevedore already handles).
func withInterruptedResponsesRetried(cfg *aws.Config) {
	base := cfg.Retryer
	cfg.Retryer = func() aws.Retryer {
		var r aws.Retryer
		if base != nil {
			r = base()
		} else {
			r = retry.NewStandard()
		}
		return interruptedRetryer{Retryer: r}
	}
}

type interruptedRetryer struct{ aws.Retryer }

// IsErrorRetryable reports whether the base retryer retries err, or err is a response cut mid-body.
func (r interruptedRetryer) IsErrorRetryable(err error) bool {
	return r.Retryer.IsErrorRetryable(err) || interruptedResponse(err)
}

// interruptedResponse reports whether err is the failure to read a response's body because the connection ended
// before the body did.
func interruptedResponse(err error) bool {
	var de *smithy.DeserializationError
	if !errors.As(err, &de) {
		return false
	}
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET)
}
