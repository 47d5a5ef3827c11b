//go:build tools

/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package hack pins what the tests build from the module graph: kubectl, built from the same Kubernetes release
// the scheduler is built on, so the end-to-end tests need nothing installed but Go.
package hack

import _ "k8s.io/kubernetes/cmd/kubectl"
