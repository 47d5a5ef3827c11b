// Package manifests embeds the CustomResourceDefinitions and the examples, so that the sandbox installs exactly
// what `kubectl apply -k manifests/` installs and its scenarios apply the examples a user would.
package manifests

import "embed"

// CRDs holds crds/*.yaml.
//
//go:embed crds/*.yaml
var CRDs embed.FS

// Examples holds examples/*.yaml.
//
//go:embed examples/*.yaml
var Examples embed.FS
