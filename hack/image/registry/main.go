/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Command registry serves an in-memory OCI registry (go-containerregistry's) on 127.0.0.1, for tests that publish
// a release and install it from there. It prints "serving on 127.0.0.1:<port>" once it listens.
//
//	go run ./registry --port 0
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

func main() {
	port := flag.Int("port", 0, "port to listen on; 0 picks a free one")
	flag.Parse()
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		fmt.Fprintln(os.Stderr, "registry:", err)
		os.Exit(1)
	}
	fmt.Printf("serving on %s\n", l.Addr())
	srv := &http.Server{Handler: registry.New(), ReadHeaderTimeout: 10 * time.Second}
	if err := srv.Serve(l); err != nil {
		fmt.Fprintln(os.Stderr, "registry:", err)
		os.Exit(1)
	}
}
