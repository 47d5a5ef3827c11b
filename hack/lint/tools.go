//go:build tools

/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package lint pins golangci-lint, built from the module graph by `make lint`.
package lint

import (
	_ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
	_ "golang.org/x/tools/cmd/deadcode"
)
