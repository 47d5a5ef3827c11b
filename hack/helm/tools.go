//go:build tools

/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package helm pins the Helm CLI the tests use (helm lint, helm template); `make test` builds it into bin/.
package helm

import _ "helm.sh/helm/v3/cmd/helm"
