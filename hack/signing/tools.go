//go:build tools

/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package signing pins the tools that sign a release and describe what it is built from: cosign (Sigstore) signs
// the image, its SBOM attestation and the checksums; cyclonedx-gomod writes the CycloneDX SBOM of the binary.
package signing

import (
	_ "github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod"
	_ "github.com/sigstore/cosign/v2/cmd/cosign"
)
