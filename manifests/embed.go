// Package manifests embeds the CustomResourceDefinitions so that the sandbox installs exactly what
// `kubectl apply -k manifests/` installs.
package manifests

import "embed"

// CRDs holds crds/*.yaml.
//
//go:embed crds/*.yaml
var CRDs embed.FS
