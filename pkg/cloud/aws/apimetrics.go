/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package aws

import (
	"context"
	"errors"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"

	"github.com/stevedore-dev/stevedore/pkg/metrics"
)

// addAPIMetrics puts a middleware on every SDK call that counts it (once, whatever its retries) by service,
// operation and error code, and times it.
func addAPIMetrics(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("StevedoreAPIMetrics",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			start := time.Now()
			out, md, err := next.HandleInitialize(ctx, in)
			service, operation := awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx)
			metrics.CloudAPICalls.WithLabelValues(service, operation, metricErrorCode(err)).Inc()
			metrics.CloudAPIDuration.WithLabelValues(service, operation).Observe(time.Since(start).Seconds())
			return out, md, err
		}), middleware.Before)
}

// metricErrorCode is the API error code of err, "" for none, or a coarse class when the call never got an answer.
func metricErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return "Canceled"
	}
	return "RequestFailed"
}
