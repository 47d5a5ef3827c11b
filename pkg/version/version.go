/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package version reports what a Stevedore binary is.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"

	k8sversion "k8s.io/component-base/version"
)

// Release is the version this tree is, or is on its way to: every default that names an image or a chart names it
// (a test keeps them so), and builds without a version given (make's from git) are Release-dev.
const Release = "v0.2.0"

// Set at link time by the Makefile (-X); Release-dev for go run and go test.
var (
	gitVersion = Release + "-dev"
	gitCommit  = ""
)

// Info describes a build.
type Info struct {
	Stevedore  string `json:"stevedore"`
	Commit     string `json:"commit,omitempty"`
	Kubernetes string `json:"kubernetes"`
	Go         string `json:"go"`
	Platform   string `json:"platform"`
}

// Get returns the build's version information. The Kubernetes version is the k8s.io/kubernetes module the binary
// was built against, which is also what the component-base version reports when the Makefile's ldflags are set.
func Get() Info {
	kube := k8sversion.Get().GitVersion
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range bi.Deps {
			if dep.Path == "k8s.io/kubernetes" {
				kube = dep.Version
			}
		}
	}
	return Info{
		Stevedore:  gitVersion,
		Commit:     gitCommit,
		Kubernetes: kube,
		Go:         runtime.Version(),
		Platform:   runtime.GOOS + "/" + runtime.GOARCH,
	}
}

// String renders the information on one line.
func (i Info) String() string {
	commit := ""
	if i.Commit != "" {
		commit = " (" + i.Commit + ")"
	}
	return fmt.Sprintf("Stevedore %s%s, built on Kubernetes %s with %s for %s", i.Stevedore, commit, i.Kubernetes, i.Go, i.Platform)
}
