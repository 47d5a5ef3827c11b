/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package aws

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// closedAtEOFBody is a request body as the SDK builds it: once closed, Read and WriteTo return io.EOF. Its WriteTo
// waits until the body is closed, as the transport's drain of the body does when its goroutine runs late, after
// the response is back and the SDK has closed the body.
type closedAtEOFBody struct {
	r      *bytes.Reader
	mu     sync.Mutex
	closed chan struct{}
	once   sync.Once
}

func newClosedAtEOFBody(s string) *closedAtEOFBody {
	return &closedAtEOFBody{r: bytes.NewReader([]byte(s)), closed: make(chan struct{})}
}

func (b *closedAtEOFBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-b.closed:
		return 0, io.EOF
	default:
	}
	return b.r.Read(p)
}

func (b *closedAtEOFBody) WriteTo(io.Writer) (int64, error) {
	<-b.closed
	return 0, io.EOF
}

func (b *closedAtEOFBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

// TestARequestBodyClosedEarlyDoesNotCutTheResponse: the server answers a large body as soon as it has read the
// request; the client, like the SDK, closes the request body once Do returns, while the transport has still to
// drain it. Through bodyReadOnlyClient the response is read whole; the transport alone (the control) loses the
// connection mid-body, which is the failure the client exists for.
func TestARequestBodyClosedEarlyDoesNotCutTheResponse(t *testing.T) {
	answer := strings.Repeat("x", 4<<20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)
	call := func(client aws.HTTPClient) error {
		body := newClosedAtEOFBody("Action=DescribeInstanceTypes&Version=2016-11-15")
		req, err := http.NewRequest(http.MethodPost, srv.URL, body)
		if err != nil {
			return err
		}
		req.ContentLength = int64(body.r.Len())
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_ = body.Close() // as the SDK does once the response's headers are back
		got, err := io.ReadAll(resp.Body)
		if err == nil && len(got) != len(answer) {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	for i := range 3 {
		if err := call(bodyReadOnlyClient{next: &http.Client{Transport: &http.Transport{}}}); err != nil {
			t.Fatalf("call %d through bodyReadOnlyClient: %v", i, err)
		}
	}
	// the control: the connection is closed once the drain returns, a goroutine switch after the request body is
	// closed, so the 4 MiB answer is cut; three whole answers in a row would mean the failure no longer shows
	for range 3 {
		if err := call(&http.Client{Transport: &http.Transport{}}); err != nil {
			t.Logf("the control fails as expected: %v", err)
			return
		}
	}
	t.Error("the control (the transport with the body's WriteTo) read the response whole: the test no longer shows the failure")
}
