//go:build tools

// Package lint pins golangci-lint, built from the module graph by `make lint`.
package lint

import _ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
