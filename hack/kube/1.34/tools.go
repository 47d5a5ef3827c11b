//go:build tools

/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package kube pins the kube-apiserver and kube-controller-manager of Kubernetes 1.34 that the version matrix runs
// Stevedore against (make test-versions); `make kube-binaries` builds them into bin/kube/1.34/.
package kube

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
