/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package admission

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

// resyncInterval is how often the certificates are checked (renewal, the caBundle put back after a reinstall).
const resyncInterval = time.Minute

// Server serves the webhook over HTTPS with the certificates it keeps.
type Server struct {
	// Port to listen on, on every address.
	Port    int
	Handler *Handler
	Certs   *Certificates
}

// Start listens (a failure to is returned), then, until ctx ends, keeps the certificates in sync (retrying with
// backoff until a sync succeeds, then every resyncInterval; failures are logged) and serves.
func (s *Server) Start(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("admission-webhook")
	l, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(s.Port)))
	if err != nil {
		return fmt.Errorf("admission webhook: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle(Path, s.Handler)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{GetCertificate: s.Certs.GetCertificate, MinVersion: tls.VersionTLS12}}
	go s.keepCertificates(ctx, logger)
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown) // best effort: the process is stopping
	}()
	go func() {
		if err := srv.ServeTLS(l, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error(err, "The admission webhook stopped serving")
		}
	}()
	logger.Info("Serving the admission webhook", "port", s.Port, "path", Path, "configuration", s.Certs.Configuration)
	return nil
}

// keepCertificates syncs the certificates until ctx ends.
func (s *Server) keepCertificates(ctx context.Context, logger klog.Logger) {
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Steps: 8, Cap: resyncInterval}
	for ctx.Err() == nil {
		err := s.Certs.Sync(ctx)
		next := resyncInterval
		if err != nil {
			next = backoff.Step()
			logger.Error(err, "Keeping the admission webhook's certificate failed; pods that opt in to Stevedore are refused while "+
				"the API server cannot call the webhook", "retryIn", next)
		} else {
			backoff = wait.Backoff{Duration: time.Second, Factor: 2, Steps: 8, Cap: resyncInterval}
		}
		select {
		case <-ctx.Done():
		case <-time.After(next):
		}
	}
}
