/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package aws

import (
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// bodyReadOnlyClient sends each request with its body exposed as a plain io.ReadCloser.
//
// Why: the SDK wraps a request body so that, once closed, its WriteTo returns io.EOF, and it closes the body as soon
// as the response's headers are back. net/http's transport, after copying the body, drains it with io.Copy, which
// prefers WriteTo and returns its error as is: when the server answered before that drain ran (a busy machine, an
// answer sent as soon as the body was read), the transport takes the io.EOF for a failed write and closes the
// connection while the response body is still being read ("failed to decode response body, read tcp ...: use of
// closed network connection", every retry alike). Without WriteTo, io.Copy reads, and a closed body's io.EOF is
// the end of the body it is.
type bodyReadOnlyClient struct {
	next aws.HTTPClient
}

// readOnlyBody hides every method of a body but Read and Close.
type readOnlyBody struct{ io.ReadCloser }

func (c bodyReadOnlyClient) Do(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody {
		req = req.Clone(req.Context())
		req.Body = readOnlyBody{req.Body}
	}
	return c.next.Do(req)
}
