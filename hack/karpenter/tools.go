//go:build tools

/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package karpenter pins Karpenter's controller with its kwok cloud provider (the controller Karpenter's own scale
// tests run), which a test runs beside Stevedore to follow the migration guide; `make test` builds it into bin/
// with the CRD of its node class.
package karpenter

import _ "sigs.k8s.io/karpenter/kwok"
