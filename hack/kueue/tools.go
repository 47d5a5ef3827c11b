//go:build tools

/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package kueue pins Kueue's controller manager, which a test runs against the sandbox to check its
// ProvisioningRequest admission check against Stevedore; `make test` builds it into bin/ with its CRDs.
package kueue

import _ "sigs.k8s.io/kueue/cmd/kueue"
